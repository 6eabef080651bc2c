#include "sfb/cnn/run_log.h"

#include <spdlog/spdlog.h>

#include "sfb/core/files.h"

namespace sfb::cnn {

RunLog::RunLog(const OutputConfig& out, int64_t eval_every, int64_t iterations, int rank)
    : out_(out), eval_every_(eval_every), iterations_(iterations), rank_(rank) {
  if (rank_ != 0) return;
  if (const auto path = out_.path(out_.metrics); !path.empty()) {
    create_parent_directories(path);
    metrics_.open(path);
  }
}

bool RunLog::traces(int64_t it, int64_t planned_at) const {
  return rank_ == 0 && !out_.trace.empty() && planned_at >= 0 && it < planned_at + out_.trace_iters;
}

void RunLog::event(const std::string& name, int tid, double ts_us, double dur_us, Json args) {
  Json e{{"name", name}, {"ph", "X"}, {"pid", rank_}, {"tid", tid}, {"ts", fixed(ts_us, 1)}, {"dur", fixed(dur_us, 1)}};
  if (!args.is_null()) e["args"] = std::move(args);
  events_.push_back(std::move(e));
}

void RunLog::trace(const IterationTimeline& t) {
  const IterationStats& st = *t.stats;
  const double base = us_since(SteadyClock::time_point{}, t.start);
  event(fmt::format("forward {}", st.iteration), 0, base, st.forward_us);
  double at = base + st.forward_us;
  for (int i = static_cast<int>(t.layer_us->size()) - 1; i >= 0; --i) {
    const double dur = (*t.layer_us)[static_cast<size_t>(i)];
    event(fmt::format("backward {}", t.layer_names[static_cast<size_t>(i)]), 1, at, dur);
    at += dur;
  }
  for (size_t g = 0; g < t.groups.size(); ++g) {
    const GroupRecord& r = t.groups[g];
    event(fmt::format("{} group {} (layers {}-{})", r.sf ? "sf allgather" : "allreduce", g, (*t.plan)[g].lo,
                      (*t.plan)[g].hi),
          2, base + r.start_us, r.end_us - r.start_us,
          Json{{"transport", r.sf ? "sf" : "dense"}, {"bytes_sent", r.bytes_sent}});
  }
  event("update", 0, base + t.update_start_us, st.iteration_us - t.update_start_us);
}

void RunLog::report(int64_t it, double loss, double accuracy, const std::vector<IterationStats>& history,
                    double predicted_us, double seconds) {
  if (rank_ != 0) return;
  // Means over the iterations since the last report.
  double f = 0, bw = 0, w = 0, itu = 0, bytes = 0;
  int64_t cnt = 0;
  for (auto r = history.rbegin(); r != history.rend() && cnt < eval_every_; ++r, ++cnt) {
    f += r->forward_us;
    bw += r->backward_us;
    w += r->comm_wait_us;
    itu += r->iteration_us;
    bytes += static_cast<double>(r->bytes_sent);
  }
  const double n = static_cast<double>(std::max<int64_t>(cnt, 1));
  spdlog::info(
      "iter {:>6}/{} | loss {:.4f} | test acc {} | iteration {:.1f} ms (forward {:.1f}, backward {:.1f}, "
      "comm not overlapped {:.1f}; predicted {:.1f})",
      it + 1, iterations_, loss, accuracy >= 0 ? fmt::format("{:.2f}%", 100 * accuracy) : std::string("n/a"),
      itu / n / 1e3, f / n / 1e3, bw / n / 1e3, w / n / 1e3, predicted_us / 1e3);
  if (!metrics_.is_open()) return;
  metrics_.write_or_stop(to_line(Json{{"iteration", it + 1},
                                      {"seconds", fixed(seconds, 6)},
                                      {"loss", fixed(loss, 6)},
                                      {"accuracy", fixed(accuracy, 6)},
                                      {"forward_us", fixed(f / n, 1)},
                                      {"backward_us", fixed(bw / n, 1)},
                                      {"comm_wait_us", fixed(w / n, 1)},
                                      {"iteration_us", fixed(itu / n, 1)},
                                      {"bytes_sent", fixed(bytes / n, 0)},
                                      {"predicted_us", fixed(predicted_us, 1)}}));
}

void RunLog::finish() {
  const auto path = out_.path(out_.trace);
  if (rank_ != 0 || path.empty() || events_.empty()) return;
  const Json doc{
      {"traceEvents", events_},
      {"displayTimeUnit", "ms"},
      {"otherData", {{"tracks", "tid 0: forward and update, 1: backward per layer, 2: communication per group"}}}};
  create_parent_directories(path);
  write_file_atomic(path, to_document(doc));
}

}  // namespace sfb::cnn
