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

FmsServer::FmsServer(const FmsConfig& cfg, double peer_timeout_s, comm::Transport& transport)
    : peer_timeout_s_(peer_timeout_s), t_(transport), S_(static_cast<int>(cfg.servers)) {
  P_ = t_.size() - S_;
  s_ = t_.rank() - P_;
  SFB_CHECK(P_ >= 1 && s_ >= 0 && s_ < S_, "rank {} of {} is not one of the {} parameter servers", t_.rank(), t_.size(),
            S_);
}

void FmsServer::check_timeout() const {
  if (last_progress_.seconds() <= peer_timeout_s_) return;
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

// Applies complete clocks in order, each in worker-rank order, and publishes every new version.
void FmsServer::publish_complete_clocks() {
  for (auto c = push_count_.find(version_); c != push_count_.end() && c->second == P_; c = push_count_.find(version_)) {
    Stopwatch sw;
    for (const auto& pm : pushes_[version_]) rows_ += ConstMatrixMap(ps_payload(pm.data), rows_.rows(), rows_.cols());
    st_.apply_s += sw.seconds();
    pushes_.erase(version_);
    push_count_.erase(c);
    ++version_;
    ++st_.clocks;
    auto buf = std::make_shared<const comm::Bytes>(
        encode_ps(PsType::kPull, version_, row_begin_, rows_.rows(), rows_.cols(), rows_.data()));
    for (int p = 0; p < P_; ++p) t_.send_shared(p, comm::kTagPs, buf);
  }
}

void FmsServer::handle(comm::Message& m) {
  if (m.tag != comm::kTagPs || m.src >= P_)
    throw CommError(fmt::format("server rank {}: unexpected message (tag {}) from rank {}", t_.rank(), m.tag, m.src));
  const PsHeader h = decode_ps_header(m.data, m.src);
  switch (h.type) {
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
