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
  // Rank 0 seeds the servers with the initial W (model.init or the checkpoint).
  if (rank_ == 0) {
    for (int s = 0; s < S_; ++s) {
      const int64_t b = shard_begin(host.J, s, S_), e = shard_begin(host.J, s + 1, S_);
      host.transport->send(
          host.workers + s, comm::kTagPs,
          encode_ps(PsType::kInit, host.start_clock, b, e - b, host.D, host.initial_W->data() + b * host.D));
    }
  }
}

void FmsExchange::send_own(const SfBatchPtr& batch) {
  dense_update(*batch, dW_);
  if (rmw_) {
    auto own = std::make_shared<const Matrix>(dW_);
    own_.emplace(batch->clock, own);
    auto item = std::make_shared<SfBatch>();
    item->kind = SfBatch::Kind::kOwnDense;
    item->clock = batch->clock;
    item->J = host_.J;
    item->D = host_.D;
    item->dense = std::move(own);
    host_.deliver(std::move(item));
  }
  for (int s = 0; s < S_; ++s) {
    const int64_t b = shard_begin(host_.J, s, S_), e = shard_begin(host_.J, s + 1, S_);
    host_.transport->send(host_.workers + s, comm::kTagPs,
                          encode_ps(PsType::kPush, batch->clock, b, e - b, host_.D, dW_.data() + b * host_.D));
  }
}

void FmsExchange::on_message(comm::Message&& m) {
  const int s = m.src - host_.workers;
  if (s < 0 || s >= S_)
    throw CommError(fmt::format("rank {}: parameter-server message from rank {}, which is not a server (ranks {}..{})",
                                rank_, m.src, host_.workers, host_.workers + S_ - 1));
  const PsHeader h = decode_ps_header(m.data, m.src);
  const int64_t b = shard_begin(host_.J, s, S_), e = shard_begin(host_.J, s + 1, S_);
  if (h.type != PsType::kPull || h.row_begin != b || h.rows != e - b || h.cols != host_.D || h.clock < next_version_)
    throw CommError(
        fmt::format("rank {}: from server rank {}: type {} rows [{}, {}) x {} version {}; expected a PULL "
                    "of rows [{}, {}) x {} version >= {}",
                    rank_, m.src, static_cast<uint32_t>(h.type), h.row_begin, h.row_begin + h.rows, h.cols, h.clock, b,
                    e, host_.D, next_version_));
  auto& a = versions_[h.clock];
  if (!a.W) a.W = std::make_shared<Matrix>(host_.J, host_.D);
  std::copy(ps_payload(m.data), ps_payload(m.data) + h.rows * h.cols, a.W->data() + b * host_.D);
  ++a.shards;
  deliver_complete_versions();
}

// Versions complete in order: every server sends them in order. With read-my-writes each carries
// the own updates it does not include yet.
void FmsExchange::deliver_complete_versions() {
  while (!versions_.empty() && versions_.begin()->first == next_version_ && versions_.begin()->second.shards == S_) {
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
