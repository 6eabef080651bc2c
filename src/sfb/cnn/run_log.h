#pragma once
// What the CNN executor reports on rank 0 besides the weights: a progress line and a metrics line
// (output.metrics) every eval.every iterations (the last minibatch's loss, the mean loss since the
// last line, test loss and accuracy), and the Chrome trace (output.trace; chrome://tracing,
// Perfetto) of the output.trace_iters iterations after the first plan: one process per traced
// rank ("rank r"; output.trace_ranks = "all" gathers every rank's at the end), named threads:
// "forward and update" (tid 0), "backward" per layer (tid 1), and each group's collective on its
// own track (tid 2 + g, named after the group's transport and layers; bytes in the event's args).
// The events of a rank are timed on its own steady clock from its first traced iteration.
//
// The trace is the Trace Event Format's JSON array, streamed: rank 0 appends each traced
// iteration's events to the file as it ends (its closing "]" comes at the end of the run, and the
// format lets a viewer read a file without it), so a killed run keeps what it traced. Other
// ranks' events (trace_ranks = "all") join at the end. A resumed run (from iteration F) writes
// its own file, <trace>.from-F.json, and leaves the interrupted run's alone.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sfb/cnn/grad_comm.h"
#include "sfb/comm/transport.h"
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
  std::vector<std::string> layer_names;   // every layer's label, forward order
  std::vector<std::string> param_labels;  // the param layers' labels
  std::vector<GroupRecord> groups;
  const mgwfbp::Plan* plan = nullptr;
};

// The file a run's trace goes to: `trace` (output.trace resolved), or for a run resumed from
// iteration `first` > 0, <stem>.from-<first><ext> beside it (sfbd claims that name before training).
std::string trace_path_of(const std::string& trace, int64_t first);

class RunLog {
 public:
  // `first`: the iterations done before (a resumed run's metrics keep their lines up to it).
  RunLog(const OutputConfig& out, int64_t eval_every, int64_t iterations, int rank, int64_t first = 0);
  ~RunLog();  // closes the trace's array (finish() does it for a run that ends normally)
  RunLog(const RunLog&) = delete;
  RunLog& operator=(const RunLog&) = delete;
  // Whether iteration `it` is one of the traced ones (`planned_at`: the first planned iteration,
  // -1 before there is one).
  bool traces(int64_t it, int64_t planned_at) const;
  void trace(const IterationTimeline& t);
  struct Test {
    double loss = -1, accuracy = -1;  // < 0: no test set
  };
  // Progress line and metrics line after iteration `it` (means over the last eval.every
  // iterations of `history`).
  void report(int64_t it, double loss, Test test, const std::vector<IterationStats>& history, double predicted_us,
              double seconds);
  // Collective when output.trace_ranks = "all": rank 0 writes the trace file (when there is one).
  void finish(comm::Transport& t);

 private:
  void event(const std::string& name, int tid, double ts_us, double dur_us, Json args = nullptr);
  void name_thread(int tid, const std::string& name);
  bool traced_rank() const { return rank_ == 0 || out_.trace_ranks == sfb::TraceRanks::kAll; }
  void stream_events();  // rank 0: the events so far to the trace file
  void close_trace();
  const OutputConfig out_;
  const int64_t eval_every_, iterations_;
  const int rank_;
  double origin_us_ = -1;    // the first traced iteration's start
  std::vector<char> named_;  // tids with a thread_name event
  JsonlWriter metrics_;
  Json events_ = Json::array();  // not yet in the file (rank 0), or all of this rank's (the others)
  std::string trace_path_;       // rank 0: the file this run traces into ("" after a failed write)
  JsonlWriter trace_;            // rank 0: that file, an event a line
  int64_t traced_ = 0;           // events written
};

}  // namespace sfb::cnn
