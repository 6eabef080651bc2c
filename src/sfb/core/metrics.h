#pragma once
// Evaluation records and their JSON-lines file (output.metrics): one line per evaluation.
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace sfb {

struct EvalRecord {
  int64_t clock = 0;            // clocks completed by every replica when W was sampled
  double seconds = 0.0;         // of training: a resumed run's continue its predecessors' (see below)
  double attempt_seconds = -1;  // since this process started training; -1: the same as seconds
  double objective = 0.0;       // mean training loss on the fixed evaluation sample
  double accuracy = -1.0;       // test accuracy; -1 when there is no test set
  double samples_per_s = 0.0;   // samples processed by all ranks per second (P * K * clock / s)
  int64_t bytes_sent = 0;       // by rank 0, all peers, SF and control messages
  int64_t bytes_received = 0;
  double compute_s = 0.0;  // rank 0: seconds computing sufficient factors
  double update_s = 0.0;   // rank 0: seconds applying updates to W
  double wait_s = 0.0;     // rank 0: seconds the compute thread waited on peers (staleness)
  // The latest replica drift known when this record was made (runtime/replica_drift.h) and the
  // clock it was measured at; NaN and -1 while none is known yet.
  double replica_drift = std::numeric_limits<double>::quiet_NaN();
  int64_t replica_drift_clock = -1;
  // Model-specific values (duality_gap, pair_auc, reconstruction_error, ...), in the model's order.
  std::vector<std::pair<std::string, double>> extra;
};

std::string to_json(const EvalRecord& r);

// Appends JSON lines to a file; each line is flushed so a crash keeps every finished line.
class JsonlWriter {
 public:
  JsonlWriter() = default;
  explicit JsonlWriter(const std::string& path) { open(path); }
  ~JsonlWriter();
  void open(const std::string& path);
  JsonlWriter(const JsonlWriter&) = delete;
  JsonlWriter& operator=(const JsonlWriter&) = delete;
  bool is_open() const { return fd_ >= 0; }
  // Appends `line` and a newline. On failure (a full disk, an I/O error, a file system gone
  // read-only) the file is cut back to its last complete line, so it never ends in half a line,
  // and Error is thrown naming the file and the cause; the writer stays usable.
  void write(const std::string& line);
  // write() for a run's record: a write that fails is logged once (the file ends with its last
  // complete line) and the writer closes, so the run goes on without metrics instead of failing.
  void write_or_stop(const std::string& line);
  // A resumed run's metrics: keeps the existing file's lines before clock `from_clock` (their
  // "clock" or "iteration" field), drops the rest (the resumed run evaluates `from_clock` again,
  // and what the interrupted run evaluated after its checkpoint is gone with it) and appends after
  // them. Creates the file when there is none. continued_seconds() is then the last kept line's
  // "seconds": a resumed run adds it to its own, so the curves go on where they were (the time
  // between that line and the checkpoint, at most eval.every clocks, is not counted).
  void open_continuing(const std::string& path, int64_t from_clock);
  double continued_seconds() const { return continued_seconds_; }
  void close();
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  int64_t size_ = 0;  // bytes of complete lines
  std::string path_;
  double continued_seconds_ = 0;
};

}  // namespace sfb
