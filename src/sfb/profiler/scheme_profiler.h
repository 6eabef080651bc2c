#pragma once
// Measures the profile of the SFB engine's predictor (sfb/predict/scheme_model.h) on the live job,
// before training (sfbd --profile FILE, and comm.scheme = "auto"): every rank at once, so ranks
// sharing cores contend as they will in training, each time the slowest rank's median:
//   sf_s          the model's compute_sf on K samples of this rank's partition (a model instance of
//                 its own, so a model with state, such as SDCA's duals, trains from the start after)
//   apply         the update applier on 1 and on m copies of the batch (m = min(P, 8), at least 2):
//                 the fit apply_fixed_s + m apply_batch_s
//   form_dense_s  the baselines' dense update U^T V of the batch, formed by row blocks of <= 16 MiB
//                 as they form it (baselines/dense_update.h), scaled to W's rows
//   add_dense_s   W += a J x D update (what the all-reduce baseline adds, FMS's servers add per
//                 shard), by the same row blocks
//   mem_bytes_per_s  a += b over two 32 MiB arrays, 8 passes a timing, with the rank's threads:
//                 the memory floor of the pieces at a larger shape (predict/profile.h)
//   link          every rank sends M bytes to every other at once and receives theirs, as the SFB
//                 communication thread does, at M = 16 KiB, B / 4 and B (B the batch's encoded
//                 bytes, at least 1 MiB, at most 16 MiB): T(M) = a + (P - 1) M b fitted per rank
//   incast        every rank but 0 sends M bytes to rank 0 at once (an FMS server's link under
//                 every worker's push), M up to W's bytes (1 - 16 MiB): T = a + (P - 1) M b
//   eval_s        rank 0 alone: one evaluation as its monitor runs one (the objective on
//                 eval.train_sample rows, the accuracy on the test set, the model's metrics) and
//                 eval_copy_s, copying W into a snapshot (timed whatever eval.snapshot: the
//                 predictor decides at the target's W whether the monitor copies); every rank:
//                 eval_sketch_s, the replica-drift sketch its update thread takes per evaluation
//   engine        the engine itself (runtime::Worker) for kEngineSteadyS of steady clocks (at least
//                 repeats + 4 clocks, at most kEngineMaxClocks) of SFB full broadcast, of SFB
//                 full broadcast again with rank 0's monitor evaluating every eval.every clocks
//                 (whole periods: engine_eval_clock_s, when one fits in its share), of SFB full
//                 broadcast on the first two ranks alone (one peer each, with 3 workers or more:
//                 engine_pair_clock_s; the other ranks wait for rank 0's word), and of the
//                 all-reduce baseline without and with the evaluations (engine_allreduce_clock_s,
//                 engine_allreduce_eval_clock_s): the steady clock, the compute thread's
//                 SF computation and the update thread's apply (the anchors of predict/
//                 scheme_model.h); as many clocks as the pieces predict to fit in what is left of
//                 ProfileRequest::budget_s (SFB a quarter, with evaluations up to half, on two
//                 ranks an eighth up to five eighths, the all-reduce half the rest, or all of it
//                 when half does not fit 4 clocks, with evaluations the remainder), with a clock
//                 for the engine's start and stop, at least 4, or none (no anchor: a warning); a
//                 run with evaluations is sized at the engine's clock plus what they cost SFB's
//                 engine (their pieces if more), over whole periods, or not run when one does not
//                 fit
//   allreduce     sfb's all-reduce (comm/allreduce.h) of 4 J D / 4 and 4 J D bytes (4 J D at least
//                 1 MiB, at most 32 MiB): T(M) = A + B M
//   fms engine    only when the job was launched with FMS's server ranks (comm.scheme = "fms",
//                 mpirun -np P+S; ProfileRequest::workers < the transport's size): the workers
//                 measure all of the above among themselves (comm/transport/prefix.h) in two
//                 thirds of the budget while the servers wait, then the FMS engine runs with the
//                 servers working (baselines/fms_server.h) for as many clocks as fit in half the
//                 rest (all of it when half does not fit 4; none when that does not: a warning):
//                 engine_fms_clock_s with engine_fms_servers = S; then, when a whole evaluation
//                 period fits in what is left, again with rank 0's monitor evaluating
//                 (engine_fms_eval_clock_s): after each run worker 0 waits until every server has
//                 taken every worker's BYE and tells each whether another run follows, and the
//                 servers serve it a fresh shard. The servers return an empty profile (workers 0).
// A fit whose slope noise made non-positive (an idle, fast link) falls back to the largest size's
// time per byte with no start-up.
// ranks_on_host counts the workers on this machine's kernel (its boot id) in the same CPU budget: the
// netns cluster's "hosts" are one machine's cores, or with --cpus a cgroup's share of them each; or
// on its hostname where more share that. FMS's servers are not counted (they wait while the workers
// measure); engine_fms_servers_beside says how many ran on a worker's hostname. The engine runs that
// did not fit in the budget are named in `skipped` (sfbd --profile refuses such a profile unless
// --partial-profile).
// Order and memory: the pieces first, on one W of the profile's own, freed before the engines hold
// theirs, so profiling needs what training needs (one W per rank and bounded parts), whatever
// the shape. Time: ProfileRequest::budget_s (60 s) bounds it whatever the shape. First one SF
// computation of min(K, 16) samples: when the job's K would make one take over budget_s /
// kSfPerBudget, everything is measured at a K that does not (profiled_minibatch; the profile's K,
// with job_K the job's, and a warning): its pieces and engines rescale to the job's K by the
// laws of predict/profile.h. The pieces: `repeats` SF computations at K and at K/2 (dense v: the
// part that does not grow with K), applies of 1 and 8 batches, dense-update blocks and adds (each
// timed again while the timings add up to under 0.3 s, up to 15), and one evaluation (more when
// one takes under a second); on a rank with less than a core, as CPU seconds over its share. The links in half of
// what the pieces left, a third each for the broadcast, the incast and the all-reduce: per size a
// warm-up round, then as many of `repeats` rounds as fit (at least 1). The engines in the rest.
// What the budget does not bound: one evaluation and one copy of W on rank 0 (what the job's
// monitor runs every eval.every clocks anyway), the applies' pass over W (a W too large for one
// pass in a second wants a stand-in job of fewer rows: docs/compare.md), and the data's loading
// before it. profile_s says how long it took.
// It is its own layer, above the baselines it times (profiler: baselines runtime ...): the engine
// and the predictor stay apart (runtime does not see predict).
#include <string>

