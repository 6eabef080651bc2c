#include "sfb/cnn/run_log.h"

#include <filesystem>

#include <spdlog/spdlog.h>

#include "sfb/comm/setup_collectives.h"
#include "sfb/core/files.h"

namespace sfb::cnn {

std::string trace_path_of(const std::string& trace, int64_t first) {
  if (first <= 0 || trace.empty()) return trace;
  const std::filesystem::path p(trace);
  return (p.parent_path() /
          fmt::format("{}.from-{}{}", p.stem().string(), first, p.has_extension() ? p.extension().string() : ".json"))
      .string();
}

RunLog::RunLog(const OutputConfig& out, int64_t eval_every, int64_t iterations, int rank, int64_t first)
    : out_(out), eval_every_(eval_every), iterations_(iterations), rank_(rank) {
  if (rank_ != 0) return;
  if (const auto path = out_.path(out_.trace); !path.empty()) trace_path_ = trace_path_of(path, first);
  if (const auto path = out_.path(out_.metrics); !path.empty()) {
    create_parent_directories(path);
    // Lines of iterations after `first` belong to an interrupted run: the resumed run writes them again.
    if (first > 0)
      metrics_.open_continuing(path, first + 1);
    else
      metrics_.open(path);
  }
}

bool RunLog::traces(int64_t it, int64_t planned_at) const {
  return traced_rank() && !out_.trace.empty() && planned_at >= 0 && it < planned_at + out_.trace_iters;
}

void RunLog::name_thread(int tid, const std::string& name) {
  if (static_cast<size_t>(tid) >= named_.size()) named_.resize(static_cast<size_t>(tid) + 1, 0);
  if (named_[static_cast<size_t>(tid)]) return;
  named_[static_cast<size_t>(tid)] = 1;
  events_.push_back(
      Json{{"name", "thread_name"}, {"ph", "M"}, {"pid", rank_}, {"tid", tid}, {"args", {{"name", name}}}});
  events_.push_back(
      Json{{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", rank_}, {"tid", tid}, {"args", {{"sort_index", tid}}}});
}

void RunLog::event(const std::string& name, int tid, double ts_us, double dur_us, Json args) {
  Json e{{"name", name}, {"ph", "X"}, {"pid", rank_}, {"tid", tid}, {"ts", fixed(ts_us, 1)}, {"dur", fixed(dur_us, 1)}};
  if (!args.is_null()) e["args"] = std::move(args);
  events_.push_back(std::move(e));
}

void RunLog::trace(const IterationTimeline& t) {
  const IterationStats& st = *t.stats;
  if (origin_us_ < 0) {
    origin_us_ = us_since(SteadyClock::time_point{}, t.start);
    events_.push_back(Json{
        {"name", "process_name"}, {"ph", "M"}, {"pid", rank_}, {"args", {{"name", fmt::format("rank {}", rank_)}}}});
    events_.push_back(
        Json{{"name", "process_sort_index"}, {"ph", "M"}, {"pid", rank_}, {"args", {{"sort_index", rank_}}}});
    name_thread(0, "forward and update");
    name_thread(1, "backward (per layer)");
  }
  const double base = us_since(SteadyClock::time_point{}, t.start) - origin_us_;
  event(fmt::format("forward {}", st.iteration), 0, base, st.forward_us);
  double at = base + st.forward_us;
  for (int i = static_cast<int>(t.layer_us->size()) - 1; i >= 0; --i) {
    const double dur = (*t.layer_us)[static_cast<size_t>(i)];
    event(fmt::format("backward {}", t.layer_names[static_cast<size_t>(i)]), 1, at, dur);
    at += dur;
  }
  for (size_t g = 0; g < t.groups.size(); ++g) {
    const GroupRecord& r = t.groups[g];
    const auto& grp = (*t.plan)[g];
    const std::string layers =
        fmt::format("{}-{}", t.param_labels[static_cast<size_t>(grp.hi)], t.param_labels[static_cast<size_t>(grp.lo)]);
    const int tid = 2 + static_cast<int>(g);
    name_thread(tid, fmt::format("group {}: {} {}", g, r.sf ? "sf allgather" : "allreduce", layers));
    event(fmt::format("{} {} ({})", r.sf ? "sf allgather" : "allreduce", st.iteration, layers), tid, base + r.start_us,
          r.end_us - r.start_us,
          Json{{"transport", r.sf ? "sf" : "dense"}, {"bytes_sent", r.bytes_sent}, {"group", g}});
  }
  event("update", 0, base + t.update_start_us, st.iteration_us - t.update_start_us);
  stream_events();  // rank 0: this iteration's events are in the file before the next one starts
}

void RunLog::report(int64_t it, double loss, Test test, const std::vector<IterationStats>& history, double predicted_us,
                    double seconds) {
  if (rank_ != 0) return;
  const double accuracy = test.accuracy;
  // Means over the iterations since the last report.
  double f = 0, bw = 0, w = 0, itu = 0, bytes = 0, mean_loss = 0;
  int64_t cnt = 0;
  for (auto r = history.rbegin(); r != history.rend() && cnt < eval_every_; ++r, ++cnt) {
    f += r->forward_us;
    bw += r->backward_us;
    w += r->comm_wait_us;
    itu += r->iteration_us;
    bytes += static_cast<double>(r->bytes_sent);
    mean_loss += r->loss;
  }
  const double n = static_cast<double>(std::max<int64_t>(cnt, 1));
  mean_loss /= n;
  spdlog::info(
      "iter {:>6}/{} | loss {:.4f} (mean of {}) | test loss {} acc {} | iteration {:.1f} ms (forward {:.1f}, backward "
      "{:.1f}, "
      "comm not overlapped {:.1f}; predicted {:.1f})",
      it + 1, iterations_, mean_loss, cnt, test.loss >= 0 ? fmt::format("{:.4f}", test.loss) : std::string("n/a"),
      accuracy >= 0 ? fmt::format("{:.2f}%", 100 * accuracy) : std::string("n/a"), itu / n / 1e3, f / n / 1e3,
      bw / n / 1e3, w / n / 1e3, predicted_us / 1e3);
  if (!metrics_.is_open()) return;
  metrics_.write_or_stop(to_line(Json{{"iteration", it + 1},
                                      {"seconds", fixed(seconds + metrics_.continued_seconds(), 6)},
                                      {"attempt_seconds", fixed(seconds, 6)},
                                      {"loss", fixed(loss, 6)},
                                      {"loss_mean", fixed(mean_loss, 6)},
                                      {"test_loss", fixed(test.loss, 6)},
                                      {"accuracy", fixed(accuracy, 6)},
                                      {"forward_us", fixed(f / n, 1)},
                                      {"backward_us", fixed(bw / n, 1)},
                                      {"comm_wait_us", fixed(w / n, 1)},
                                      {"iteration_us", fixed(itu / n, 1)},
                                      {"bytes_sent", fixed(bytes / n, 0)},
                                      {"predicted_us", fixed(predicted_us, 1)}}));
}

RunLog::~RunLog() { close_trace(); }

void RunLog::stream_events() {
  if (rank_ != 0 || trace_path_.empty() || events_.empty()) return;
  try {
    if (!trace_.is_open()) {
      create_parent_directories(trace_path_);
      trace_.open(trace_path_);
    }
    // One event a line, so a write cut short leaves whole events (JsonlWriter cuts back to them).
    for (const auto& e : events_) trace_.write((traced_++ == 0 ? "[" : ",") + e.dump());
  } catch (const Error& e) {
    spdlog::error("{}; the trace ends here, training continues", e.what());
    trace_.close();
    trace_path_.clear();
  }
  events_ = Json::array();
}

void RunLog::close_trace() {
  if (!trace_.is_open()) return;
  try {
    trace_.write("]");
  } catch (const Error& e) {
    spdlog::error("{}: closing the trace failed", e.what());
  }
  trace_.close();
}

void RunLog::finish(comm::Transport& t) {
  const auto path = out_.path(out_.trace);
  if (path.empty()) return;
  if (out_.trace_ranks == sfb::TraceRanks::kAll) {
    // Every rank's events to rank 0, one rank at a time.
    const std::string mine = events_.dump();
    for (int r = 1; r < t.size(); ++r) {
      const Bytes got = comm::broadcast_bytes(
          t, r, r == rank_ ? std::as_bytes(std::span(mine.data(), mine.size())) : std::span<const std::byte>());
      t.barrier();  // every rank has rank r's events before the next rank sends (one tag, any source)
      if (rank_ != 0) continue;
      const Json theirs = Json::parse(std::string(reinterpret_cast<const char*>(got.data()), got.size()));
      for (const auto& e : theirs) events_.push_back(e);
    }
  }
  if (rank_ != 0) return;
  stream_events();
  close_trace();
}

}  // namespace sfb::cnn
