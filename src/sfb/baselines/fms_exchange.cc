#include "sfb/baselines/fms_exchange.h"

#include <fmt/format.h>

#include "sfb/baselines/dense_update.h"
#include "sfb/baselines/ps_codec.h"
#include "sfb/core/error.h"

namespace sfb::baselines {

void FmsExchange::start(const runtime::ExchangeHost& host) {
  host_ = host;
  rank_ = host.transport->rank();
  next_version_ = host.start_clock + 1;
  int64_t total = 0;
  for (int s = 0; s < S_; ++s) {
    blocks_.push_back(ps_blocks(host.rows(), host.cols(), s, S_));
    first_block_.push_back(total);
    total += blocks_.back().count();
  }
  in_flight_.assign(static_cast<size_t>(S_), 0);
  // Rank 0 seeds the servers with the initial W (model.init or the checkpoint).
  if (rank_ == 0) {
    for (int s = 0; s < S_; ++s) {
      // Shards of the stored matrix's rows: the major dimension of the workers' layout.
      const int64_t b = shard_begin(host.rows(), s, S_), e = shard_begin(host.rows(), s + 1, S_);
      host.transport->send(
          host.workers + s, comm::kTagPs,
          encode_ps(PsType::kInit, host.start_clock, b, e - b, host.cols(), host.initial_W->data() + b * host.cols()));
    }
  }
}

void FmsExchange::send_own(const SfBatchPtr& batch) {
  auto dW = std::make_shared<Matrix>();
  dense_update(*batch, host_.layout, *dW);
  std::shared_ptr<const Matrix> update = std::move(dW);
  if (rmw_) {
    const auto& own = update;
    own_.emplace(batch->clock, own);
    auto item = std::make_shared<SfBatch>();
    item->kind = SfBatch::Kind::kOwnDense;
    item->clock = batch->clock;
    item->J = host_.J;
    item->D = host_.D;
    item->dense = own;
    host_.deliver(std::move(item));
  }
  push(batch->clock, std::move(update));
}

void FmsExchange::push(int64_t clock, std::shared_ptr<const Matrix> dW) {
  outgoing_.push_back({clock, std::move(dW), std::vector<int64_t>(static_cast<size_t>(S_), 0)});
  pump();
}

// Pushes blocks while the window allows (no window for clock-granular servers), one block per
// server in turn, oldest update first.
void FmsExchange::pump() {
  for (bool sent = true; sent && !outgoing_.empty();) {
    sent = false;
    for (int s = 0; s < S_; ++s) {
      const PsBlocks& b = blocks_[static_cast<size_t>(s)];
      auto& flying = in_flight_[static_cast<size_t>(s)];
      for (auto& o : outgoing_) {
        auto& k = o.next[static_cast<size_t>(s)];
        if (k >= b.count()) continue;  // this update's blocks of s are all out
        if (flying >= kWindow && !whole_clocks_) break;
        const int64_t r0 = b.block_begin(k), n = b.block_rows(k);
        host_.transport->send(host_.workers + s, comm::kTagPs,
                              encode_ps(PsType::kPush, o.clock, r0, n, host_.cols(), o.dW->data() + r0 * host_.cols()));
        ++k;
        ++flying;
        sent = true;
        break;
      }
    }
    while (!outgoing_.empty()) {
      const auto& o = outgoing_.front();
      bool done = true;
      for (int s = 0; s < S_; ++s)
        done = done && o.next[static_cast<size_t>(s)] >= blocks_[static_cast<size_t>(s)].count();
      if (!done) break;
      outgoing_.pop_front();
    }
  }
}

void FmsExchange::on_message(comm::Message&& m) {
  const int s = m.src - host_.workers;
  if (s < 0 || s >= S_)
    throw CommError(fmt::format("rank {}: parameter-server message from rank {}, which is not a server (ranks {}..{})",
                                rank_, m.src, host_.workers, host_.workers + S_ - 1));
  const PsHeader h = decode_ps_header(m.data, m.src);
  const PsBlocks& bl = blocks_[static_cast<size_t>(s)];
  const int64_t k = h.type == PsType::kPull && h.cols == host_.cols() ? bl.block_of(h.row_begin, h.rows) : -1;
  auto& a = versions_[std::max(h.clock, next_version_)];
  if (a.block.empty()) a.block.assign(static_cast<size_t>(first_block_.back() + blocks_.back().count()), 0);
  const auto slot = static_cast<size_t>(first_block_[static_cast<size_t>(s)] + k);
  if (k < 0 || h.clock < next_version_ || a.block[slot])
    throw CommError(
        fmt::format("rank {}: from server rank {}: type {} rows [{}, {}) x {} version {}; expected a PULL of a "
                    "block of {} rows of [{}, {}) x {}, once, of version >= {}",
                    rank_, m.src, static_cast<uint32_t>(h.type), h.row_begin, h.row_begin + h.rows, h.cols, h.clock,
                    bl.rows_per_block, bl.begin, bl.end, host_.cols(), next_version_));
  a.block[slot] = 1;
  if (!a.W) a.W = std::make_shared<Matrix>(host_.rows(), host_.cols());
  std::copy(ps_payload(m.data), ps_payload(m.data) + h.rows * h.cols, a.W->data() + h.row_begin * host_.cols());
  a.rows += h.rows;
  --in_flight_[static_cast<size_t>(s)];
  pump();
  deliver_complete_versions();
}

// Versions complete in order: every server sends them in order. With read-my-writes each carries
// the own updates it does not include yet.
void FmsExchange::deliver_complete_versions() {
  while (!versions_.empty() && versions_.begin()->first == next_version_ &&
         versions_.begin()->second.rows == host_.rows()) {
    own_.erase(own_.begin(), own_.lower_bound(next_version_));  // clocks < next_version_ are in it
    for (const auto& [clock, dW] : own_) *versions_.begin()->second.W += *dW;
    auto item = std::make_shared<SfBatch>();
    item->kind = SfBatch::Kind::kReplaceW;
    item->clock = next_version_ - 1;  // W after every worker's clock next_version_ - 1
    item->J = host_.J;
    item->D = host_.D;
    item->dense = std::move(versions_.begin()->second.W);
    versions_.erase(versions_.begin());
    ++next_version_;
    host_.deliver(std::move(item));
  }
}

void FmsExchange::finish() {
  for (int s = 0; s < S_; ++s)
    host_.transport->send(host_.workers + s, comm::kTagPs, encode_ps(PsType::kBye, 0, 0, 0, 0, nullptr));
}

}  // namespace sfb::baselines
