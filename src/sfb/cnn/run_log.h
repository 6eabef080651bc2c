#pragma once
// What the CNN executor reports on rank 0 besides the weights: a progress line and a metrics line
// (output.metrics) every eval.every iterations, and the Chrome trace (output.trace; chrome://tracing,
// Perfetto) of the output.trace_iters iterations after the first plan: forward and update on
// track 0, backward per layer on track 1, each group's communication on track 2 (its transport,
// all-reduce or sufficient-factor all-gather, in the name; its bytes in the event's args).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sfb/cnn/grad_comm.h"
#include "sfb/core/config.h"
#include "sfb/core/json.h"
#include "sfb/core/metrics.h"

namespace sfb::cnn {

struct IterationStats {
  int64_t iteration = 0;
  double forward_us = 0, backward_us = 0, comm_wait_us = 0, iteration_us = 0, predicted_us = 0;
  double loss = 0;
  int64_t bytes_sent = 0;  // by this rank in the iteration's groups
};

// One traced iteration: its start, the stats, each layer's backward time (forward order), each
// group's communication record, and the groups' layer ranges.
struct IterationTimeline {
  SteadyClock::time_point start;
  const IterationStats* stats = nullptr;
  double update_start_us = 0;
  const std::vector<double>* layer_us = nullptr;
  std::vector<std::string> layer_names;
  std::vector<GroupRecord> groups;
  const mgwfbp::Plan* plan = nullptr;
};

class RunLog {
 public:
  RunLog(const OutputConfig& out, int64_t eval_every, int64_t iterations, int rank);
  // Whether iteration `it` is one of the traced ones (`planned_at`: the first planned iteration,
  // -1 before there is one).
  bool traces(int64_t it, int64_t planned_at) const;
  void trace(const IterationTimeline& t);
  // Progress line and metrics line after iteration `it` (means over the last eval.every
  // iterations of `history`); `accuracy` < 0 when there is no test set.
  void report(int64_t it, double loss, double accuracy, const std::vector<IterationStats>& history, double predicted_us,
              double seconds);
  // Writes the trace file (when there is one and something was traced).
  void finish();

 private:
  void event(const std::string& name, int tid, double ts_us, double dur_us, Json args = nullptr);
  const OutputConfig out_;
  const int64_t eval_every_, iterations_;
  const int rank_;
  JsonlWriter metrics_;
  Json events_ = Json::array();
};

}  // namespace sfb::cnn
