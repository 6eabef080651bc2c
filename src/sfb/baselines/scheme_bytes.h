#pragma once
// Bytes each scheme moves over the network per clock, by the formulas of the SFB paper with v as
// it travels (per-message headers and Halton's clock markers not counted): the "theory" column of
// sfb-compare. A batch of K pairs: u is 4 K J bytes; v is 4 K D bytes dense, or 8 (K + 1) + 8 K
// nnz(v) bytes sparse (row pointers, then an index and a value per nonzero: sfb/comm/sf_codec.h).
//   sfb full:     P (P-1) batch_bytes
//   sfb halton:   P Q batch_bytes, and its reconciliation: each one an all-reduce of W (and of a
//                 float) every sfb.reconcile_every clocks; over a run of clocks (start, end], the
//                 periodic ones within it and the one the run ends on when `end` is not on the
//                 period (runtime/update_thread.cc), per clock of the run
//   fms:          2 P J D 4      (every worker pushes its J x D update and pulls J x D)
//   allreduce:    2 (P-1) J D 4  (ring: each worker sends 2 (P-1)/P of J x D)
//   sharded:      per clock P (P-1) (samples + statistics) (one more clock's samples when the run
//                 stopped before stop.max_clocks: they go out a clock ahead): every rank sends its K samples (a
//                 21-byte head with the all-gather's id, 4 K labels, v as above but 4 (K + 1) row
//                 offsets) and its share of the P K samples' statistics (8 + 4 P K width) to every
//                 other rank; per evaluation P (P-1) times its statistics all-gathers (8 + 4 n width
//                 for each chunk of n evaluation samples) and the regulariser's (12 bytes); per
//                 checkpoint W's rows from their owners to rank 0 (16 bytes a request, 4 D a row),
//                 the owners' end message and the finiteness check's gather (8 (P-1) (P+1)).
#include <cstdint>

#include "sfb/core/config.h"

namespace sfb::baselines {

// `v_nonzeros`: the mean nonzeros of v per pair when the model writes sparse v (measured: the
// workers count what they send), or a negative value for dense v. `start_clock` and `end_clock`:
// the run's clocks, from its first (0, or a checkpoint's) to its last; with end_clock <= start_clock
// (the default) the long run's rate, the periodic reconciliations alone.
double theory_bytes_per_clock(const Config& cfg, int workers, int64_t J, int64_t D, double v_nonzeros,
                              int64_t start_clock = 0, int64_t end_clock = 0);
// Partial broadcast's reconciliations in a run of clocks (start, end] at period `every`: one at each
// multiple of `every`, and one at `end` when it is not one (the run ends on a consensus).
int64_t reconciliations_in_run(int64_t start_clock, int64_t end_clock, int64_t every);
// What a sharded run did (runtime/sharded_worker.h), for its theory.
struct ShardedRun {
  int64_t J = 0, D = 0;
  double v_nonzeros = -1;                     // the samples' mean non-zeros when sparse, < 0 dense
  int64_t width = 0;                          // statistics floats per sample (api::statistics_width)
  int64_t eval_samples = 0, eval_chunks = 0;  // per evaluation
  int64_t clocks = 0, evaluations = 0, checkpoints = 0;
  // A run that stopped before stop.max_clocks sent one more clock's samples: the next clock's go
  // out while a clock computes.
  bool stopped_early = false;
};
// comm.scheme = "sharded": the whole job's bytes per clock of the run.
double sharded_bytes_per_clock(const Config& cfg, int workers, const ShardedRun& run);

}  // namespace sfb::baselines
