#include "sfb/baselines/scheme_bytes.h"

#include <algorithm>

#include "sfb/core/collective_cost.h"
#include "sfb/core/row_blocks.h"
#include "sfb/runtime/reconciler.h"
#include "sfb/runtime/sharded_worker.h"
#include "sfb/runtime/topology.h"
#include "sfb/runtime/worker.h"

namespace sfb::baselines {

int64_t reconciliations_in_run(int64_t start_clock, int64_t end_clock, int64_t every) {
  if (every <= 0 || end_clock <= start_clock) return 0;
  return end_clock / every - start_clock / every + (end_clock % every != 0 ? 1 : 0);
}

double theory_bytes_per_clock(const Config& cfg, int workers, int64_t J, int64_t D, double v_nonzeros,
                              int64_t start_clock, int64_t end_clock) {
  const double P = workers, K = static_cast<double>(cfg.optimizer.minibatch), j = static_cast<double>(J),
               d = static_cast<double>(D);
  if (cfg.comm.scheme == sfb::Scheme::kFms) return 4.0 * 2.0 * P * j * d;
  if (cfg.comm.scheme == sfb::Scheme::kAllreduce) return 4.0 * 2.0 * (P - 1) * j * d;
  // One worker's batch of K pairs: u, then v dense or as K + 1 row pointers and the nonzeros.
  const double batch = K * 4.0 * j + (v_nonzeros < 0 ? K * 4.0 * d : 8.0 * (K + 1) + K * 8.0 * v_nonzeros);
  if (cfg.sfb.broadcast != sfb::Broadcast::kFull) {  // halton, halton-static: Q receivers per clock
    const double q =
        static_cast<double>(runtime::Topology::halton_offsets(workers, static_cast<int>(cfg.sfb.halton_q)).size());
    // The reconciliation (runtime/reconciler.h): every sfb.reconcile_every clocks an all-reduce of
    // W and one of a float, each rank sending what the all-reduce's algorithm sends.
    double reconcile = 0;
    if (runtime::reconcile_mode(cfg)) {
      // The period the worker uses: the config's (sfbd resolves 0), or its dense-v fallback.
      const int64_t every = cfg.sfb.reconcile_every > 0
                                ? cfg.sfb.reconcile_every
                                : runtime::auto_reconcile_every(workers, static_cast<int>(q), cfg.optimizer.minibatch,
                                                                J, D, static_cast<double>(D));
      const int64_t w_bytes = 4 * J * D;
      const bool direct = allreduce_direct(w_bytes, workers, LinkCost{});
      // Per clock: one every `every` clocks in the long run; in a run, those it holds over its clocks.
      const double per_clock = end_clock > start_clock
                                   ? static_cast<double>(reconciliations_in_run(start_clock, end_clock, every)) /
                                         static_cast<double>(end_clock - start_clock)
                                   : 1.0 / static_cast<double>(every);
      reconcile =
          P *
          static_cast<double>(allreduce_bytes_sent(w_bytes, workers, direct) + allreduce_bytes_sent(4, workers, true)) *
          per_clock;
    }
    return P * q * batch + reconcile;
  }
  return P * (P - 1) * batch;
}

namespace {

// One checkpoint's bytes: W's rows of ranks 1..P-1 to rank 0, asked for block by block as the file
// writer reads them (rows_per_block of 8 MiB, split at the owners' boundaries), the end message
// to every owner, and the finiteness check's all-gather of one int64 through rank 0.
double sharded_checkpoint_bytes(int workers, int64_t J, int64_t D) {
  double b = 8.0 * (workers - 1) * (workers + 1) + 16.0 * (workers - 1);
  const int64_t per = std::min(J, rows_per_block(D));
  for (int64_t r0 = 0; r0 < J; r0 += per) {
    const int64_t r1 = std::min(J, r0 + per);
    for (int q = 1; q < workers; ++q) {
      const runtime::RowBlock o = runtime::row_block(J, workers, q);
      const int64_t n = std::min(r1, o.row0 + o.rows) - std::max(r0, o.row0);
      if (n > 0) b += 16.0 + 4.0 * static_cast<double>(n * D);
    }
  }
  return b;
}

}  // namespace

double sharded_bytes_per_clock(const Config& cfg, int workers, const ShardedRun& run) {
  if (run.clocks <= 0) return 0.0;
  const double P = workers, K = static_cast<double>(cfg.optimizer.minibatch), w = static_cast<double>(run.width);
  const double v = run.v_nonzeros < 0 ? K * 4.0 * static_cast<double>(run.D) : 4.0 * (K + 1) + K * 8.0 * run.v_nonzeros;
  const double samples = P * (P - 1) * (8.0 + 13.0 + 4.0 * K + v),
               clock = samples + P * (P - 1) * (8.0 + 4.0 * P * K * w);
  const double eval =
      P * (P - 1) *
      (8.0 * static_cast<double>(run.eval_chunks) + 4.0 * static_cast<double>(run.eval_samples) * w + 12.0);
  const double all = static_cast<double>(run.clocks) * clock + (run.stopped_early ? samples : 0.0) +
                     static_cast<double>(run.evaluations) * eval +
                     static_cast<double>(run.checkpoints) * sharded_checkpoint_bytes(workers, run.J, run.D);
  return all / static_cast<double>(run.clocks);
}

}  // namespace sfb::baselines