#include "sfb/api/model.h"
#include "sfb/comm/allreduce.h"
#include "sfb/comm/transport.h"
#include "sfb/core/config.h"
#include "sfb/io/dataset.h"
#include "sfb/predict/profile.h"

namespace sfb::profiler {

struct ProfileRequest {
  const Config* cfg = nullptr;
  comm::Transport* transport = nullptr;  // every rank takes part; nothing else may use it meanwhile
  api::Model* model = nullptr;           // a fresh instance: compute_sf is called on it
  const io::Dataset* train = nullptr;    // this rank's partition
  // Rank 0's monitor's data (runtime::WorkerStart): the rows it evaluates the objective on (null or
  // empty: `train`) and the test set (null: none).
  const io::Dataset* objective_rows = nullptr;
  const io::Dataset* test = nullptr;
  int workers = 0;
  int ranks_on_host = 1;  // MPI's ranks on this host (the fallback without a boot id)
  double cores = 1;       // the cores this rank's CPU budget allows (apps/sfbd/machine.h)
  std::string cpu_group;  // the cgroup of that budget ("" none): ranks in one share it
  int repeats = 3;
  double budget_s = 60;  // the whole profile's time, which bounds the engines' clocks
  // The all-reduce baseline's engine (comm.collectives: null is sfb's; sfbd passes MPI's for "mpi").
  comm::AllreduceFactory allreduce;
};

// Every rank returns the same profile (the slowest rank's times).
predict::SchemeProfile measure_scheme_profile(const ProfileRequest& req);

// The budget's parts (measure_scheme_profile keeps to ProfileRequest::budget_s whatever the shape):
// one SF computation of the minibatch measured may take a kSfPerBudget-th of the budget. The pieces
// take about 20 SF computations' worth of work (3 SF computations at K and 3 at K / 2, 3 (1 + m)
// batches applied, 3 dense updates formed; the timings past 3 of a short piece take at most 0.3 s
// each) and each engine clock an SF computation and N batches' apply, so at a hundredth each the
// pieces take a fifth of the budget and 6 engine clocks fit in what is left.
inline constexpr double kSfPerBudget = 100;
// Each engine runs for about kEngineSteadyS seconds of steady clocks (fewer when the budget is
// short, at most kEngineMaxClocks clocks): 4 steady clocks, as run before, measured the SFB engine
// of configs/compare_mlr_2048_k16.toml on 4 hosts of 0.125 cores at 0.100-0.135 s a clock in one
// validation where training ran 0.158-0.166 (the CPU budget's 8 ms periods land unevenly on so
// few clocks).
inline constexpr double kEngineSteadyS = 3.0;
inline constexpr int64_t kEngineMaxClocks = 64;
// The minibatch to profile at: the job's K, or the largest smaller one (at least 1) whose SF
// computation takes at most budget_s / kSfPerBudget, given that one of probe_K samples took
// probe_s (SF computation is linear in K: predict/profile.h). K itself when probe_K >= K.
int64_t profiled_minibatch(int64_t K, int64_t probe_K, double probe_s, double budget_s);
// Repeats of a measurement taking one_s each that fit in allowed_s: from 1 to `repeats`.
int repeats_within(int repeats, double one_s, double allowed_s);
// Of an SF computation of K samples that took sf_s, the part that does not grow with K, given that
// one of K / 2 took half_s: sf_s less K times the slope between the two, within [0, sf_s] (0 for
// K < 2).
double sf_fixed_seconds(double sf_s, double half_s, int64_t K);

}  // namespace sfb::profiler
