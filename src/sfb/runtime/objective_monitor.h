#pragma once
// Rank 0's objective monitor: a thread that evaluates snapshots of W (taken by the update thread
// once every replica has applied clock c), writes one metrics line and one progress line per
// evaluation, writes checkpoints, and decides whether the job should stop (target accuracy or objective, relative
// change below tolerance for `patience` evaluations, or a diverged objective).
//
// submit() is called by the update thread; stop_reason() by the communication thread.
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sfb/core/bounded_queue.h"

#include "sfb/api/model.h"
#include "sfb/core/config.h"
#include "sfb/core/metrics.h"

namespace sfb::runtime {

struct Snapshot {
  EvalRecord record;  // everything but objective and accuracy filled in
  Matrix W;
  bool final = false;
  bool evaluate = true;     // compute the objective and accuracy, write a metrics line
  bool checkpoint = false;  // write it as the checkpoint (checkpoint.path)
};

class ObjectiveMonitor {
 public:
  ObjectiveMonitor(const Config& cfg, const api::Model& model, const io::Dataset& train, const io::Dataset* test,
                   int world_size);
  ~ObjectiveMonitor();
  void start();
  // Blocks when the monitor is more than a few snapshots behind (back-pressure).
  void submit(std::unique_ptr<Snapshot> s);
  // Waits for the final snapshot's evaluation; rethrows an evaluation error.
  void finish();
  void abort();
  // Empty while training should go on.
  std::string stop_reason() const;
  std::vector<EvalRecord> records() const;

 private:
  void loop();
  EvalRecord evaluate(const Snapshot& s);
  void write_checkpoint(const Snapshot& s);
  void decide(const EvalRecord& r);

  const Config& cfg_;
  const api::Model& model_;
  const io::Dataset& train_;
  const io::Dataset* test_;
  int world_size_;
  JsonlWriter metrics_;
  BoundedQueue<Snapshot*> queue_;
  std::thread thread_;
  mutable std::mutex mu_;
  std::vector<EvalRecord> records_;
  std::string stop_reason_;
  std::exception_ptr error_;
  int below_tol_ = 0;
};

}  // namespace sfb::runtime
