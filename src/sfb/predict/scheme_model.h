#pragma once
// The SFB engine's predictor: seconds per clock, bytes per clock and time to a target objective of
// every communication scheme (SFB full broadcast, rotating Halton with Q peers, FMS with S servers,
// the all-reduce) at N nodes, from a profile that sfbd measured on the job (baselines/
// scheme_profiler.h) and a link, named or fitted. The counterpart of the MG-WFBP simulator
// (sfb/mgwfbp) for the matrix models; sfb-plan and comm.scheme = "auto" use it.
//
// One BSP clock (sfb.staleness = 0) of worker p, every worker alike, is modelled as its phases in
// sequence (under BSP each waits for the previous: clock c + 1 computes on W with every clock <= c
// applied):
//   compute   SF computation of K samples (sf_s), scaled by the cores the ranks share (below)
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
//             server's link carries N/S of every worker's bytes each way, a worker's link all of
//             its own; pushes and pulls overlap (pipelined blocks), so the busiest direction
//             a + (4 J D max(1, N/S) + fill) b, with the servers' adds of N shards of J D / S
//             floats (N add_dense_s / S) after it and the worker's copy of W in
// Anchors: every piece is measured alone (a kernel, a broadcast round), and the SFB engine itself
// runs a few clocks at the profiled N; each piece of the engine over the same piece modelled there
// scales it everywhere (the three threads' polling and locking, the transport's threads and the
// ranks' phases interleaving on shared cores, which the pieces alone do not have): SF computation
// and forming the dense update by the compute anchor, applying and adding by the apply anchor, the
// all-reduce by the all-reduce engine's clock (what it leaves of compute and add, over the fitted
// all-reduce). The SFB broadcast is its fit alone (what the engine's clock leaves of compute and
// apply mixes it with the ranks' stagger), and FMS's network is its model alone (its servers are
// ranks a profile does not have).
// Ranks sharing cores: compute and update times measured with R ranks of T threads on C cores
// (contention = max(1, R T / C)) are divided by it and multiplied by the target's, max(1, R' T / C)
// for R' = Target::ranks_per_host: 1 when every node has its own cores, N when all N ranks share
// the profiled host (the netns emulation).
// Ignored: the overlap of the three threads within a clock (the update thread applies batches as
// they arrive: the model is an upper bound by the apply of the last ones), SSP/ASP overlap,
// stragglers and the variance of compute, message headers, the FMS servers' own CPU contention,
// TCP slow start after idle, a switch's limits (full bisection assumed), and topology (one hop).
#include <cstdint>
#include <string>
#include <vector>

#include "sfb/core/json.h"

