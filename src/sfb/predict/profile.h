#pragma once
// What the SFB engine's predictor (scheme_model.h) knows about a job: the scheme profile sfbd
// measures on it (sfbd --profile FILE, or the start of comm.scheme = "auto": runtime/
// scheme_profiler.h), and how each measured piece scales to another shape and another node.
//
// A profile holds one shape's seconds; the pieces scale with the work they do (the laws below),
// so one profile predicts any J, D, K and nonzeros of v (sfb-plan --rows --cols --minibatch
// --nnz). With w = the width of v (nonzeros per pair for sparse v, D for dense v):
//   sf_s           K J w       (u from W and x: logits, projections, codes; the built-in models),
//                  but for its part that does not grow with K (sf_fixed_s, dense v), as J D
//   apply_batch_s  K J w       (W += u v^T per pair)
//   apply_fixed_s  J D         (an apply's pass over W)
//   add_dense_s    J D         (W += dW)
//   form_dense_s   J D and K J w, in the profile's own proportion of the two (add_dense_s and
//                  apply_batch_s at the profiled shape)
//   batch_bytes    the encoding's formula at the new shape (comm/sf_codec.h), plus the profile's
//                  measured header bytes
//   eval_s         J w         (the same rows and test set, each row's logits or codes)
//   eval_copy_s    J D
//   eval_sketch_s  J D         (W times a D x 8 matrix)
// and none is faster than its memory traffic at the measured bandwidth (mem_bytes_per_s, a
// STREAM-style add every rank runs at once): a profile taken on a W that fits in cache would
// otherwise predict a W of gigabytes at cache speed. The floor holds once a piece's traffic
// outgrows the profile's own (which its measurement includes, at whatever cache level it ran):
// a target between the two in size, still in cache, is predicted slower than it runs (the cache
// sizes VMs report are not to be trusted: this one's says 480 MiB of L3). Traffic per piece: SF computation reads the
// W rows it touches (4 J min(D, K w) bytes), an apply reads and writes them (8 J min(D, K w)), its
// pass over W, forming the dense update and the snapshot's copy 8 J D, the add 12 J D, an
// evaluation at least 4 J D (W read once).
// Cores: a rank's compute time goes as 1 / min(threads, cores / ranks sharing them) (parallel
// efficiency 1 assumed: measured here only up to 2 cores); its memory bandwidth is the measured
// bandwidth per such core times the target rank's cores, up to its share of the profiled machine's
// cores (machine_cores / ranks sharing a node): a node with more cores than the profiled machine is
// credited only that machine's bandwidth, which is pessimistic for large nodes.
#include <cstdint>
#include <string>
#include <vector>

#include "sfb/core/config.h"
#include "sfb/core/json.h"
#include "sfb/core/tensor.h"

