#include "sfb/baselines/fms_server.h"

#include <chrono>
#include <map>
#include <optional>
#include <thread>
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

ServerStats FmsServer::run() {
  ServerStats st;
  Matrix rows;                 // this server's rows of W
  int64_t row_begin = 0, version = -1;
  std::map<int64_t, std::vector<comm::Message>> pushes;  // clock -> one PUSH per worker (empty until it arrives)
  std::map<int64_t, int> push_count;
  std::vector<char> bye(static_cast<size_t>(P_), 0);
  int byes = 0;
  Stopwatch last_progress;
  // PUSH messages that arrive before rank 0's INIT (no order holds across senders) wait here.
  std::vector<comm::Message> early;
  for (int idle = 0; byes < P_;) {
    std::optional<comm::Message> m;
    if (version >= 0 && !early.empty()) {
      m = std::move(early.back());
      early.pop_back();
    } else {
      m = t_.try_recv();
    }
    if (!m) {
      if (last_progress.seconds() > peer_timeout_s_) {
        std::vector<int> missing;
        for (int p = 0; p < P_; ++p) {
          const bool pushed = version >= 0 && push_count.count(version) && !pushes[version][static_cast<size_t>(p)].data.empty();
          if (!bye[static_cast<size_t>(p)] && !pushed) missing.push_back(p);
        }
        throw CommError(fmt::format("server rank {}: nothing for {} s (runtime.peer_timeout_s) at version {}; waiting for "
                                    "workers {}", t_.rank(), peer_timeout_s_, version, fmt::join(missing, ", ")));
      }
      if (++idle < 16) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(std::min(200, 10 * (idle - 15))));
      continue;
    }
    idle = 0;
    last_progress.reset();
    if (m->tag != comm::kTagPs || m->src >= P_)
      throw CommError(fmt::format("server rank {}: unexpected message (tag {}) from rank {}", t_.rank(), m->tag, m->src));
    const PsHeader h = decode_ps_header(m->data, m->src);
    switch (h.type) {
      case PsType::kInit:
        if (m->src != 0 || version >= 0)
          throw CommError(fmt::format("server rank {}: INIT from rank {} (only rank 0 sends one, once)", t_.rank(), m->src));
        row_begin = h.row_begin;
        rows.resize(h.rows, h.cols);
        std::copy(ps_payload(m->data), ps_payload(m->data) + h.rows * h.cols, rows.data());
        version = h.clock;
        spdlog::info("parameter server {}: rows [{}, {}) x {} from version {}", s_, row_begin, row_begin + h.rows, h.cols,
                     version);
        break;
      case PsType::kPush: {
        if (version < 0) {
          early.push_back(std::move(*m));
          break;
        }
        if (h.row_begin != row_begin || h.rows != rows.rows() || h.cols != rows.cols() || h.clock < version)
          throw CommError(fmt::format("server rank {}: PUSH from rank {} of rows [{}, {}) x {} clock {}; this server holds "
                                      "rows [{}, {}) x {} at version {}",
                                      t_.rank(), m->src, h.row_begin, h.row_begin + h.rows, h.cols, h.clock, row_begin,
                                      row_begin + rows.rows(), rows.cols(), version));
        auto& slot = pushes[h.clock];
        slot.resize(static_cast<size_t>(P_));
        if (!slot[static_cast<size_t>(m->src)].data.empty())
          throw CommError(fmt::format("server rank {}: second PUSH of clock {} from rank {}", t_.rank(), h.clock, m->src));
        slot[static_cast<size_t>(m->src)] = std::move(*m);
        ++push_count[h.clock];
        // Apply complete clocks in order, each in worker-rank order, and publish the new version.
        while (push_count.count(version) && push_count[version] == P_) {
          Stopwatch sw;
          for (const auto& pm : pushes[version])
            rows += ConstMatrixMap(ps_payload(pm.data), rows.rows(), rows.cols());
          st.apply_s += sw.seconds();
          pushes.erase(version);
          push_count.erase(version);
          ++version;
          ++st.clocks;
          auto buf = std::make_shared<const comm::Bytes>(
              encode_ps(PsType::kPull, version, row_begin, rows.rows(), rows.cols(), rows.data()));
          for (int p = 0; p < P_; ++p) t_.send_shared(p, comm::kTagPs, buf);
        }
        break;
      }
      case PsType::kBye:
        if (!bye[static_cast<size_t>(m->src)]) {
          bye[static_cast<size_t>(m->src)] = 1;
          ++byes;
        }
        break;
      case PsType::kPull:
        throw CommError(fmt::format("server rank {}: PULL from worker rank {}", t_.rank(), m->src));
    }
  }
  t_.flush();
  const auto c = t_.total_counters();
  st.bytes_sent = c.bytes_sent;
  st.bytes_received = c.bytes_received;
  return st;
}

}  // namespace sfb::baselines
