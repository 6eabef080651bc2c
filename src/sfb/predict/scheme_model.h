#pragma once
// The SFB engine's predictor: seconds per clock, bytes per clock and time to a target objective of
// every communication scheme (SFB full broadcast, rotating Halton with Q peers, FMS with S servers,
// the all-reduce) at N nodes, from a profile that sfbd measured on the job (baselines/
// scheme_profiler.h) and a link, named or fitted. The counterpart of the MG-WFBP simulator
// (sfb/mgwfbp) for the matrix models; sfb-plan and comm.scheme = "auto" use it. The profile and
// how its pieces scale to another shape and other cores are in profile.h; the crossovers (where
// the winner changes) in crossovers.h.
//
// One BSP clock (sfb.staleness = 0) of worker p, every worker alike, is modelled as its phases in
// sequence (under BSP each waits for the previous: clock c + 1 computes on W with every clock <= c
// applied):
//   compute   SF computation of K samples (sf_s), scaled by the cores the ranks share (below),
//             and the evaluations' measured cost per clock, which under BSP every rank waits for:
//             rank 0's evaluation (eval_s), its snapshot's copy of W when the monitor copies at the
//             target's W, and every rank's drift sketch, once per eval_every clocks
//   sfb       send its batch of B bytes to the N - 1 peers (full) or Q of them (halton) and receive
//             as many: a + n B b on its link (n = N - 1 or Q; b the per-byte time of a host's link
//             with every flow at once, fitted from the broadcast itself); then apply the own batch
//             and the n received ones (apply_fixed_s + (n + 1) apply_batch_s); halton adds its
//             reconciliation, an all-reduce of W and the add of the mean, every reconcile_every
//             clocks
//   allreduce form the dense J x D update (form_dense_s), all-reduce its 4 J D bytes (sfb's
//             segmented algorithm: 2 a + 2 (N - 1) / N M b, or direct (N - 1) M b when that is not
//             slower; at the profiled N the fit A + B M itself), add it to W (add_dense_s)
//   fms       form the dense update, push 4 J D bytes split over S servers and pull W back: each
//             server's link carries N/S of every worker's bytes each way ((N + S - 2) / S with the
//             servers beside workers 0..S-1: Target::fms_beside_workers), a worker's link all of
//             its own; pushes and pulls overlap (pipelined blocks), so the busiest direction
//             a + 4 J D max(1, N/S) b, of which forming the update block by block hides its own
//             time; the servers' adds of N shards of J D / S floats (N add_dense_s / S) run
//             block by block while later blocks arrive, so the slower of push and adds counts,
//             then the last block's adds, the pipeline's fill and the worker's copy of W in; on
//             the fitted link a server's link is the profile's incast (every worker pushing into
//             one host at once)
// Anchors: every piece is measured alone (a kernel, a broadcast round), and the engines themselves
// run a few clocks at the profiled N (without the monitor, and again with it). What they take beyond their pieces
// (the threads' hand-offs and locking, the transport's threads, the ranks' stagger and phases
// interleaving on shared cores) is carried to other N and shapes (SchemeProfile::Anchors) as
// seconds per clock (engine_s), which the measurements showed constant across link rates and K
// (for SFB and Halton; for the all-reduce a profile whose K was cut to a hundredth of the job's
// predicted 22.6 s a clock as a ratio and 14.6 as seconds, measured 14.0); when a dense engine
// ran faster than its pieces (forming and exchanging W by row blocks overlap them), as that ratio
// on its pieces instead (dense_anchor). FMS: when the profile was taken with its server ranks
// (mpirun -np P+S, comm.scheme = "fms"), its engine's clock with S servers against the modelled
// FMS clock there: slower, the excess as seconds per window round, part of the exchange's phase;
// faster, a ratio on all of FMS (compute, network, adds) on the profile's side of N = S only (the
// busiest link is a worker's with N <= S, a server's with N > S); rank 0's evaluations cost FMS
// what they cost at the profile less the slack a worker's link gains beyond it (scheme_model.cc);
// otherwise its compute and adds take the all-reduce's anchor and its network is its model alone.
// A rank of less than a core (SFB and Halton, with the broadcast's CPU measured: profile.h's
// bcast_cpu_ns_per_byte): its threads share that budget, so the clock is at least the SF
// computation, the evaluations, the apply and the CPU of the 2 n B bytes it sends and receives, at
// its cores (divided by what that floor overstates the engine measured at the profiled N,
// Anchors::cpu_floor); where that is longer than the sum above, the broadcast's CPU takes the place
// of the link's time and the engine's excess (waits a rank busy all the clock does not have).
// Shape and cores: every piece at the target's shape and a target rank's cores (profile.h's
// laws: work ratios, a memory floor, time as 1 / min(threads, cores / ranks sharing them)), with
// R' = Target::ranks_per_host ranks on a node of Target::cores: 1 when every node has its own
// cores, N when all N ranks share the profiled host (the netns emulation).
// Ignored: the overlap of the three threads within a clock (the update thread applies batches as
// they arrive: the model is an upper bound by the apply of the last ones), SSP/ASP overlap,
// stragglers beyond the profiled N's (engine_s does not grow with N), message headers, per-message
// costs, whether the monitor's evaluation overlaps training on a rank with cores to spare (it is
// added to every clock: pessimistic on large nodes), the FMS servers' own CPU contention
// (a server's adds are timed on a worker's cores), TCP slow start after idle, a switch's limits
// (full bisection assumed), topology (one hop), checkpoints, and how the engines' own cost changes
// with the shape (the anchors are taken at the profiled one).
#include <cstdint>
#include <string>
#include <vector>