namespace sfb::predict {

// A host's link: a message of M bytes takes a_us + b_us_per_byte M; b is the per-byte time of the
// host's link when it carries every flow (a switched network: each host's link is the bottleneck).
struct Link {
  std::string name;
  double a_us = 0.0;
  double b_us_per_byte = 0.0;
};
// The catalogue's links (core/links.h: 1gbe, 10gbe, 25gbe, ib, 100gbe; their names: link_names());
// InvalidArgument naming the list otherwise.
Link named_link(const std::string& name);

// A matrix model's shape: what the pieces' work scales with.
struct Shape {
  int64_t J = 0, D = 0, K = 0;
  bool sparse_v = false;
  double v_nonzeros = 0.0;  // sparse v: mean nonzeros per pair (MLR: of a sample's x)
  double v_width() const;   // sparse: min(v_nonzeros, D); dense: D
};

// The all-reduce engine's anchor: its pieces times `ratio`, plus `s` seconds per clock.
struct DenseAnchor {
  double ratio = 1.0, s = 0.0;
};
// From the engine's clock and its pieces' sum: slower than them, the difference as seconds per
// clock; faster (the pieces overlap), their ratio; 1 and 0 without a measurement.
DenseAnchor dense_anchor(double engine_s, double pieces_s);

// What sfbd measured (sfbd --profile FILE, or the start of comm.scheme = "auto").
struct SchemeProfile {
  std::string config;  // the job's config file
  std::string model;
  int workers = 0;              // ranks that trained when measured
  int ranks_on_host = 1;        // ranks sharing `cores` (one machine's kernel and CPU budget: netns hosts too)
  double cores = 1;             // the cores those ranks share (a CPU budget's quota when one is set)
  double machine_cores = 0;     // the machine's hardware threads (0: not recorded; `cores` then)
  int threads = 1;              // OpenMP threads per rank
  int64_t J = 0, D = 0, K = 0;  // the shape measured
  // The job's minibatch when sfbd measured a smaller K (its SF computation at the job's K would not
  // have let the profile finish in its budget: profiler/scheme_profiler.h); 0: K itself. Predictions
  // are for the job's shape unless told another (job_shape()).
  int64_t job_K = 0;
  bool sparse_v = false;
  double v_nonzeros = 0.0;  // mean nonzeros of v per pair (sparse v)
  // The layout the model stores W in (api::Model::layout: MLR is feature-major on sparse data).
  // FMS's shards and blocks and the all-reduces' calls are cut from the stored matrix's rows (J of
  // D floats, or D of J feature-major), so the predictor counts them in it at any shape (a 10 x
  // 1,000,000 W: 10 rows of 4 MB, or a million of 40 bytes). Profiles of earlier builds: row-major.
  Layout layout = Layout::kRowMajor;
  // The model has a proximal step (api::Model::has_prox): sfbd's memory estimate counts FMS's
  // queued clocks and the servers' whole W for it (runtime/memory_estimate.h). An earlier build's
  // profile: false.
  bool has_prox = false;
  int64_t stored_rows(const Shape& s) const { return sfb::stored_rows(layout, s.J, s.D); }
  int64_t stored_cols(const Shape& s) const { return sfb::stored_cols(layout, s.J, s.D); }
  int64_t batch_bytes = 0;  // one worker's encoded batch of K pairs
  // Seconds, the slowest rank's median (measured on every rank at once):
  double sf_s = 0.0;  // compute_sf of K samples
  // Of sf_s, what does not grow with K (a dense model's pass over W): from the SF computation of
  // K/2 samples timed too, 2 sf(K/2) - sf(K), within [0, sf_s]. 0: none (K = 1, or a profile of an
  // earlier build: all of sf_s grows with K). docs/compare.md, "Scaling to another shape".
  double sf_fixed_s = 0.0;
  double apply_fixed_s = 0.0;  // applying m batches: apply_fixed_s + m apply_batch_s
  double apply_batch_s = 0.0;
  double form_dense_s = 0.0;     // U^T V of K pairs into a J x D update
  double add_dense_s = 0.0;      // W += a J x D update
  double mem_bytes_per_s = 0.0;  // a rank's memory bandwidth, every rank at once (0: not measured)
  // The SFB engine itself (runtime::Worker) for a few clocks of full broadcast at `workers` (0:
  // not measured): its steady seconds per clock, and of it the compute thread's SF computation,
  // the update thread's apply of the `workers` batches and the rest, the network. They anchor the
  // pieces measured alone at the profiled N (engine_*_s / the modelled piece there).
  double engine_clock_s = 0.0;
  double engine_sf_s = 0.0;
  double engine_comm_s = 0.0;
  double engine_apply_s = 0.0;
  // The SFB engine's steady clock again with rank 0's monitor evaluating every eval_every clocks as
  // in training, over whole evaluation periods (0: not measured: no period fitted in the budget, or
  // an earlier build's profile). Its excess over engine_clock_s is what the evaluations cost the
  // clocks (Anchors::eval).
  double engine_eval_clock_s = 0.0;
  // The SFB engine's steady clock again on the first two ranks alone, one peer each (0: not
  // measured: fewer than 3 workers, no room in the budget, or an earlier build's profile). Its
  // excess over its pieces there against engine_clock_s's at `workers` says how the engine's own
  // cost grows with the batches a rank receives (Anchors::sfb_per_peer_s).
  double engine_pair_clock_s = 0.0;
  // The engine's steady clock of the all-reduce baseline at `workers` (0: not measured): anchors
  // the all-reduce (Anchors::dense), unless its run with evaluations below was faster.
  double engine_allreduce_clock_s = 0.0;
  // The FMS engine's steady clock with engine_fms_servers server ranks working (0: not measured: the
  // job was profiled without server ranks; mpirun -np P+S with comm.scheme = "fms" measures it).
  double engine_fms_clock_s = 0.0;
  int engine_fms_servers = 0;
  // Of those servers, the ones that ran on a worker's host (its machine's CPU budget, or its
  // hostname: profiler/scheme_profiler.cc): mpirun --map-by node on as many hosts as workers puts
  // server s beside worker s (sfb-compare --netns on P hosts). 0: on hosts of their own, or an
  // earlier build's profile. FMS's model places them as measured (Target::fms_beside_workers).
  int engine_fms_servers_beside = 0;
  // Those two engines again with rank 0's monitor evaluating every eval_every clocks, over whole
  // periods, as engine_eval_clock_s for SFB (0: not measured: no period fitted, an earlier build's
  // profile, or no FMS engine): Anchors::eval_allreduce and eval_fms. The all-reduce's, where it
  // is the faster of its two runs, is also its engine's clock (Anchors::dense).
  double engine_allreduce_eval_clock_s = 0.0;
  double engine_fms_eval_clock_s = 0.0;
  // The standard errors of those six steady clocks: a rank's clocks' sample deviation over the
  // root of their count, the largest rank's (0: not measured, fewer than two clocks, or an earlier
  // build's profile). Said with the runs (sfb-plan), not used by the predictions: with
  // evaluations the clocks they lengthen are in the deviation too (docs/compare-log.md, "Two runs
  // of one engine").
  double engine_clock_se_s = 0.0;
  double engine_eval_clock_se_s = 0.0;
  double engine_allreduce_clock_se_s = 0.0;
  double engine_allreduce_eval_clock_se_s = 0.0;
  double engine_fms_clock_se_s = 0.0;
  double engine_fms_eval_clock_se_s = 0.0;
  Link link;              // fitted from the broadcast at `workers` ranks (name "fitted")
  double bcast_r2 = 0.0;  // the fit's R^2
  // The broadcast's CPU, ns a byte a rank sends and receives: the SFB engine's run at `workers`
  // (engine_clock_s's), its communication thread's CPU (encoding its batch, decoding the peers')
  // and the transport's own threads' (TCP's I/O thread, charged the kernel's work on its sockets)
  // over the bytes the rank sent and received, the ranks' mean (0: not measured: no engine run, a
  // communication thread that polled (MPI's or the in-process transport, whose waits cannot block:
  // its CPU is what idle time it found, 12 ns a byte on 4 ranks sharing 2 vCPUs), a profile of an
  // earlier build). Its encoding of the rank's batch, once a clock, is spread over the bytes of
  // the profiled N's peers (a fraction that shrinks with N: carried as measured). On a rank of less
  // than a core it competes with the SF computation, the evaluations and the apply for the same
  // budget: their sum bounds the clock from below (scheme_model.h, SFB and Halton; scaled down where
  // it overstates the engine at the profiled N, Anchors::cpu_floor).
  double bcast_cpu_ns_per_byte = 0.0;
  // A host's link when the other workers all send to it at once (what an FMS server's link sees):
  // a + b M for M bytes into it (0: not measured; the broadcast's link stands in).
  double incast_a_us = 0.0;
  double incast_b_us_per_byte = 0.0;
  Link incast() const;          // the incast's link, or `link` without one
  double allreduce_a_us = 0.0;  // sfb's all-reduce at `workers` ranks: T(M) = A + B M
  double allreduce_b_us_per_byte = 0.0;
  double allreduce_r2 = 0.0;
  // The dense engine's all-reduce block at the profile's W (dense_allreduce_block_bytes): the fit
  // was taken at it (W / block calls in a row; W / 4, 4 calls, where the block is not a quarter of W
  // or less) and at 4 KiB (32 calls in a row; an earlier build: one call of W), so that A is a
  // call's start-up in the engine's rhythm. 0: an earlier build's fit, at W / 4 and W, one call
  // each, whose A predicts only whole-W calls.
  int64_t allreduce_block_bytes = 0;
  // sfb's all-reduce of `bytes` at `nodes` ranks from the fit, in `calls` calls (the engine's:
  // dense_allreduce_cuts, reconcile_calls), seconds. At the profile's own N, A a call and B a byte;
  // at another, A grows as N - 1 (a call's messages: every rank sends each other rank its segments
  // and their sums, and on a fraction of a core each costs CPU time: sfb-commbench on 4 and 8 netns
  // hosts of 0.125 cores at 1 Gbit/s measured A at 4.6 and 10.1 ms; the profile's 4 KiB calls in a
  // row 1.1 and 4.2) and B as the bytes a rank sends, 2 (N - 1) / N M (N - 1 times M where the
  // engine, by its default cost, picks the direct algorithm for a call's size). A profile without
  // allreduce_block_bytes: one call whatever `calls`, and A as two steps' start-up at any N
  // (link_cost_from_fit).
  double allreduce_s(int64_t bytes, int64_t calls, int nodes) const;
  std::string reconcile;        // partial broadcast's reconciliation mode ("" none)
  int64_t reconcile_every = 0;  // its period in clocks (0: sfbd's automatic one)
  double profile_s = 0.0;       // how long measuring it took (0: not recorded)
  // The engine runs the profiler meant to take and did not, for want of time in its budget (their
  // anchors then stay at their pieces alone): "the SFB engine", "the two-rank SFB engine", "the
  // all-reduce engine", "the FMS engine" (the runs with evaluations are not counted: a period may
  // be longer than the budget by design). sfbd --profile refuses such a profile unless asked for a
  // partial one (--partial-profile); sfb-plan says so at the top. Empty: none, or an earlier
  // build's profile.
  std::vector<std::string> skipped;
  // Of the CPU time the machine wanted while it was measured, the share a hypervisor gave to other
  // guests (apps/sfbd/machine.h steal_share; -1: unknown or not recorded: an earlier build's profile had
  // cpu_steal_share, a share of all the CPU time, idle included, which is not read). Not used by
  // the predictions: it says how far the machine's neighbours may have slowed what the profile timed.
  double cpu_stolen_share = -1.0;
  // Evaluations, every eval_every clocks (0: none): under BSP every rank waits for what they take
  // of rank 0's cores, and for its own sketch, so they add to the clocks. eval_s: one evaluation
  // as rank 0's monitor runs it (the objective on eval.train_sample rows, the accuracy on the test
  // set, the model's metrics), timed alone on rank 0; eval_copy_s: copying W into its snapshot,
  // which rank 0's update thread does first when eval_snapshot copies (EvalConfig::copies at the
  // target's W); eval_sketch_s: the replica-drift sketch every rank's update thread takes.
  // Profiles written before these were measured have eval_rows_per_clock instead (rows evaluated per
  // clock, each costing a sample's SF computation): used when eval_every is 0.
  int64_t eval_every = 0;
  double eval_s = 0.0;
  double eval_copy_s = 0.0;
  double eval_sketch_s = 0.0;
  Snapshot eval_snapshot = Snapshot::kAuto;
  double eval_rows_per_clock = 0.0;
  Shape shape() const;        // the shape measured
  Shape job_shape() const;    // the job's: shape() with K = job_K when it was cut
  double rank_cores() const;  // min(threads, cores / ranks_on_host): what one rank computes with
  // The measured evaluations' share of a clock at the profile's own shape and pieces
  // (measured_evals_per_clock_s below); 0 without eval_every.
  double evals_per_clock_s() const;
  // What the engines measured at `workers` beyond their pieces measured alone (docs/compare.md,
  // "Anchors" and "Evaluations"; the measurements behind each rule are in docs/compare-log.md):
  //   sfb_s           the SFB engine's clock (its run without the monitor) minus its pieces (SF
  //                   computation, the fitted broadcast, the apply of `workers` batches), at least
  //                   0: seconds per clock, carried to any N and shape as they are.
  //   sfb_per_peer_s  what each peer's batch a clock adds to sfb_s: (sfb_s's excess less the pair
  //                   run's, engine_pair_clock_s over its pieces at the cores the pair had: cores / 2
  //                   each where ranks share a host, at most `threads`) / (workers - 2), at least 0
  //                   (0 unmeasured). A rank receiving n batches a clock (SFB N - 1, Halton Q)
  //                   carries sfb_s + sfb_per_peer_s (n - (workers - 1)), at least 0.
  //   dense           the all-reduce engine's clock (the faster of its runs without and with
  //                   evaluations) against its pieces (SF computation, forming the update, the
  //                   fitted all-reduce of W, the add; dense_anchor): seconds per clock when slower,
  //                   a ratio on every piece when faster. FMS's compute and adds take it too unless
  //                   its own engine was measured (scheme_model.cc, fms_engine_anchor).
  //   eval            what the evaluations cost SFB's engine (engine_eval_clock_s - engine_clock_s)
  //                   over their pieces (eval_s, eval_copy_s, eval_sketch_s every eval_every
  //                   clocks), at least 0; 1 unmeasured. SFB and Halton take it.
  //   eval_allreduce, eval_fms  the same for the all-reduce's engine and FMS's (their runs with the
  //                   evaluations), 1 unmeasured (FMS's: also at another server count than
  //                   engine_fms_servers). The all-reduce's is at most 1: its evaluations run beside
  //                   its wait on the network. Each scheme's own, since what an evaluation costs a
  //                   clock depends on how busy the scheme keeps rank 0's cores and link.
  struct Anchors {
    double eval = 1.0, eval_allreduce = 1.0, eval_fms = 1.0;
    double sfb_s = 0.0, sfb_per_peer_s = 0.0;
    // The CPU floor's divisor (scheme_model.h): the SFB engine's CPU at the profiled N (SF
    // computation, the apply of `workers` batches, the broadcast's CPU at the rank's cores) over
    // the engine's measured clock, at least 1: a floor above the clock it bounds is scaled down to
    // the engine. 1 without an engine or the broadcast's CPU.
    double cpu_floor = 1.0;
    DenseAnchor dense;
  };
  Anchors anchors() const;
};

// Encoded bytes of one worker's batch of K pairs at shape s: u K J floats; v K D floats dense, or
// K + 1 row pointers and 8 bytes per nonzero (the codec's payload, without its header).
double batch_payload_bytes(const Shape& s);

// The measured pieces at another shape and another rank's cores (the laws above), before the
// engine's anchors. `rank_cores`: a target rank's min(threads, cores / ranks sharing them);
// `ranks_sharing`: the ranks sharing one machine's memory there.
struct Pieces {
  double sf_s = 0, apply_fixed_s = 0, apply_batch_s = 0, form_dense_s = 0, add_dense_s = 0;
  double batch_bytes = 0;
  // The broadcast's CPU a byte sent or received (bcast_cpu_ns_per_byte) over the rank's cores where
  // it has less than one (its threads then share them); 0 on a rank of a core or more.
  double bcast_cpu_s_per_byte = 0;
  double eval_s = 0, eval_copy_s = 0, eval_sketch_s = 0;  // one evaluation, its copy of W, a drift sketch
};
Pieces pieces_at(const SchemeProfile& p, const Shape& s, double rank_cores, int ranks_sharing);
// The measured evaluations' share of a clock at shape s: one evaluation, the snapshot's copy where
// eval_snapshot copies s's W (EvalConfig::copies) and a drift sketch, of `x`, every eval_every
// clocks; 0 without eval_every.
double measured_evals_per_clock_s(const SchemeProfile& p, const Pieces& x, const Shape& s);

Json to_json(const SchemeProfile& p);
// Throws DataError naming `source` and the key when a field is missing or out of range.
SchemeProfile profile_from_json(const Json& j, const std::string& source);
SchemeProfile read_profile(const std::string& path);

}  // namespace sfb::predict
