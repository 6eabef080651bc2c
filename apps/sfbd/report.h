#pragma once
// What sfbd writes and prints at the end of a run: summary.json (docs/formats.md) and the table.
#include <string>

#include "sfb/cnn/executor.h"
#include "sfb/core/config.h"
#include "sfb/core/json.h"
#include "sfb/runtime/worker.h"

namespace sfbd {

// Every rank's memory (bytes, rank order; servers after the workers): the measured peak RSS, the
// estimate made before training, and of it what the process already held then (measured).
struct RankMemory {
  std::vector<int64_t> peak_rss, estimate, before_training;
};

struct SfbRun {
  const sfb::Config& cfg;
  const sfb::runtime::WorkerResult& result;
  std::string model_name;
  int workers = 0;
  int64_t J = 0, D = 0;
  bool sparse_v = false;                        // the model writes sparse v (the theory counts its measured nonzeros)
  int64_t objective_rows = 0;                   // rows of the objective's sample (all partitions)
  sfb::Layout layout = sfb::Layout::kRowMajor;  // how the workers kept W (model.layout resolved)
  sfb::Json auto_choice = nullptr;              // comm.scheme = "auto": the predictions and the choice
  sfb::Json lr_search = nullptr;                // optimizer.lr = "auto": the candidates and the choice
  RankMemory memory;
  // Of the CPU time the machine wanted during training, the share the hypervisor gave to other
  // guests (machine.h MachineWatch; -1: unknown): the timing of a run with a large one is the
  // neighbours' as much as sfb's.
  double cpu_stolen_share = -1;
  // runtime/still_improving.h: the run stopped at its limit while still improving; "" otherwise.
  std::string still_improving;
  // comm.scheme = "sharded": each rank holds a block of W's rows (its checksum is of those rows),
  // and the theory's bytes come from the model's statistics (baselines::sharded_bytes_per_clock).
  bool sharded = false;
  double sharded_theory_bytes = 0;
};

// A run's steal share as summary.json has it (SFB's top level, the CNN mode's contention): 4
// decimals, null where unknown.
sfb::Json stolen_share_json(double share);

sfb::Json sfb_summary(const SfbRun& run);
void print_sfb_table(const SfbRun& run);

// `checksums`: every rank's parameter checksum, in rank order.
sfb::Json cnn_summary(const sfb::Config& cfg, const sfb::cnn::ExecutorResult& r, int ranks,
                      const std::vector<int64_t>& checksums);
void print_cnn_table(const sfb::Config& cfg, const sfb::cnn::ExecutorResult& r, int ranks, bool replicas_equal);

}  // namespace sfbd
