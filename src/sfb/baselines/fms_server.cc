#include "sfb/baselines/fms_server.h"

#include <map>
#include <optional>
#include <vector>

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "sfb/baselines/ps_codec.h"
#include "sfb/core/error.h"
#include "sfb/core/timer.h"

namespace sfb::baselines {

FmsServer::FmsServer(const FmsConfig& cfg, double peer_timeout_s, comm::Transport& transport, runtime::ModelProx prox)
    : peer_timeout_s_(peer_timeout_s), t_(transport), prox_(std::move(prox)), S_(static_cast<int>(cfg.servers)) {
  P_ = t_.size() - S_;
  s_ = t_.rank() - P_;
  SFB_CHECK(P_ >= 1 && s_ >= 0 && s_ < S_, "rank {} of {} is not one of the {} parameter servers", t_.rank(), t_.size(),
            S_);
}

void FmsServer::check_timeout() const {
  if (last_progress_.seconds() <= peer_timeout_s_) return;
  if (gathering_) {
    std::vector<int> missing;
    const auto got = shards_.find(version_);
    for (int s = 0; s < S_; ++s)
      if (s != s_ && (got == shards_.end() || got->second.empty() || got->second[static_cast<size_t>(s)].data.empty()))
        missing.push_back(P_ + s);
    throw CommError(
        fmt::format("server rank {}: nothing for {} s (runtime.peer_timeout_s) at version {}; waiting for "
                    "the rows of servers {}",
                    t_.rank(), peer_timeout_s_, version_, fmt::join(missing, ", ")));
  }
  std::vector<int> missing;
  const auto slot = pushes_.find(version_);
  for (int p = 0; p < P_; ++p) {
    const bool pushed = slot != pushes_.end() && !slot->second[static_cast<size_t>(p)].data.empty();
    if (!bye_[static_cast<size_t>(p)] && !pushed) missing.push_back(p);
  }
  throw CommError(
      fmt::format("server rank {}: nothing for {} s (runtime.peer_timeout_s) at version {}; waiting for "
                  "workers {}",
                  t_.rank(), peer_timeout_s_, version_, fmt::join(missing, ", ")));
}

void FmsServer::on_init(comm::Message& m, const PsHeader& h) {
  if (m.src != 0 || version_ >= 0)
    throw CommError(fmt::format("server rank {}: INIT from rank {} (only rank 0 sends one, once)", t_.rank(), m.src));
  row_begin_ = h.row_begin;
  rows_.resize(h.rows, h.cols);
  std::copy(ps_payload(m.data), ps_payload(m.data) + h.rows * h.cols, rows_.data());
  version_ = h.clock;
  spdlog::info("parameter server {}: rows [{}, {}) x {} from version {}", s_, row_begin_, row_begin_ + h.rows, h.cols,
               version_);
}

void FmsServer::on_push(comm::Message& m, const PsHeader& h) {
  if (version_ < 0) {
    // PUSH messages that arrive before rank 0's INIT (no order holds across senders) wait.
    early_.push_back(std::move(m));
    return;
  }
  if (h.row_begin != row_begin_ || h.rows != rows_.rows() || h.cols != rows_.cols() || h.clock < version_)
    throw CommError(
        fmt::format("server rank {}: PUSH from rank {} of rows [{}, {}) x {} clock {}; this server holds "
                    "rows [{}, {}) x {} at version {}",
                    t_.rank(), m.src, h.row_begin, h.row_begin + h.rows, h.cols, h.clock, row_begin_,
                    row_begin_ + rows_.rows(), rows_.cols(), version_));
  auto& slot = pushes_[h.clock];
  slot.resize(static_cast<size_t>(P_));
  if (!slot[static_cast<size_t>(m.src)].data.empty())
    throw CommError(fmt::format("server rank {}: second PUSH of clock {} from rank {}", t_.rank(), h.clock, m.src));
  slot[static_cast<size_t>(m.src)] = std::move(m);
  ++push_count_[h.clock];
  publish_complete_clocks();
}

void FmsServer::on_shard(comm::Message& m, const PsHeader& h) {
  const int from = m.src - P_;
  if (version_ < 0 && prox_.prox) {
    early_.push_back(std::move(m));  // another server may be a clock ahead of rank 0's INIT to this one
    return;
  }
  if (!prox_.prox || version_ < 0 || h.clock < version_ || h.cols != rows_.cols())
    throw CommError(
        fmt::format("server rank {}: unexpected SHARD of clock {} ({} columns) from server rank {} at "
                    "version {}",
                    t_.rank(), h.clock, h.cols, m.src, version_));
  auto& slot = shards_[h.clock];
  slot.resize(static_cast<size_t>(S_));
  if (!slot[static_cast<size_t>(from)].data.empty())
    throw CommError(fmt::format("server rank {}: second SHARD of clock {} from rank {}", t_.rank(), h.clock, m.src));
  slot[static_cast<size_t>(from)] = std::move(m);
  publish_complete_clocks();
}

// Adds clock version_'s pushes in worker-rank order, each followed by the scaling prox.
void FmsServer::apply_pushes() {
  for (const auto& pm : pushes_[version_]) {
    const ConstMatrixMap push(ps_payload(pm.data), rows_.rows(), rows_.cols());
    if (prox_.scale)
      rows_ = static_cast<float>(prox_.scale(version_)) * (rows_ + push);
    else
      rows_ += push;
  }
  pushes_.erase(version_);
  push_count_.erase(version_);
}

// With S > 1: once every other server's rows of version_ are here, assembles W, applies the
// general prox once per worker's batch and keeps this server's rows. False while rows are missing.
bool FmsServer::gathered_prox() {
  auto& got = shards_[version_];
  int have = 0;
  for (const auto& m : got) have += m.data.empty() ? 0 : 1;
  if (have < S_ - 1) return false;
  int64_t J = row_begin_ + rows_.rows();
  for (const auto& m : got)
    if (!m.data.empty()) {
      const PsHeader h = decode_ps_header(m.data, m.src);
      J = std::max(J, h.row_begin + h.rows);
    }
  whole_.resize(J, rows_.cols());
  whole_.middleRows(row_begin_, rows_.rows()) = rows_;
  for (const auto& m : got)
    if (!m.data.empty()) {
      const PsHeader h = decode_ps_header(m.data, m.src);
      whole_.middleRows(h.row_begin, h.rows) = ConstMatrixMap(ps_payload(m.data), h.rows, h.cols);
    }
  shards_.erase(version_);
  for (int p = 0; p < P_; ++p) prox_.prox(view(whole_), version_);
  rows_ = whole_.middleRows(row_begin_, rows_.rows());
  return true;
}

// Sends version_ + 1 to every worker.
void FmsServer::publish() {
  ++version_;
  ++st_.clocks;
  auto buf = std::make_shared<const comm::Bytes>(
      encode_ps(PsType::kPull, version_, row_begin_, rows_.rows(), rows_.cols(), rows_.data()));
  for (int p = 0; p < P_; ++p) t_.send_shared(p, comm::kTagPs, buf);
}

// Applies complete clocks in order, each in worker-rank order with the model's proximal step, and
// publishes every new version.
void FmsServer::publish_complete_clocks() {
  for (;;) {
    if (gathering_) {
      Stopwatch sw;
      const bool done = gathered_prox();
      st_.apply_s += sw.seconds();
      if (!done) return;
      gathering_ = false;
      publish();
      continue;
    }
    const auto c = push_count_.find(version_);
    if (c == push_count_.end() || c->second < P_) return;
    Stopwatch sw;
    apply_pushes();
    if (prox_.prox && S_ > 1) {
      auto buf = std::make_shared<const comm::Bytes>(
          encode_ps(PsType::kShard, version_, row_begin_, rows_.rows(), rows_.cols(), rows_.data()));
      for (int s = 0; s < S_; ++s)
        if (s != s_) t_.send_shared(P_ + s, comm::kTagPs, buf);
      gathering_ = true;
      st_.apply_s += sw.seconds();
      continue;
    }
    if (prox_.prox)
      for (int p = 0; p < P_; ++p) prox_.prox(view(rows_), version_);
    st_.apply_s += sw.seconds();
    publish();
  }
}

void FmsServer::handle(comm::Message& m) {
  if (m.tag != comm::kTagPs || m.src >= P_ + S_ || m.src == t_.rank())
    throw CommError(fmt::format("server rank {}: unexpected message (tag {}) from rank {}", t_.rank(), m.tag, m.src));
  const PsHeader h = decode_ps_header(m.data, m.src);
  if ((m.src >= P_) != (h.type == PsType::kShard))
    throw CommError(fmt::format("server rank {}: message of type {} from {} rank {}", t_.rank(),
                                static_cast<uint32_t>(h.type), m.src >= P_ ? "server" : "worker", m.src));
  switch (h.type) {
    case PsType::kShard: return on_shard(m, h);
    case PsType::kInit: return on_init(m, h);
    case PsType::kPush: return on_push(m, h);
    case PsType::kBye:
      if (!bye_[static_cast<size_t>(m.src)]) {
        bye_[static_cast<size_t>(m.src)] = 1;
        ++byes_;
      }
      return;
    case PsType::kPull: throw CommError(fmt::format("server rank {}: PULL from worker rank {}", t_.rank(), m.src));
  }
}

ServerStats FmsServer::run() {
  bye_.assign(static_cast<size_t>(P_), 0);
  last_progress_.reset();
  Backoff backoff;
  while (byes_ < P_) {
    std::optional<comm::Message> m;
    if (version_ >= 0 && !early_.empty()) {
      m = std::move(early_.back());
      early_.pop_back();
    } else {
      m = t_.try_recv();
    }
    if (!m) {
      check_timeout();
      backoff.idle();
      continue;
    }
    backoff.reset();
    last_progress_.reset();
    handle(*m);
  }
  t_.flush();
  st_.traffic = t_.total_counters();
  return st_;
}

}  // namespace sfb::baselines
