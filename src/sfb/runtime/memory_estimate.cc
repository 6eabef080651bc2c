#include "sfb/runtime/memory_estimate.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "sfb/core/collective_cost.h"
#include "sfb/runtime/job_rules.h"

namespace sfb::runtime {
namespace {

constexpr double kMiB = 1 << 20;

std::string shape_keys(const Config& cfg) {
  return cfg.model.plugin.empty() ? "the model's shape (data.features, data.classes, model.*)"
                                  : "the plugin's rows() x cols()";
}

void add_process(MemoryEstimate& e, double process_bytes, int rank) {
  e.add(rank == 0 ? "this process before training (libraries, threads, its data partition, the objective's sample "
                    "and the test set; measured)"
                  : "this process before training (libraries, threads, its data partition; measured)",
        "data.*", process_bytes, true);
}

}  // namespace

MemoryEstimate worker_memory(const Config& cfg, int workers, int rank, int64_t J, int64_t D, double v_floats,
                             bool general_prox, double process_bytes) {
  MemoryEstimate e;
  const double w = 4.0 * static_cast<double>(J) * static_cast<double>(D);
  const double P = workers, K = static_cast<double>(cfg.optimizer.minibatch);
  add_process(e, process_bytes, rank);
  e.add(fmt::format("W itself ({} x {} floats)", J, D), shape_keys(cfg), w);
  if (rank == 0 && cfg.eval.copies(w))
    e.add("the objective monitor's one snapshot of W (eval.snapshot: evaluated while training goes on)",
          "eval.snapshot", w);
  const std::optional<Reconcile> reconcile = reconcile_mode(cfg);
  const bool partial = reconcile.has_value();
  if (reconcile == Reconcile::kSum)
    e.add("the reconciliation's previous consensus (sfb.reconcile = \"sum\")", "sfb.reconcile", w);
  if (partial)
    e.add("the reconciliation's row block", "sfb.reconcile",
          static_cast<double>(reconcile_block_bytes(static_cast<int64_t>(w))));
  // Batches in flight per source: the clocks the consistency model lets run ahead, at most the
  // queue capacity; for every source (in-queue) and this rank's out-queue, plus their encodings.
  const int64_t ahead = cfg.sfb.asp() ? cfg.runtime.asp_window : cfg.sfb.staleness;
  const double per_source = static_cast<double>(std::min<int64_t>(cfg.runtime.queue_capacity, ahead + 2));
  const double batch = 4.0 * K * (static_cast<double>(J) + 2.0 * v_floats);
  if (cfg.comm.scheme == sfb::Scheme::kSfb)
    e.add("SF batches in the queues and on the wire", "optimizer.minibatch, sfb.staleness, runtime.queue_capacity",
          batch * per_source * (P + 1));
  else
    e.add("this rank's SF batches", "optimizer.minibatch, sfb.staleness", batch * per_source);
  e.add("the update kernel's workspace (every source's factors of a clock, stacked)",
        "optimizer.minibatch and the model's shape", 4.0 * P * K * (static_cast<double>(J) + v_floats));
  e.add("the model's workspace (a minibatch's K x J outputs, twice)", "optimizer.minibatch",
        8.0 * K * static_cast<double>(J) + 8.0 * K * v_floats);
  if (rank == 0) e.add("the evaluation's row blocks", "eval.train_sample", 2 * 16 * kMiB);
  if (cfg.comm.scheme == sfb::Scheme::kAllreduce)
    e.add(fmt::format("the all-reduce's row blocks ({} in flight, one being reduced)", kDenseAllreduceBlocksInFlight),
          "the model's shape",
          (kDenseAllreduceBlocksInFlight + 1.0) *
              static_cast<double>(dense_allreduce_block_bytes(static_cast<int64_t>(w))));
  if (cfg.comm.scheme == sfb::Scheme::kFms && general_prox)
    e.add("a clock's pushes, queued whole (the servers answer whole clocks under a general prox)", "the model's prox",
          w);
  if (cfg.comm.scheme == sfb::Scheme::kFms)
    e.add("the parameter-server blocks in flight (pushed and pulled)", "fms.servers",
          3.0 * 4 * static_cast<double>(cfg.fms.servers) * std::min(w / static_cast<double>(cfg.fms.servers), kMiB));
  return e;
}

MemoryEstimate sharded_memory(const Config& cfg, int workers, int rank, int64_t J, int64_t D, double v_floats,
                              int64_t eval_rows, double process_bytes) {
  MemoryEstimate e;
  const double P = workers, K = static_cast<double>(cfg.optimizer.minibatch);
  const double rows = std::ceil(static_cast<double>(J) / P);
  add_process(e, process_bytes, rank);
  e.add(fmt::format("this rank's block of W ({} of {} rows x {} floats)", static_cast<int64_t>(rows), J, D),
        shape_keys(cfg), 4.0 * rows * static_cast<double>(D));
  // A sample on the wire: its label and v (dense floats, or an index and a value per non-zero).
  const double sample = 4.0 + (v_floats < static_cast<double>(D) ? 8.0 * v_floats + 4.0 : 4.0 * v_floats);
  e.add("a clock's P K samples (received, decoded, and this rank's own)", "optimizer.minibatch", 3.0 * P * K * sample);
  e.add("their outputs on the block and statistics", "optimizer.minibatch and the model's shape",
        4.0 * P * K * rows + 4.0 * 8.0 * P * P * K);
  e.add("the evaluation samples (the objective's sample and the test set, on every rank) and their outputs",
        "eval.train_sample", static_cast<double>(eval_rows) * sample + 16 * kMiB);
  if (rank == 0) e.add("the model file's and checkpoints' row blocks", "the model's shape", 2 * 8 * kMiB);
  return e;
}

MemoryEstimate training_memory(const Config& cfg, int workers, int rank, int64_t J, int64_t D, double v_floats,
                               bool general_prox, int64_t eval_rows, double process_bytes) {
  if (cfg.comm.scheme == Scheme::kSharded)
    return sharded_memory(cfg, workers, rank, J, D, v_floats, eval_rows, process_bytes);
  return worker_memory(cfg, workers, rank, J, D, v_floats, general_prox, process_bytes);
}

MemoryEstimate server_memory(const Config& cfg, int workers, int64_t J, int64_t D, bool whole_w, double process_bytes) {
  MemoryEstimate e;
  const double w = 4.0 * static_cast<double>(J) * static_cast<double>(D);
  const double S = static_cast<double>(cfg.fms.servers);
  add_process(e, process_bytes, 1);
  e.add(fmt::format("this server's shard of W (1/{} of {} x {} floats)", cfg.fms.servers, J, D), shape_keys(cfg),
        w / S);
  e.add("the workers' pushed blocks it holds (4 per worker) and its pulls", "fms.servers",
        (4.0 * workers + 4.0) * std::min(w / S, kMiB));
  if (whole_w)
    e.add("the whole W the model's proximal step needs (assembled from every server)", "the model's prox", w);
  return e;
}

}  // namespace sfb::runtime
