#include "sfb/predict/scheme_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sfb/core/collective_cost.h"
#include "sfb/core/error.h"
#include "sfb/core/files.h"

namespace sfb::predict {
namespace {

struct NamedLink {
  const char* name;
  double gbit;
  double a_us;
};
constexpr NamedLink kLinks[] = {{"1gbe", 1, 50}, {"10gbe", 10, 25}, {"25gbe", 25, 10}, {"100gbe", 100, 5}};

// The link's per-step cost as the all-reduce's algorithm choice sees it.
LinkCost link_cost(const Link& l) { return LinkCost{l.a_us, l.b_us_per_byte}; }

double get_number(const Json& j, const std::string& key, const std::string& source, double lo, double hi) {
  SFB_CHECK_DATA(j.contains(key) && j[key].is_number(), "{}: the profile has no number \"{}\"", source, key);
  const double v = j[key].get<double>();
  SFB_CHECK_DATA(std::isfinite(v) && v >= lo && v <= hi, "{}: \"{}\" = {} is outside [{}, {}]", source, key, v, lo, hi);
  return v;
}

// One worker's share of the cores when `ranks` ranks of `threads` threads run on `cores` cores.
double share(int ranks, int threads, int cores) {
  return std::max(1.0, static_cast<double>(ranks) * threads / std::max(1, cores));
}

}  // namespace

// Encoded bytes of one worker's batch of K pairs at the profile's shape (the profile's own when it
// has one): u K J floats, v K D floats dense or K + 1 row pointers and 8 bytes per nonzero.
double batch_bytes_of(const SchemeProfile& p) {
  if (p.batch_bytes > 0) return static_cast<double>(p.batch_bytes);
  const double K = static_cast<double>(p.K);
  return K * 4.0 * static_cast<double>(p.J) +
         (p.sparse_v ? 8.0 * (K + 1) + K * 8.0 * p.v_nonzeros : K * 4.0 * static_cast<double>(p.D));
}

LineFit fit_line(const std::vector<double>& x, const std::vector<double>& y) {
  SFB_CHECK(x.size() == y.size() && x.size() >= 2, "fit_line: {} x and {} y values (at least 2 each)", x.size(),
            y.size());
  const double n = static_cast<double>(x.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0, syy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sx += x[i];
    sy += y[i];
    sxx += x[i] * x[i];
    sxy += x[i] * y[i];
    syy += y[i] * y[i];
  }
  const double vx = sxx - sx * sx / n, vy = syy - sy * sy / n, cxy = sxy - sx * sy / n;
  LineFit f;
  f.b = vx > 0 ? cxy / vx : 0.0;
  f.a = (sy - f.b * sx) / n;
  f.r2 = vy > 0 && vx > 0 ? cxy * cxy / (vx * vy) : 1.0;
  return f;
}

Link named_link(const std::string& name) {
  for (const auto& l : kLinks)
    if (name == l.name) return Link{l.name, l.a_us, 8.0 / (l.gbit * 1e3)};
  throw InvalidArgument(fmt::format("unknown link \"{}\"; links are {} (or \"fitted\": the profile's)", name,
                                    fmt::join(named_links(), ", ")));
}

std::vector<std::string> named_links() {
  std::vector<std::string> out;
  for (const auto& l : kLinks) out.emplace_back(l.name);
  return out;
}

double SchemeProfile::contention() const { return share(ranks_on_host, threads, cores); }

SchemeProfile::Anchors SchemeProfile::anchors() const {
  Anchors a;
  if (!(engine_clock_s > 0) || workers < 2) return a;
  const double apply = std::max(0.0, apply_fixed_s + workers * apply_batch_s);
  if (sf_s > 0 && engine_sf_s > 0) a.compute = engine_sf_s / sf_s;
  if (apply > 0 && engine_apply_s > 0) a.apply = engine_apply_s / apply;
  // The network is not anchored: what the engine's clock leaves of compute and apply mixes the
  // broadcast with the ranks' stagger (measured 0.009 s against a 0.14 s round on the netns
  // cluster: peers' batches arrive while a slower rank still computes), so the fit stands alone.
  const double ar =
      std::max(0.0, allreduce_a_us + allreduce_b_us_per_byte * 4.0 * static_cast<double>(J) * static_cast<double>(D)) *
      1e-6;
  const double ar_engine = engine_allreduce_clock_s - (sf_s + form_dense_s) * a.compute - add_dense_s * a.apply;
  if (ar > 0 && engine_allreduce_clock_s > 0 && ar_engine > 0) a.allreduce = ar_engine / ar;
  return a;
}

Json to_json(const SchemeProfile& p) {
  return {{"format", "sfb-scheme-profile/1"},
          {"config", p.config},
          {"model", p.model},
          {"workers", p.workers},
          {"ranks_on_host", p.ranks_on_host},
          {"cores", p.cores},
          {"threads", p.threads},
          {"J", p.J},
          {"D", p.D},
          {"K", p.K},
          {"sparse_v", p.sparse_v},
          {"v_nonzeros", sig(p.v_nonzeros, 6)},
          {"batch_bytes", p.batch_bytes},
          {"sf_s", sig(p.sf_s, 6)},
          {"apply_fixed_s", sig(p.apply_fixed_s, 6)},
          {"apply_batch_s", sig(p.apply_batch_s, 6)},
          {"form_dense_s", sig(p.form_dense_s, 6)},
          {"add_dense_s", sig(p.add_dense_s, 6)},
          {"engine_clock_s", sig(p.engine_clock_s, 6)},
          {"engine_sf_s", sig(p.engine_sf_s, 6)},
          {"engine_comm_s", sig(p.engine_comm_s, 6)},
          {"engine_apply_s", sig(p.engine_apply_s, 6)},
          {"engine_allreduce_clock_s", sig(p.engine_allreduce_clock_s, 6)},
          {"link_a_us", sig(p.link.a_us, 6)},
          {"link_b_us_per_byte", sig(p.link.b_us_per_byte, 6)},
          {"link_gbit_s", sig(p.link.b_us_per_byte > 0 ? 8e-3 / p.link.b_us_per_byte : 0.0, 4)},
          {"bcast_r2", sig(p.bcast_r2, 4)},
          {"allreduce_a_us", sig(p.allreduce_a_us, 6)},
          {"allreduce_b_us_per_byte", sig(p.allreduce_b_us_per_byte, 6)},
          {"allreduce_r2", sig(p.allreduce_r2, 4)},
          {"reconcile", p.reconcile},
          {"reconcile_every", p.reconcile_every}};
}

SchemeProfile profile_from_json(const Json& j, const std::string& source) {
  SFB_CHECK_DATA(j.is_object() && json_string(j, "format", source) == "sfb-scheme-profile/1",
                 "{}: not an sfb scheme profile (\"format\" must be \"sfb-scheme-profile/1\"; sfbd --profile writes "
                 "one)",
                 source);
  SchemeProfile p;
  const auto num = [&](const char* k, double lo, double hi) { return get_number(j, k, source, lo, hi); };
  const auto big = 1e15;
  p.config = json_string(j, "config", source);
  p.model = json_string(j, "model", source);
  p.workers = static_cast<int>(num("workers", 1, 1 << 20));
  p.ranks_on_host = static_cast<int>(num("ranks_on_host", 1, 1 << 20));
  p.cores = static_cast<int>(num("cores", 1, 1 << 20));
  p.threads = static_cast<int>(num("threads", 1, 4096));
  p.J = static_cast<int64_t>(num("J", 1, big));
  p.D = static_cast<int64_t>(num("D", 1, big));
  p.K = static_cast<int64_t>(num("K", 1, big));
  SFB_CHECK_DATA(j.contains("sparse_v") && j["sparse_v"].is_boolean(), "{}: the profile has no boolean \"sparse_v\"",
                 source);
  p.sparse_v = j["sparse_v"].get<bool>();
  p.v_nonzeros = num("v_nonzeros", 0, big);
  p.batch_bytes = static_cast<int64_t>(num("batch_bytes", 0, big));
  p.sf_s = num("sf_s", 0, 1e6);
  p.apply_fixed_s = num("apply_fixed_s", -1e6, 1e6);
  p.apply_batch_s = num("apply_batch_s", 0, 1e6);
  p.form_dense_s = num("form_dense_s", 0, 1e6);
  p.add_dense_s = num("add_dense_s", 0, 1e6);
  p.engine_clock_s = num("engine_clock_s", 0, 1e6);
  p.engine_sf_s = num("engine_sf_s", 0, 1e6);
  p.engine_comm_s = num("engine_comm_s", 0, 1e6);
  p.engine_apply_s = num("engine_apply_s", 0, 1e6);
  p.engine_allreduce_clock_s = num("engine_allreduce_clock_s", 0, 1e6);
  p.link = {"fitted", num("link_a_us", 0, 1e9), num("link_b_us_per_byte", 1e-12, 1e6)};
  p.bcast_r2 = num("bcast_r2", -1e9, 1);
  p.allreduce_a_us = num("allreduce_a_us", -1e9, 1e9);
  p.allreduce_b_us_per_byte = num("allreduce_b_us_per_byte", 0, 1e6);
  p.allreduce_r2 = num("allreduce_r2", -1e9, 1);
  p.reconcile = json_string(j, "reconcile", source);
  p.reconcile_every = static_cast<int64_t>(num("reconcile_every", 0, big));
  return p;
}

SchemeProfile read_profile(const std::string& path) {
  const Bytes bytes = read_file(path, "scheme profile");
  return profile_from_json(
      parse_json(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path), path);
}

std::string Scheme::label() const {
  if (name == "halton") return q > 0 ? fmt::format("halton:q{}", q) : "halton";
  if (name == "fms") return servers > 0 ? fmt::format("fms:s{}", servers) : "fms:n";
  return name;
}

Scheme parse_scheme(const std::string& spec) {
  const auto colon = spec.find(':');
  Scheme s{spec.substr(0, colon)};
  int arg = -1;
  if (colon != std::string::npos) {
    std::string a = spec.substr(colon + 1);
    if (s.name == "fms" && a == "n") return Scheme{"fms", 0, 0};  // a server per node
    // The label form too: "halton:q3", "fms:s2" (Scheme::label, sfb-plan's CSV).
    if (!a.empty() && ((s.name == "halton" && a[0] == 'q') || (s.name == "fms" && a[0] == 's'))) a.erase(0, 1);
    char* end = nullptr;
    const long v = std::strtol(a.c_str(), &end, 10);
    SFB_CHECK(!a.empty() && *end == '\0' && v >= 1 && v <= (1 << 20), "scheme \"{}\": {} must be a count >= 1", spec,
              a);
    arg = static_cast<int>(v);
  }
  if (s.name == "halton")
    s.q = arg > 0 ? arg : 0;
  else if (s.name == "fms")
    s.servers = arg > 0 ? arg : 1;
  else
    SFB_CHECK((s.name == "sfb" || s.name == "allreduce") && arg < 0,
              "unknown scheme \"{}\"; schemes are sfb, halton[:Q], fms[:S|n], allreduce", spec);
  return s;
}

int halton_q(int nodes, int q) {
  if (nodes <= 1) return 0;
  const int dflt = static_cast<int>(std::ceil(std::log2(static_cast<double>(nodes))));
  return std::clamp(q > 0 ? q : dflt, 1, nodes - 1);
}

double allreduce_s(int64_t bytes, int nodes, const Link& link) {
  if (nodes <= 1 || bytes <= 0) return 0.0;
  const LinkCost c = link_cost(link);
  const bool direct = allreduce_direct(bytes, nodes, c);
  const double M = static_cast<double>(bytes), n = nodes;
  const double us =
      direct ? c.a_us + (n - 1) * M * c.b_us_per_byte : 2 * c.a_us + 2 * (n - 1) / n * M * c.b_us_per_byte;
  return us * 1e-6;
}

namespace {

// The dense all-reduce at the target. On the fitted link: the profile's own fit at the N it was
// measured on, and elsewhere the per-step cost that fit implies (core/collective_cost.h).
double target_allreduce_s(const SchemeProfile& p, int64_t bytes, const Target& t) {
  if (!t.fitted || !(p.allreduce_b_us_per_byte > 0) || p.workers < 2) return allreduce_s(bytes, t.nodes, t.link);
  if (t.nodes == p.workers)
    return std::max(0.0, p.allreduce_a_us + p.allreduce_b_us_per_byte * static_cast<double>(bytes)) * 1e-6;
  const LinkCost c = link_cost_from_fit(p.allreduce_a_us, p.allreduce_b_us_per_byte, p.workers);
  return allreduce_s(bytes, t.nodes, Link{"fitted", c.a_us, c.b_us_per_byte});
}

}  // namespace

Prediction predict(const SchemeProfile& p, const Scheme& s, const Target& t, double clocks_to_target) {
  SFB_CHECK(t.nodes >= 1, "nodes must be >= 1, got {}", t.nodes);
  Prediction r;
  r.scheme = s.label();
  r.nodes = t.nodes;
  const double N = t.nodes;
  // Compute and update seconds scale with the share of the cores a rank gets.
  const int per_host = t.ranks_per_host > 0 ? t.ranks_per_host : t.nodes;
  const double scale = share(per_host, p.threads, p.cores) / p.contention();
  const double sec = 1e-6, B = batch_bytes_of(p), W = 4.0 * static_cast<double>(p.J) * static_cast<double>(p.D);
  const SchemeProfile::Anchors an = p.anchors();
  r.compute_s = p.sf_s * an.compute * scale;
  const auto apply = [&](double batches) {
    return std::max(0.0, p.apply_fixed_s + batches * p.apply_batch_s) * an.apply * scale;
  };
  const double form_s = p.form_dense_s * an.compute * scale, add_s = p.add_dense_s * an.apply * scale;
  if (s.name == "sfb" || s.name == "halton") {
    const int n = s.name == "sfb" ? t.nodes - 1 : halton_q(t.nodes, s.q);
    r.q = s.name == "halton" ? n : 0;
    r.comm_s = n > 0 ? (t.link.a_us + n * B * t.link.b_us_per_byte) * sec : 0.0;
    r.update_s = apply(n + 1);
    r.link_bytes_per_clock = n * B;
    r.bytes_per_clock = N * n * B;
    if (s.name == "halton" && !p.reconcile.empty() && n < t.nodes - 1) {
      const int64_t every =
          p.reconcile_every > 0 && t.nodes == p.workers
              ? p.reconcile_every
              : auto_reconcile_every(t.nodes, n, p.K, p.J, p.D, p.sparse_v ? p.v_nonzeros : static_cast<double>(p.D));
      const auto wb = static_cast<int64_t>(W);
      const bool direct = allreduce_direct(wb, t.nodes, link_cost(t.link));
      // W's all-reduce and the drift's one float (runtime/reconciler.h).
      const double sent =
          static_cast<double>(allreduce_bytes_sent(wb, t.nodes, direct) + allreduce_bytes_sent(4, t.nodes, true));
      r.comm_s += target_allreduce_s(p, wb, t) / static_cast<double>(every);
      r.update_s += add_s / static_cast<double>(every);
      r.link_bytes_per_clock += sent / static_cast<double>(every);
      r.bytes_per_clock += N * sent / static_cast<double>(every);
    }
  } else if (s.name == "allreduce") {
    const auto wb = static_cast<int64_t>(W);
    r.compute_s += form_s;
    r.comm_s = target_allreduce_s(p, wb, t) * an.allreduce;
    r.update_s = add_s;
    const double sent =
        static_cast<double>(allreduce_bytes_sent(wb, t.nodes, allreduce_direct(wb, t.nodes, link_cost(t.link))));
    r.link_bytes_per_clock = sent;
    r.bytes_per_clock = N * sent;
  } else if (s.name == "fms") {
    const int S = s.servers > 0 ? s.servers : t.nodes;  // 0: a server per node
    r.servers = S;
    r.compute_s += form_s;
    const double busiest = W * std::max(1.0, N / S);  // a server's link (or a worker's, S >= N)
    // Pushes and pulls overlap (the servers return each block once every worker's push of it is
    // in: fms_exchange.h), so the busiest link's one direction, plus the pipeline's fill (a
    // window of 4 blocks of at most 1 MiB per server) and the servers' adds of N shards of W / S.
    const double fill = 4.0 * std::min(W / S / 8.0, 1024.0 * 1024.0);
    r.comm_s = (t.link.a_us + (busiest + fill) * t.link.b_us_per_byte) * sec + N / S * add_s;
    r.update_s = add_s;  // the worker's copy of W in
    r.link_bytes_per_clock = busiest;
    r.bytes_per_clock = 2 * N * W;
  } else {
    throw InvalidArgument(fmt::format("unknown scheme \"{}\"", s.name));
  }
  r.clock_s = r.compute_s + r.comm_s + r.update_s;
  if (clocks_to_target > 0) r.time_to_target_s = clocks_to_target * r.clock_s;
  return r;
}

std::vector<Crossover> crossovers(const SchemeProfile& p, const std::vector<Scheme>& schemes,
                                  const std::vector<int>& nodes, const Link& link, int ranks_per_host) {
  std::vector<Crossover> out;
  std::string prev;
  for (int n : nodes) {
    std::string best;
    double best_s = std::numeric_limits<double>::infinity();
    for (const auto& s : schemes) {
      const Prediction r = predict(p, s, Target{n, link, ranks_per_host, link.name == "fitted"});
      if (r.clock_s < best_s) {
        best_s = r.clock_s;
        best = r.scheme;
      }
    }
    if (!prev.empty() && best != prev) out.push_back({n, prev, best});
    prev = best;
  }
  return out;
}

std::vector<Prediction> rank_schemes(const SchemeProfile& p, const std::vector<Scheme>& candidates, int nodes,
                                     int ranks_per_host) {
  std::vector<Prediction> out;
  for (const auto& s : candidates) out.push_back(predict(p, s, Target{nodes, p.link, ranks_per_host, true}));
  std::stable_sort(out.begin(), out.end(),
                   [](const Prediction& a, const Prediction& b) { return a.clock_s < b.clock_s; });
  return out;
}

Json to_json(const Prediction& r) {
  Json j = {{"scheme", r.scheme},
            {"nodes", r.nodes},
            {"clock_s", sig(r.clock_s, 5)},
            {"compute_s", sig(r.compute_s, 5)},
            {"comm_s", sig(r.comm_s, 5)},
            {"update_s", sig(r.update_s, 5)},
            {"bytes_per_clock", sig(r.bytes_per_clock, 6)},
            {"link_bytes_per_clock", sig(r.link_bytes_per_clock, 6)}};
  if (r.q > 0) j["q"] = r.q;
  if (r.servers > 0) j["servers"] = r.servers;
  if (r.time_to_target_s >= 0) j["time_to_target_s"] = sig(r.time_to_target_s, 5);
  return j;
}

}  // namespace sfb::predict