namespace sfb::predict {

// Ordinary least squares y = a + b x, and its R^2 (1 when y is constant and fits exactly).
struct LineFit {
  double a = 0.0, b = 0.0, r2 = 0.0;
};
LineFit fit_line(const std::vector<double>& x, const std::vector<double>& y);

// A host's link: a message of M bytes takes a_us + b_us_per_byte M; b is the per-byte time of the
// host's link when it carries every flow (a switched network: each host's link is the bottleneck).
struct Link {
  std::string name;
  double a_us = 0.0;
  double b_us_per_byte = 0.0;
};
// "1gbe", "10gbe", "25gbe", "100gbe": b at the line rate, a 50, 25, 10 and 5 us (one TCP message
// through a switch); InvalidArgument naming the list otherwise.
Link named_link(const std::string& name);
std::vector<std::string> named_links();

// What sfbd measured (sfbd --profile FILE, or the start of comm.scheme = "auto").
struct SchemeProfile {
  std::string config;  // the job's config file
  std::string model;
  int workers = 0;        // ranks that trained when measured
  int ranks_on_host = 1;  // ranks sharing this machine's cores (the same kernel: netns hosts too)
  int cores = 1;          // this host's cores
  int threads = 1;        // OpenMP threads per rank
  int64_t J = 0, D = 0, K = 0;
  bool sparse_v = false;
  double v_nonzeros = 0.0;  // mean nonzeros of v per pair (sparse v)
  int64_t batch_bytes = 0;  // one worker's encoded batch of K pairs
  // Seconds, the slowest rank's median (measured on every rank at once):
  double sf_s = 0.0;           // compute_sf of K samples
  double apply_fixed_s = 0.0;  // applying m batches: apply_fixed_s + m apply_batch_s
  double apply_batch_s = 0.0;
  double form_dense_s = 0.0;  // U^T V of K pairs into a J x D update
  double add_dense_s = 0.0;   // W += a J x D update
  // The SFB engine itself (runtime::Worker) for a few clocks of full broadcast at `workers` (0:
  // not measured): its steady seconds per clock, and of it the compute thread's SF computation,
  // the update thread's apply of the `workers` batches and the rest, the network. They anchor the
  // pieces measured alone at the profiled N (engine_*_s / the modelled piece there).
  double engine_clock_s = 0.0;
  double engine_sf_s = 0.0;
  double engine_comm_s = 0.0;
  double engine_apply_s = 0.0;
  // The engine's steady clock of the all-reduce baseline at `workers` (0: not measured): anchors
  // the all-reduce's network (what the clock leaves of its compute and add).
  double engine_allreduce_clock_s = 0.0;
  Link link;                    // fitted from the broadcast at `workers` ranks (name "fitted")
  double bcast_r2 = 0.0;        // the fit's R^2
  double allreduce_a_us = 0.0;  // sfb's all-reduce at `workers` ranks: T(M) = A + B M
  double allreduce_b_us_per_byte = 0.0;
  double allreduce_r2 = 0.0;
  std::string reconcile;        // partial broadcast's reconciliation mode ("" none)
  int64_t reconcile_every = 0;  // its period in clocks (0: sfbd's automatic one)
  double contention() const;    // max(1, ranks_on_host threads / cores)
  // The engine's pieces over the same pieces measured alone, at `workers` (1 without a
  // measurement): SF computation, the apply of `workers` batches, the all-reduce of W.
  struct Anchors {
    double compute = 1.0, apply = 1.0, allreduce = 1.0;
  };
  Anchors anchors() const;
};

// Encoded bytes of one worker's batch of K pairs: the profile's batch_bytes, or from its shape (u
// K J floats; v K D floats dense, or K + 1 row pointers and 8 bytes per nonzero).
double batch_bytes_of(const SchemeProfile& p);

Json to_json(const SchemeProfile& p);
// Throws DataError naming `source` and the key when a field is missing or out of range.
SchemeProfile profile_from_json(const Json& j, const std::string& source);
SchemeProfile read_profile(const std::string& path);

// A scheme to predict: "sfb" (full), "halton" (Q peers, 0: ceil(log2 N)), "fms" (S servers, 0: one
// per node), "allreduce".
struct Scheme {
  std::string name;
  int q = 0;
  int servers = 1;
  std::string label() const;  // "sfb", "halton:q3", "fms:s2", "fms:n", "allreduce"
};
// "sfb", "halton", "halton:3", "fms", "fms:2", "fms:n" (a server per node), "allreduce" (and the
// labels "halton:q3", "fms:s2");
// InvalidArgument otherwise.
Scheme parse_scheme(const std::string& spec);

struct Target {
  int nodes = 4;  // workers (FMS adds its servers)
  Link link;      // the hosts' link
  // Ranks sharing one host's cores (the profile's cores and threads); 0: all of them, every rank on
  // the profiled host (the netns cluster).
  int ranks_per_host = 1;
  bool fitted = false;  // link is the profile's fit: at nodes = profile.workers use its all-reduce fit
};

struct Prediction {
  std::string scheme;  // Scheme::label()
  int nodes = 0;
  int q = 0, servers = 0;
  double compute_s = 0, comm_s = 0, update_s = 0;  // per clock; they add up to clock_s
  double clock_s = 0;
  double bytes_per_clock = 0;       // the whole job's network bytes per clock
  double link_bytes_per_clock = 0;  // the busiest host link, one direction
  double time_to_target_s = -1;     // clocks_to_target * clock_s (-1: no clocks given)
};

// The Halton peers per clock at N workers for q (0: ceil(log2 N), at most N - 1).
int halton_q(int nodes, int q);
// The dense all-reduce of `bytes` on `nodes` ranks over `link` (sfb's algorithm choice).
double allreduce_s(int64_t bytes, int nodes, const Link& link);
Prediction predict(const SchemeProfile& p, const Scheme& s, const Target& t, double clocks_to_target = -1);

// The fastest of `schemes` at each N in `nodes` (the crossover: where the winner changes).
struct Crossover {
  int nodes = 0;
  std::string from, to;  // the winner below and at `nodes`
};
std::vector<Crossover> crossovers(const SchemeProfile& p, const std::vector<Scheme>& schemes,
                                  const std::vector<int>& nodes, const Link& link, int ranks_per_host);

// comm.scheme = "auto": every candidate's prediction for `nodes` workers, `ranks_per_host` of them
// sharing a host's cores, on the profile's fitted link, fastest first.
std::vector<Prediction> rank_schemes(const SchemeProfile& p, const std::vector<Scheme>& candidates, int nodes,
                                     int ranks_per_host);
Json to_json(const Prediction& r);

}  // namespace sfb::predict
