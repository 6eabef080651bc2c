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
  if (rank_ == 0) send_initial_w(host);
}

// Rank 0 seeds the servers with the initial W (model.init or the checkpoint): shards of the stored
// matrix's rows (the major dimension of the workers' layout), block k of every server before block
// k + 1, at most kWindow blocks a server unanswered. The window bounds what a server holds of them:
// a transport receives whatever arrives, and a server starved of CPU (5 ranks on 2 cores) held 40-50
// MiB of a 64 MiB W's INIT blocks in its inbox when rank 0 only flushed every 8 MiB. No PULL can come
// meanwhile: a server answers pushes of clock start_clock, and rank 0 pushes none before start() ends.
void FmsExchange::send_initial_w(const runtime::ExchangeHost& host) {
  std::vector<int64_t> unanswered(static_cast<size_t>(S_), 0);
  int64_t outstanding = 0;
  const auto await_ack = [&] {
    comm::Message m;
    try {
      m = host.transport->recv(comm::kTagPs);
    } catch (const CommError& e) {
      throw CommError(
          fmt::format("{}; rank 0 was seeding the servers with W, {} INIT blocks unanswered (none came "
                      "through the fms exchange: server ranks {}..{})",
                      e.what(), outstanding, host.workers, host.workers + S_ - 1));
    }
    const int s = m.src - host.workers;
    const PsHeader h = decode_ps_header(m.data, m.src);
    if (s < 0 || s >= S_ || h.type != PsType::kInitAck || unanswered[static_cast<size_t>(s)] == 0)
      throw CommError(
          fmt::format("rank 0: from rank {}: parameter-server message of type {} while seeding the "
                      "servers; expected an INIT_ACK from a server (ranks {}..{}) with INIT blocks unanswered",
                      m.src, static_cast<uint32_t>(h.type), host.workers, host.workers + S_ - 1));
    --unanswered[static_cast<size_t>(s)];
    --outstanding;
  };
  for (int64_t k = 0, more = 1; more; ++k) {
    more = 0;
    for (int s = 0; s < S_; ++s) {
      const PsBlocks& b = blocks_[static_cast<size_t>(s)];
      if (k >= b.count()) continue;
      more = 1;
      while (unanswered[static_cast<size_t>(s)] >= kWindow) await_ack();
      const int64_t r0 = b.block_begin(k), n = b.block_rows(k);
      host.transport->send(
          host.workers + s, comm::kTagPs,
          encode_ps(PsType::kInit, host.start_clock, r0, n, host.cols(), host.initial_W->data() + r0 * host.cols()));
      ++unanswered[static_cast<size_t>(s)];
      ++outstanding;
    }
  }
  while (outstanding > 0) await_ack();
}

void FmsExchange::send_own(const SfBatchPtr& batch) {
  if (rmw_) {
    own_.emplace(batch->clock, batch);
    auto item = std::make_shared<runtime::DenseUpdate>();
    item->kind = runtime::DenseUpdate::Kind::kOwn;
    item->clock = batch->clock;
    item->own = batch;
    host_.deliver(std::move(item));
  }
  push(batch);
}

void FmsExchange::push(const SfBatchPtr& batch) {
  outgoing_.push_back({batch, std::vector<int64_t>(static_cast<size_t>(S_), 0)});
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
        dense_update_rows(*o.batch, host_.layout, r0, n, block_);
        host_.transport->send(host_.workers + s, comm::kTagPs,
                              encode_ps(PsType::kPush, o.batch->clock, r0, n, host_.cols(), block_.data()));
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
  a.rows += h.rows;
  --in_flight_[static_cast<size_t>(s)];
  // Every server sends its versions in order, so the block that completes version v comes after
  // every block of v - 1: the versions' last blocks reach the update thread in clock order.
  const bool last = a.rows == host_.rows();
  SFB_ENFORCE(!last || h.clock == next_version_, "rank {}: version {} complete before version {}", rank_, h.clock,
              next_version_);
  deliver_pulled(h, m, last);
  if (last) {
    versions_.erase(h.clock);
    ++next_version_;
    own_.erase(own_.begin(), own_.lower_bound(next_version_));  // clocks < next_version_ are in it
  }
  pump();
}

// One pulled block to the update thread: the servers' rows of version h.clock (W after every worker's
// clock h.clock - 1), with read-my-writes plus this worker's own updates not in that version yet.
void FmsExchange::deliver_pulled(const PsHeader& h, const comm::Message& m, bool last) {
  auto rows = pulled_.acquire(h.rows, h.cols);
  if (!rows) return;  // aborted
  std::copy(ps_payload(m.data), ps_payload(m.data) + h.rows * h.cols, rows->data());
  for (auto it = own_.lower_bound(h.clock); it != own_.end(); ++it) {
    dense_update_rows(*it->second, host_.layout, h.row_begin, h.rows, own_rows_);
    *rows += own_rows_;
  }
  auto item = std::make_shared<runtime::DenseUpdate>();
  item->kind = runtime::DenseUpdate::Kind::kReplace;
  item->clock = h.clock - 1;
  item->row_begin = h.row_begin;
  item->rows = h.rows;
  item->block = std::move(rows);
  item->last = last;
  host_.deliver(std::move(item));
}

void send_bye_to_servers(comm::Transport& t, int workers) {
  for (int s = workers; s < t.size(); ++s) t.send(s, comm::kTagPs, encode_ps(PsType::kBye, 0, 0, 0, 0, nullptr));
}

void FmsExchange::finish() { send_bye_to_servers(*host_.transport, host_.workers); }

}  // namespace sfb::baselines
