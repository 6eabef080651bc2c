#include "sfb/runtime/job_rules.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sfb/core/error.h"
#include "sfb/core/halton.h"

namespace sfb::runtime {

int resolve_threads(const RuntimeConfig& cfg, int ranks_on_host) {
  if (cfg.threads > 0) return static_cast<int>(cfg.threads);
  const int node = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cpu_set_t mask;
  CPU_ZERO(&mask);
  const int mine = ::sched_getaffinity(0, sizeof(mask), &mask) == 0 ? CPU_COUNT(&mask) : node;
  // A launcher that bound this rank to CPUs of its own (srun --cpu-bind, mpirun --bind-to core)
  // gave it those; otherwise the ranks on this host share its cores.
  if (mine > 0 && mine < node) return mine;
  return std::max(1, node / std::max(1, ranks_on_host));
}

int worker_count(const Config& cfg, int ranks) {
  if (cfg.comm.scheme != sfb::Scheme::kFms) return ranks;
  SFB_CHECK(ranks > cfg.fms.servers,
            "comm.scheme = \"fms\" with fms.servers = {} needs more than {} ranks, got {}: "
            "run mpirun -np P+S",
            cfg.fms.servers, cfg.fms.servers, ranks);
  return ranks - static_cast<int>(cfg.fms.servers);
}

bool partial_broadcast(const Config& cfg) {
  return cfg.comm.scheme == sfb::Scheme::kSfb && cfg.sfb.broadcast != sfb::Broadcast::kFull;
}

Topology make_topology(const Config& cfg, int workers) {
  if (!partial_broadcast(cfg)) return Topology::full(workers);
  const int q = static_cast<int>(cfg.sfb.halton_q);
  if (cfg.sfb.broadcast == sfb::Broadcast::kHalton) return Topology::halton_rotating(workers, q);
  Topology t = Topology::halton(workers, q);
  const auto islands = t.islands();
  if (islands.size() > 1) {
    std::vector<std::string> parts;
    for (const auto& island : islands) parts.push_back(fmt::format("{{{}}}", fmt::join(island, ", ")));
    const auto offsets = Topology::halton_offsets(workers, q);
    throw InvalidArgument(fmt::format(
        "sfb.broadcast = \"halton-static\" with P = {} workers and Q = {} (offsets {}) splits the workers into {} "
        "islands that never exchange factors: {}; use sfb.broadcast = \"halton\" (rotating receivers), another "
        "sfb.halton_q, or another number of workers",
        workers, offsets.size(), fmt::join(offsets, ", "), islands.size(), fmt::join(parts, " ")));
  }
  return t;
}

std::optional<int64_t> halton_receivers(const Config& cfg, int workers) {
  if (!partial_broadcast(cfg) || workers < 2) return std::nullopt;
  return sfb::halton_receivers(workers, cfg.sfb.halton_q);
}

bool halton_is_full_broadcast(const Config& cfg, int workers) {
  const auto q = halton_receivers(cfg, workers);
  return q && *q >= workers - 1;
}

double drift_warn_for(const Config& cfg, int workers) {
  if (cfg.eval.drift_warn >= 0) return cfg.eval.drift_warn;
  const auto q = halton_receivers(cfg, workers);
  if (!q) return 0.5;
  const double p = (static_cast<double>(*q) + 1.0) / workers;
  return std::max(0.5, 1.5 * std::sqrt((1.0 - p) / p));
}

Config unwatched_run(Config cfg, int64_t start_clock, int64_t clocks) {
  cfg.stop = StopConfig{};
  cfg.stop.max_clocks = start_clock + clocks;
  cfg.stop.divergence_factor = 0;
  cfg.eval.every = cfg.stop.max_clocks + 1;
  cfg.checkpoint.every = 0;
  cfg.checkpoint.path.clear();
  cfg.output.metrics = cfg.output.model = cfg.output.summary = "";
  return cfg;
}

std::optional<Reconcile> reconcile_mode(const Config& cfg) {
  const Reconcile m = cfg.sfb.reconcile;
  const bool partial = partial_broadcast(cfg);
  const bool bsp = cfg.sfb.staleness == 0;
  if (m == Reconcile::kOff || (m == Reconcile::kAuto && (!partial || !bsp))) return std::nullopt;
  SFB_CHECK(partial, "sfb.reconcile = \"{}\" reconciles partial broadcast, but {}; use sfb.reconcile = \"auto\"", m,
            cfg.comm.scheme != sfb::Scheme::kSfb
                ? fmt::format("comm.scheme = \"{}\"", cfg.comm.scheme)
                : std::string("sfb.broadcast = \"full\" (the replicas are already one)"));
  SFB_CHECK(bsp,
            "sfb.reconcile = \"{}\" needs BSP (sfb.staleness = 0): under {} the workers are at different clocks; "
            "use sfb.reconcile = \"auto\" (off there) and watch replica_drift",
            m, cfg.sfb.consistency_name());
  return m == Reconcile::kAuto ? Reconcile::kMean : m;
}

std::optional<Reconcile> partial_broadcast_reconcile(const Config& cfg) {
  Config halton = cfg;
  halton.comm.scheme = Scheme::kSfb;
  halton.sfb.broadcast = Broadcast::kHalton;
  return reconcile_mode(halton);
}

}  // namespace sfb::runtime
