#pragma once
// comm.scheme = "sharded": W's rows cut into P contiguous blocks, one per rank; no rank ever holds
// W (docs/design.md, "The sharded scheme"). BSP only. Each clock, on every rank:
//   1. sample K rows of this rank's partition (the SFB engine's sampler: the same minibatches) and
//      turn them into the model's samples (api::RowSharded::shard_samples);
//   2. all-gather the P ranks' samples (kTagShardRows): every rank has all P K samples;
//   3. the block's outputs and partial statistics for all of them, and ONE fused all-reduce of the
//      statistics (kTagShardStats: an all-gather of each rank's share, merged in rank order, so
//      every rank holds the same bits);
//   4. block_factors gives u on the block, and the block takes -(eta_c / K) u^T v sender by sender,
//      each followed by the model's prox_scale (a scale factor, as SharedWeights keeps one):
//      what SFB's full broadcast under BSP applies, computed another way.
// Every eval.every clocks every rank computes the objective and accuracy from the same reduced
// statistics of the evaluation samples (all ranks load the objective's sample and the test set),
// so every rank reaches the same stop decision (StopRule) at the same clock; a signal or
// stop.max_seconds on any rank rides on the next clock's samples as a flag. Rank 0 writes the
// metrics and, through file_order(), the checkpoints and the model file: the rows come from their
// owners in file order (kTagShardW), one block in flight at a time.
//
// Threads: the calling thread of each rank does everything (one Transport receiver per tag).
#include <functional>
#include <memory>

#include "sfb/api/model.h"
#include "sfb/comm/transport.h"
#include "sfb/core/config.h"
#include "sfb/core/row_blocks.h"
#include "sfb/io/dataset.h"
#include "sfb/runtime/worker.h"

namespace sfb::runtime {

// Rows [row0, row0 + rows) of W: what rank r of P holds (balanced, contiguous, in rank order).
struct RowBlock {
  int64_t row0 = 0, rows = 0;
};
RowBlock row_block(int64_t J, int P, int r);

// Why `cfg` and `model` cannot train sharded, or "" when they can (checked before any work).
std::string sharded_refusal(const Config& cfg, api::Model& model);

class ShardedWorker {
 public:
  // `objective_rows`: the objective's sample, on every rank; `test`: the test set on every rank (or
  // null). `start.load`, when set on every rank, is called on rank 0 only: its rows go to their
  // owners (collective).
  ShardedWorker(const Config& cfg, comm::Transport& t, const io::Dataset& train, const io::Dataset& objective_rows,
                const io::Dataset* test, api::Model& model, WorkerStart start);
  ~ShardedWorker();
  ShardedWorker(const ShardedWorker&) = delete;
  ShardedWorker& operator=(const ShardedWorker&) = delete;

  // Trains until the job stops (every rank at the same clock). result.weights is null: W is only
  // ever whole in file order (file_order). Its pairs_sent counts the samples this rank sent (K to
  // each peer a clock), v_nonzeros_sent their rows' non-zeros when they were sparse.
  WorkerResult run();
  // Collective: rank 0 gets W in file order (J x D, scale applied) through `use`, streamed from the
  // rows' owners; the other ranks serve their rows until rank 0 is done. `use` runs on rank 0 only.
  void file_order(const std::function<void(const RowSource&)>& use);
  // Collective: every value of every block is finite (the same answer on every rank).
  bool all_finite();
  // Collective, every rank with the same `data`, reduced across the blocks as the run's evaluations
  // are (sfbd --evaluate): W's objective (the mean loss of the first `limit` rows, all when <= 0,
  // plus the regulariser) and its accuracy on `data` (-1 when the model has none).
  double objective(const io::Dataset& data, int64_t limit);
  double accuracy(const io::Dataset& data);
  RowBlock block() const;
  // For the theory's bytes (baselines::sharded_bytes_per_clock): the model's statistics per sample,
  // an evaluation's samples and all-gathers, and the checkpoints run() wrote (their evaluations are
  // WorkerResult::evals).
  int64_t stats_width() const;
  int64_t eval_samples() const;
  int64_t eval_chunks() const;
  int64_t checkpoints() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace sfb::runtime
