#pragma once
// The rules that resolve a job's config for its rank count: how many ranks train, who sends to
// whom, partial broadcast's receivers, the drift warning, the reconciliation, the threads, and the
// config of a run nothing watches. One definition each; sfbd, the worker and its threads, the
// memory estimate, the byte count and the profiler ask these instead of re-deriving them.
#include <cstdint>
#include <optional>

#include "sfb/core/config.h"
#include "sfb/runtime/topology.h"

namespace sfb::runtime {

// Ranks that train: all of them, except fms.servers parameter-server ranks under comm.scheme = "fms".
int worker_count(const Config& cfg, int ranks);

// Who sends factors to whom among `workers` workers (sfb.broadcast, sfb.halton_q). Throws
// InvalidArgument naming P, Q, the offsets and the islands when the graph is not connected (the
// static Halton variant for some P and Q): such a job would train disconnected models.
Topology make_topology(const Config& cfg, int workers);

// True under partial broadcast: comm.scheme = "sfb" with sfb.broadcast "halton" or "halton-static".
bool partial_broadcast(const Config& cfg);

// Partial broadcast's receivers per batch among `workers`: min(P - 1, sfb.halton_q, or its default
// ceil(log2 P)); nullopt under full broadcast or another scheme.
std::optional<int64_t> halton_receivers(const Config& cfg, int workers);

// True when sfb.broadcast's Halton receivers are every other worker (Q >= P - 1: the default Q =
// ceil(log2 P) at P <= 3): partial broadcast there is full broadcast plus a reconciliation that
// costs bytes and fixes nothing, so sfbd trains with sfb.broadcast = "full" and says so.
bool halton_is_full_broadcast(const Config& cfg, int workers);

// eval.drift_warn = "auto" resolved for `workers`: 0.5 for full broadcast; for partial broadcast,
// where a replica receives the share p = (Q + 1) / P of the updates and sits about sqrt((1 - p) / p)
// from the replicas' mean when the updates it misses are uncorrelated, 1.5 times that. A number
// given in the config is kept.
double drift_warn_for(const Config& cfg, int workers);

// `cfg` for a run that nothing watches and that writes nothing (the profiler's engine runs, the
// learning-rate search): `clocks` clocks from `start_clock`, no stop rule but that limit (no
// divergence stop), no evaluation before the worker's final one (so no drift sketches), no
// checkpoint, metrics, model or summary.
Config unwatched_run(Config cfg, int64_t start_clock, int64_t clocks);

// The reconciliation partial broadcast gets (sfb.reconcile, runtime/reconciler.h): kSum or kMean,
// or nullopt (off: full broadcast, SSP/ASP, a baseline, or sfb.reconcile = "off"). The one rule:
// the worker, the memory estimate, the byte count, sfbd and the profiler ask it.
std::optional<Reconcile> reconcile_mode(const Config& cfg);
// The reconciliation the same job would get under partial broadcast (sfb.broadcast = "halton"):
// what the profiler records for the predictor's Halton scheme.
std::optional<Reconcile> partial_broadcast_reconcile(const Config& cfg);

// Effective OpenMP threads for one rank: runtime.threads, or the CPUs the launcher bound it to, or
// this host's cores / ranks_on_host (at least 1). Per host: sfbd makes the ranks agree on the least.
int resolve_threads(const RuntimeConfig& cfg, int ranks_on_host);

}  // namespace sfb::runtime
