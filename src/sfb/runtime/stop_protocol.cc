#include "sfb/runtime/stop_protocol.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "sfb/core/error.h"

namespace sfb::runtime {

StopProtocol::StopProtocol(int rank, int workers, int64_t max_clocks, StopProtocolIo io)
    : rank_(rank), workers_(workers), max_clocks_(max_clocks), io_(std::move(io)) {
  if (rank_ == 0) {
    replied_.assign(static_cast<size_t>(workers_), 0);
    done_.assign(static_cast<size_t>(workers_), 0);
    all_stats_.resize(static_cast<size_t>(workers_));
  }
}

void StopProtocol::send_all(ControlType type, int64_t value) {
  for (int q = 1; q < workers_; ++q) io_.send(q, type, value, {});
}

void StopProtocol::request_stop(StopReason reason, const std::string& detail, int signal) {
  if (stop_asked_) return;
  stop_asked_ = true;
  if (rank_ != 0) {
    io_.send(0, ControlType::kStopRequest, signal, {});
    return;
  }
  // Rank 0 opens the query: pause everyone, collect the clocks they have started.
  stop_reason_ = reason;
  stop_detail_ = detail;
  spdlog::info("stopping: {}{}", to_string(reason), detail.empty() ? "" : " (" + detail + ")");
  max_started_ = io_.pause();
  query_open_ = true;
  std::fill(replied_.begin(), replied_.end(), 0);
  send_all(ControlType::kStopQuery, 0);
  if (workers_ == 1) close_query();
}

void StopProtocol::close_query() {
  // Every rank computes up to the furthest clock any rank had started.
  const int64_t at = std::min(max_started_, max_clocks_);
  query_open_ = false;
  io_.resume(at);
  send_all(ControlType::kStopAt, at);
}

void StopProtocol::local_done(const RankStats& stats) {
  done_sent_ = true;
  if (rank_ != 0) {
    io_.send(0, ControlType::kDone, 0, pack_stats(stats));
    return;
  }
  all_stats_[0] = stats;
  done_[0] = 1;
}

void StopProtocol::handle(const ControlMsg& m, int from) {
  const bool to_root =
      m.type == ControlType::kStopRequest || m.type == ControlType::kStopReply || m.type == ControlType::kDone;
  if (to_root != (rank_ == 0) || (!to_root && from != 0) || from < 0 || from >= workers_)
    throw CommError(fmt::format("rank {}: control message type {} from rank {} is not meant for this rank", rank_,
                                static_cast<int>(m.type), from));
  switch (m.type) {
    case ControlType::kStopRequest: return on_stop_request(from, m.value);
    case ControlType::kStopQuery: return on_stop_query(from);
    case ControlType::kStopReply: return on_stop_reply(from, m.value);
    case ControlType::kStopAt: return on_stop_at(from, m.value);
    case ControlType::kDone: return on_done(from, m.payload);
    case ControlType::kFinal: return on_final(from);
    case ControlType::kDrift:  // the comm thread reads drift sketches before the stop protocol sees a message
      throw CommError(
          fmt::format("rank {}: a replica-drift sketch from rank {} reached the stop protocol", rank_, from));
  }
}

void StopProtocol::on_stop_request(int from, int64_t signal) {
  request_stop(StopReason::kSignal, fmt::format("rank {} received signal {}", from, signal));
}

void StopProtocol::on_stop_query(int /*from*/) { io_.send(0, ControlType::kStopReply, io_.pause(), {}); }

void StopProtocol::on_stop_reply(int from, int64_t started) {
  if (!query_open_ || replied_[static_cast<size_t>(from)])
    throw CommError(fmt::format("rank 0: unexpected STOP_REPLY from rank {}", from));
  replied_[static_cast<size_t>(from)] = 1;
  max_started_ = std::max(max_started_, started);
  if (std::count(replied_.begin() + 1, replied_.end(), 1) == workers_ - 1) close_query();
}

void StopProtocol::on_stop_at(int /*from*/, int64_t stop_at) { io_.resume(stop_at); }

void StopProtocol::on_done(int from, const std::vector<int64_t>& stats) {
  if (done_[static_cast<size_t>(from)]) throw CommError(fmt::format("rank 0: a second DONE from rank {}", from));
  all_stats_[static_cast<size_t>(from)] = unpack_stats(from, stats);
  done_[static_cast<size_t>(from)] = 1;
}

void StopProtocol::on_final(int /*from*/) { got_final_ = true; }

bool StopProtocol::try_finish() {
  if (!done_sent_) return false;
  if (rank_ != 0) return got_final_;
  if (query_open_ || std::count(done_.begin(), done_.end(), 1) < workers_) return false;
  send_all(ControlType::kFinal, 0);
  return true;
}

std::string StopProtocol::waiting_for() const {
  std::vector<int> missing;
  if (query_open_) {
    for (int q = 1; q < workers_; ++q)
      if (!replied_[static_cast<size_t>(q)]) missing.push_back(q);
    return fmt::format("STOP_REPLY from ranks {}", fmt::join(missing, ", "));
  }
  if (rank_ != 0) return "FINAL from rank 0";
  for (int q = 1; q < workers_; ++q)
    if (!done_[static_cast<size_t>(q)]) missing.push_back(q);
  return fmt::format("DONE from ranks {}", fmt::join(missing, ", "));
}

}  // namespace sfb::runtime
