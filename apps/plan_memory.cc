#include "plan_memory.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "sfb/core/config.h"
#include "sfb/core/error.h"
#include "sfb/runtime/job_rules.h"
#include "sfb/runtime/memory_estimate.h"

namespace sfb_tools {
namespace {

using sfb::predict::Scheme;
using sfb::predict::SchemeProfile;
using sfb::predict::Target;

// The job's settings as sfbd would run scheme `s` at the target: the profile's evaluation snapshot
// and reconciliation, BSP, the minibatch of the target's shape, the rest at their defaults.
sfb::Config scheme_config(const SchemeProfile& p, const Scheme& s, const Target& t, const sfb::predict::Shape& sh) {
  sfb::Config cfg;
  cfg.optimizer.minibatch = sh.K;
  cfg.eval.snapshot = p.eval_snapshot;
  cfg.sfb.staleness = 0;
  s.apply_to(cfg, t.nodes);
  // The profile's reconciliation is partial broadcast's: the other schemes have none.
  cfg.sfb.reconcile = sfb::runtime::partial_broadcast(cfg)
                          ? sfb::choice_named<sfb::Reconcile>(p.reconcile).value_or(sfb::Reconcile::kOff)
                          : sfb::Reconcile::kOff;
  return cfg;
}

}  // namespace

SchemeMemory scheme_memory(const SchemeProfile& p, const Scheme& s, const Target& t, double node_memory) {
  const sfb::predict::Shape sh = sfb::predict::target_shape(p, t);
  const sfb::Config cfg = scheme_config(p, s, t, sh);
  const double v = sh.sparse_v ? sh.v_width() : static_cast<double>(sh.D);
  SchemeMemory m;
  // Sharded, every rank holds its rows and evaluates: eval.train_sample's default rows (a profile
  // keeps no row counts; the test set is not counted).
  const auto rank_bytes = [&](int rank) {
    return sfb::runtime::training_memory(cfg, t.nodes, rank, sh.J, sh.D, v, p.has_prox, cfg.eval.train_sample, 0)
        .total();
  };
  m.rank0_bytes = rank_bytes(0);
  m.rank_bytes = rank_bytes(1);
  const bool fms = s.kind == sfb::Scheme::kFms;
  const int S = fms ? static_cast<int>(cfg.fms.servers) : 0;
  if (fms) m.server_bytes = sfb::runtime::server_memory(cfg, t.nodes, sh.J, sh.D, p.has_prox && S > 1, 0).total();
  const bool beside = fms && sfb::predict::fms_beside(t, S);
  m.ranks_per_node = sfb::predict::target_ranks_sharing(t);
  // The node of rank 0: its workers and, beside them, server 0.
  const auto node = [&](int ranks) {
    return m.rank0_bytes + (ranks - 1) * m.rank_bytes + (beside ? m.server_bytes : 0.0);
  };
  m.node_bytes = node(m.ranks_per_node);
  if (fms && !beside) m.node_bytes = std::max(m.node_bytes, m.server_bytes);
  if (node_memory > 0) {
    m.ranks_fit = 0;
    if (node(1) <= node_memory && (beside || m.server_bytes <= node_memory))
      m.ranks_fit = 1 + static_cast<int>(std::floor((node_memory - node(1)) / std::max(m.rank_bytes, 1.0)));
  }
  return m;
}

double parse_memory(const std::string& value, const std::string& option) {
  struct Unit {
    const char* suffix;
    double bytes;
  };
  static const Unit kUnits[] = {{"TiB", 1099511627776.0},
                                {"GiB", 1073741824.0},
                                {"MiB", 1048576.0},
                                {"KiB", 1024.0},
                                {"TB", 1e12},
                                {"GB", 1e9},
                                {"MB", 1e6},
                                {"B", 1.0}};
  std::string number = value;
  double unit = 1.0;
  for (const auto& u : kUnits) {
    const std::string suf = u.suffix;
    if (number.size() > suf.size() && number.compare(number.size() - suf.size(), suf.size(), suf) == 0) {
      number.resize(number.size() - suf.size());
      unit = u.bytes;
      break;
    }
  }
  char* end = nullptr;
  const double x = number.empty() ? NAN : std::strtod(number.c_str(), &end);
  SFB_CHECK(!number.empty() && end != nullptr && *end == '\0' && std::isfinite(x) && x > 0 && x * unit >= 1 &&
                x * unit <= 1e18,
            "{} must be a node's memory in bytes or with a unit (64GiB, 512MiB, 2TiB, 64GB), above 0, got \"{}\"",
            option, value);
  return x * unit;
}

}  // namespace sfb_tools