#include "sfb/core/config.h"
#include "sfb/core/json.h"
#include "sfb/predict/profile.h"

namespace sfb::predict {

// A scheme to predict, in the config's vocabulary: its comm.scheme (never auto), under kSfb its
// sfb.broadcast (kFull; kHalton to q peers, 0: ceil(log2 N)), under kFms its servers (0: one per
// node). kSharded: W's rows over the ranks, from the pieces alone (no engine run anchors it).
struct Scheme {
  sfb::Scheme kind = sfb::Scheme::kSfb;
  Broadcast broadcast = Broadcast::kFull;
  int q = 0;
  int servers = 1;

  static Scheme sfb_full() { return {}; }
  static Scheme halton(int q) { return {sfb::Scheme::kSfb, Broadcast::kHalton, q, 1}; }
  static Scheme fms(int servers) { return {sfb::Scheme::kFms, Broadcast::kFull, 0, servers}; }
  static Scheme allreduce() { return {sfb::Scheme::kAllreduce, Broadcast::kFull, 0, 1}; }
  static Scheme sharded() { return {sfb::Scheme::kSharded, Broadcast::kFull, 0, 1}; }
  bool is_halton() const { return kind == sfb::Scheme::kSfb && broadcast != Broadcast::kFull; }
  std::string label() const;  // "sfb", "halton", "halton:q3", "fms:s2", "fms:n", "allreduce", "sharded"
  // How sfbd runs it: cfg's comm.scheme, and sfb.broadcast with sfb.halton_q or fms.servers (a
  // count, 0 standing for `nodes`).
  void apply_to(Config& cfg, int nodes) const;
};
// "sfb", "halton", "halton:3", "fms", "fms:2", "fms:n" (a server per node), "allreduce", "sharded" (and the
// labels "halton:q3", "fms:s2");
// InvalidArgument otherwise.
Scheme parse_scheme(const std::string& spec);

struct Target {
  int nodes = 4;  // workers (FMS adds its servers)
  Link link;      // the hosts' link
  // Ranks sharing one node's cores; 0: all of them, every rank on the profiled host (the netns
  // cluster).
  int ranks_per_host = 1;
  bool fitted = false;  // link is the profile's fit: at nodes = profile.workers use its all-reduce fit
  Shape shape{};        // the model's shape (J = 0: the job's, SchemeProfile::job_shape)
  double cores = 0;     // a node's cores (0: the profiled host's)
  int threads = 0;      // threads per rank (0: the profile's, or with `cores` given cores / ranks_per_host)
  // Where FMS's servers run: on hosts of their own (false), or server s on worker s's host (true;
  // with more servers than workers, the ones beyond on hosts of their own is not modelled: false
  // then; with ranks sharing a host too: fms_beside), as mpirun --map-by node places them on as many
  // hosts as workers (sfb-compare --netns).
  // Beside a worker a server's link does not carry that worker's share, and the worker's own pulls
  // from the other servers cross it: (N - 1 + S - 1) / S of W each way instead of N / S
  // (fms_server_link_w). The server's CPU beside the worker's is not modelled (it adds while the
  // worker waits for its pull).
  bool fms_beside_workers = false;
};
// FMS's busiest server link's bytes each way in units of W at N workers and S servers, placed as
// `beside` says (Target::fms_beside_workers): N / S, or (N + S - 2) / S beside the workers.
double fms_server_link_w(int nodes, int servers, bool beside);
// Whether FMS's servers run beside the workers at the target: Target::fms_beside_workers, S <= N and
// a node each (ranks_per_host 1: where ranks share a host, every flow crosses its one link anyway).
bool fms_beside(const Target& t, int servers);

// A target rank's min(threads, cores / ranks sharing them), and the ranks sharing its node.
double target_rank_cores(const SchemeProfile& p, const Target& t);
int target_ranks_sharing(const Target& t);
// The target's shape (the profile's when it names none).
Shape target_shape(const SchemeProfile& p, const Target& t);

struct Prediction {
  Scheme which;
  std::string label() const { return which.label(); }
  int nodes = 0;
  int q = 0, servers = 0;
  // Per clock; they add up to clock_s. engine_s: the engine's own cost beyond its pieces
  // (SchemeProfile::Anchors: sfb_s or dense.s; 0 where a ratio scales the pieces).
  double compute_s = 0, comm_s = 0, update_s = 0, engine_s = 0;
  double clock_s = 0;
  double bytes_per_clock = 0;       // the whole job's network bytes per clock
  double link_bytes_per_clock = 0;  // the busiest host link, one direction
  double time_to_target_s = -1;     // clocks_to_target * clock_s (-1: no clocks given)
};

// The dense all-reduce of `bytes` on `nodes` ranks over `link` (sfb's algorithm choice).
double allreduce_s(int64_t bytes, int nodes, const Link& link);
Prediction predict(const SchemeProfile& p, const Scheme& s, const Target& t, double clocks_to_target = -1);
Json to_json(const Prediction& r);

}  // namespace sfb::predict
