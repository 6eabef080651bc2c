#include "sfb/predict/profile.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "sfb/core/collective_cost.h"
#include "sfb/core/error.h"
#include "sfb/core/files.h"
#include "sfb/core/links.h"
#include "sfb/core/row_blocks.h"

namespace sfb::predict {
namespace {

double get_number(const Json& j, const std::string& key, const std::string& source, double lo, double hi) {
  SFB_CHECK_DATA(j.contains(key) && j[key].is_number(), "{}: the profile has no number \"{}\"", source, key);
  const double v = j[key].get<double>();
  SFB_CHECK_DATA(std::isfinite(v) && v >= lo && v <= hi, "{}: \"{}\" = {} is outside [{}, {}]", source, key, v, lo, hi);
  return v;
}

// A piece measured at the profile and scaled by its work `ratio` and the cores (`core`, a time
// multiplier), no faster than its memory traffic at the target (`bytes` at `bw` bytes/s) once that
// traffic outgrows the profile's own (`bytes0`: what the measurement already includes).
struct Roofline {
  double core = 1, bw = 0;
  double operator()(double t0, double ratio, double bytes0, double bytes) const {
    const double t = t0 * ratio * core;
    if (!(bw > 0) || bytes <= bytes0) return t;
    return std::max(t, bytes / bw);
  }
};

// The broadcast's CPU a byte (bcast_cpu_ns_per_byte) at a rank's cores, seconds: over them where
// the rank has less than one (its threads share them); 0 from a core on, though a rank of exactly
// one still runs its 3-4 threads on it: measured only below a core, it is not carried where the
// threads may have cores of their own.
double bcast_cpu_s_per_byte(const SchemeProfile& p, double rank_cores) {
  return rank_cores < 1.0 ? p.bcast_cpu_ns_per_byte * 1e-9 / std::max(rank_cores, 1e-9) : 0.0;
}

}  // namespace

Link named_link(const std::string& name) {
  const NamedLink& l = find_link(name);
  return Link{l.name, l.a_us, l.b_us_per_byte};
}

double Shape::v_width() const {
  return sparse_v ? std::min(v_nonzeros, static_cast<double>(D)) : static_cast<double>(D);
}

Shape SchemeProfile::shape() const { return Shape{J, D, K, sparse_v, sparse_v ? v_nonzeros : static_cast<double>(D)}; }

Shape SchemeProfile::job_shape() const {
  Shape s = shape();
  if (job_K > 0) s.K = job_K;
  return s;
}

Link SchemeProfile::incast() const {
  return incast_b_us_per_byte > 0 ? Link{"fitted incast", incast_a_us, incast_b_us_per_byte} : link;
}

double SchemeProfile::allreduce_s(int64_t bytes, int64_t calls, int nodes) const {
  if (nodes <= 1 || bytes <= 0 || !(allreduce_b_us_per_byte > 0) || workers < 2) return 0.0;
  const double n = nodes, P = workers;
  if (allreduce_block_bytes <= 0) {  // an earlier build's fit: whole-W calls
    if (nodes == workers)
      return std::max(0.0, allreduce_a_us + allreduce_b_us_per_byte * static_cast<double>(bytes)) * 1e-6;
    return allreduce_us(bytes, nodes, link_cost_from_fit(allreduce_a_us, allreduce_b_us_per_byte, workers)) * 1e-6;
  }
  const double c = static_cast<double>(std::max<int64_t>(1, calls));
  const auto each = static_cast<int64_t>(static_cast<double>(bytes) / c);
  // The engines pick the algorithm by their default cost (comm::make_rank_order_allreduce), as the
  // profiler's fit ran it.
  const auto sent = [each](int ranks) {
    const double r = ranks;
    return allreduce_direct(each, ranks, LinkCost{}) ? r - 1 : 2 * (r - 1) / r;
  };
  const double a = std::max(0.0, allreduce_a_us) * (n - 1) / (P - 1);
  const double b = allreduce_b_us_per_byte * sent(nodes) / sent(workers);
  return (c * a + b * static_cast<double>(bytes)) * 1e-6;
}

double SchemeProfile::rank_cores() const {
  return std::min(static_cast<double>(threads), cores / std::max(1, ranks_on_host));
}

DenseAnchor dense_anchor(double engine_s, double pieces_s) {
  DenseAnchor a;
  if (!(engine_s > 0) || !(pieces_s > 0)) return a;
  if (engine_s >= pieces_s)
    a.s = engine_s - pieces_s;
  else
    a.ratio = engine_s / pieces_s;
  return a;
}

SchemeProfile::Anchors SchemeProfile::anchors() const {
  Anchors a;
  if (workers < 2) return a;
  // The engines' runs without the monitor: no evaluation is in their clocks (the all-reduce's may
  // be its run with them: below).
  // The SFB engine's pieces at n ranks computing with pieces x: SF computation, the fitted
  // broadcast to n - 1 peers, the apply of n batches.
  const auto sfb_pieces = [this](int n, const Pieces& x) {
    const double apply = std::max(0.0, x.apply_fixed_s + n * x.apply_batch_s);
    const double bcast =
        std::max(0.0, link.a_us + (n - 1) * static_cast<double>(batch_bytes) * link.b_us_per_byte) * 1e-6;
    return x.sf_s + bcast + apply;
  };
  Pieces measured;
  measured.sf_s = sf_s;
  measured.apply_fixed_s = apply_fixed_s;
  measured.apply_batch_s = apply_batch_s;
  const double excess = engine_clock_s - sfb_pieces(workers, measured);
  if (engine_clock_s > 0) a.sfb_s = std::max(0.0, excess);
  if (engine_clock_s > 0 && engine_pair_clock_s > 0 && workers > 2) {
    // The pair ran on ranks 0 and 1 while the others waited idle: its pieces are the measured ones
    // at the cores the idle ranks left them where ranks share a host (docs/compare.md, "Anchors").
    const int pair_sharing = std::min(2, std::max(1, ranks_on_host));
    const double pair_cores = std::min(static_cast<double>(threads), cores / pair_sharing);
    const double pair_excess = engine_pair_clock_s - sfb_pieces(2, pieces_at(*this, shape(), pair_cores, pair_sharing));
    a.sfb_per_peer_s = std::max(0.0, (excess - pair_excess) / (workers - 2));
  }
  const double ev = evals_per_clock_s();
  // An engine's clock with evaluations less its clock without, over their pieces (1 unmeasured).
  const auto per_piece = [ev](double with_s, double without_s) {
    return without_s > 0 && with_s > 0 && ev > 0 ? std::max(0.0, with_s - without_s) / ev : 1.0;
  };
  a.eval = per_piece(engine_eval_clock_s, engine_clock_s);
  a.eval_fms = per_piece(engine_fms_eval_clock_s, engine_fms_clock_s);
  // The all-reduce's evaluations run beside its wait on the network: they lengthen its clock by
  // at most their own seconds and never shorten it. Its clock is the lower of its two runs and the
  // evaluations cost it what the run with them measured more, at most their pieces (Anchors::dense).
  const double dense_clock_s = engine_allreduce_clock_s > 0 && engine_allreduce_eval_clock_s > 0 && ev > 0
                                   ? std::min(engine_allreduce_clock_s, engine_allreduce_eval_clock_s)
                                   : engine_allreduce_clock_s;
  a.eval_allreduce = std::min(1.0, per_piece(engine_allreduce_eval_clock_s, engine_allreduce_clock_s));
  // The floor at the profiled N, the broadcast's CPU at the profile's own cores.
  const double cpu_per_byte = bcast_cpu_s_per_byte(*this, rank_cores());
  const double floor_s = sf_s + std::max(0.0, apply_fixed_s + workers * apply_batch_s) +
                         2.0 * (workers - 1) * static_cast<double>(batch_bytes) * cpu_per_byte;
  if (engine_clock_s > 0 && cpu_per_byte > 0) a.cpu_floor = std::max(1.0, floor_s / engine_clock_s);
  const auto wb = static_cast<int64_t>(4.0 * static_cast<double>(J) * static_cast<double>(D));
  const double ar = allreduce_s(wb, dense_allreduce_calls(stored_rows(shape()), stored_cols(shape())), workers);
  a.dense = dense_anchor(dense_clock_s, sf_s + form_dense_s + ar + std::max(0.0, add_dense_s));
  return a;
}

double batch_payload_bytes(const Shape& s) {
  const double K = static_cast<double>(s.K);
  return K * 4.0 * static_cast<double>(s.J) +
         (s.sparse_v ? 8.0 * (K + 1) + K * 8.0 * s.v_width() : K * 4.0 * static_cast<double>(s.D));
}

Pieces pieces_at(const SchemeProfile& p, const Shape& s, double rank_cores, int ranks_sharing) {
  const Shape o = p.shape();
  const auto dbl = [](int64_t v) { return static_cast<double>(v); };
  const double JD0 = dbl(o.J) * dbl(o.D), JD = dbl(s.J) * dbl(s.D);
  const double rW = JD / JD0, rF = dbl(s.K) * dbl(s.J) * s.v_width() / (dbl(o.K) * dbl(o.J) * o.v_width());
  // W's rows a batch touches, in bytes of floats: every row for dense v, K w of them for sparse.
  const double touched0 = 4 * dbl(o.J) * std::min(dbl(o.D), dbl(o.K) * o.v_width());
  const double touched = 4 * dbl(s.J) * std::min(dbl(s.D), dbl(s.K) * s.v_width());
  const double e0 = p.rank_cores(), e = std::max(rank_cores, 1e-9);
  Roofline roof{e0 / e};
  if (p.mem_bytes_per_s > 0) {
    const double machine = p.machine_cores > 0 ? p.machine_cores : p.cores;
    roof.bw = p.mem_bytes_per_s / e0 * std::min(e, machine / std::max(1, ranks_sharing));
  }
  Pieces out;
  // (Sparse v has none: a hand-written one is ignored.)
  const double sf_fixed = p.sparse_v ? 0.0 : std::clamp(p.sf_fixed_s, 0.0, p.sf_s);
  const double sf_ratio = sf_fixed > 0 && p.sf_s > 0 ? (sf_fixed * rW + (p.sf_s - sf_fixed) * rF) / p.sf_s : rF;
  out.sf_s = roof(p.sf_s, sf_ratio, touched0, touched);
  // Dense v: an apply is one GEMM over W whatever the batches (its pass over W is the fixed part);
  // sparse v: each batch reads and writes the rows it touches.
  out.apply_batch_s = roof(p.apply_batch_s, rF, p.sparse_v ? 2 * touched0 : 0, p.sparse_v ? 2 * touched : 0);
  out.apply_fixed_s = roof(p.apply_fixed_s, rW, p.sparse_v ? 0 : 8 * JD0, p.sparse_v ? 0 : 8 * JD);
  const double a0 = std::max(0.0, p.add_dense_s), b0 = std::max(0.0, p.apply_batch_s);
  const double form_ratio = a0 + b0 > 0 ? (a0 * rW + b0 * rF) / (a0 + b0) : rW;
  out.form_dense_s = roof(p.form_dense_s, form_ratio, 8 * JD0, 8 * JD);
  out.add_dense_s = roof(p.add_dense_s, rW, 12 * JD0, 12 * JD);
  const double rE = dbl(s.J) * s.v_width() / (dbl(o.J) * o.v_width());
  out.eval_s = roof(p.eval_s, rE, 4 * JD0, 4 * JD);
  out.eval_copy_s = roof(p.eval_copy_s, rW, 8 * JD0, 8 * JD);
  out.eval_sketch_s = roof(p.eval_sketch_s, rW, 4 * JD0, 4 * JD);
  const double header = p.batch_bytes > 0 ? std::max(0.0, dbl(p.batch_bytes) - batch_payload_bytes(o)) : 0.0;
  out.batch_bytes = batch_payload_bytes(s) + header;
  out.bcast_cpu_s_per_byte = bcast_cpu_s_per_byte(p, e);
  return out;
}

double SchemeProfile::evals_per_clock_s() const {
  Pieces measured;
  measured.eval_s = eval_s;
  measured.eval_copy_s = eval_copy_s;
  measured.eval_sketch_s = eval_sketch_s;
  return measured_evals_per_clock_s(*this, measured, shape());
}

double measured_evals_per_clock_s(const SchemeProfile& p, const Pieces& x, const Shape& s) {
  if (p.eval_every <= 0) return 0.0;
  EvalConfig e;
  e.snapshot = p.eval_snapshot;
  const bool copies = e.copies(4.0 * static_cast<double>(s.J) * static_cast<double>(s.D));
  return (x.eval_s + (copies ? x.eval_copy_s : 0.0) + x.eval_sketch_s) / static_cast<double>(p.eval_every);
}

namespace {

// The profile's keys in file order, by part: the job and its host, the pieces measured alone, the
// engines' runs, the links and the collectives' fits, the evaluations.
Json job_keys(const SchemeProfile& p) {
  return {{"format", "sfb-scheme-profile/1"},
          {"config", p.config},
          {"model", p.model},
          {"workers", p.workers},
          {"ranks_on_host", p.ranks_on_host},
          {"cores", sig(p.cores, 4)},
          {"machine_cores", sig(p.machine_cores, 4)},
          {"threads", p.threads},
          {"J", p.J},
          {"D", p.D},
          {"K", p.K},
          {"job_K", p.job_K},
          {"sparse_v", p.sparse_v},
          {"layout", std::string(layout_name(p.layout))},
          {"has_prox", p.has_prox},
          {"v_nonzeros", sig(p.v_nonzeros, 6)},
          {"batch_bytes", p.batch_bytes}};
}

Json piece_keys(const SchemeProfile& p) {
  return {{"sf_s", sig(p.sf_s, 6)},
          {"sf_fixed_s", sig(p.sf_fixed_s, 6)},
          {"apply_fixed_s", sig(p.apply_fixed_s, 6)},
          {"apply_batch_s", sig(p.apply_batch_s, 6)},
          {"form_dense_s", sig(p.form_dense_s, 6)},
          {"add_dense_s", sig(p.add_dense_s, 6)},
          {"mem_bytes_per_s", sig(p.mem_bytes_per_s, 4)}};
}

Json engine_keys(const SchemeProfile& p) {
  return {{"engine_clock_s", sig(p.engine_clock_s, 6)},
          {"engine_sf_s", sig(p.engine_sf_s, 6)},
          {"engine_comm_s", sig(p.engine_comm_s, 6)},
          {"engine_apply_s", sig(p.engine_apply_s, 6)},
          {"engine_eval_clock_s", sig(p.engine_eval_clock_s, 6)},
          {"engine_pair_clock_s", sig(p.engine_pair_clock_s, 6)},
          {"engine_allreduce_clock_s", sig(p.engine_allreduce_clock_s, 6)},
          {"engine_fms_clock_s", sig(p.engine_fms_clock_s, 6)},
          {"engine_fms_servers", p.engine_fms_servers},
          {"engine_fms_servers_beside", p.engine_fms_servers_beside},
          {"engine_allreduce_eval_clock_s", sig(p.engine_allreduce_eval_clock_s, 6)},
          {"engine_fms_eval_clock_s", sig(p.engine_fms_eval_clock_s, 6)},
          {"engine_clock_se_s", sig(p.engine_clock_se_s, 4)},
          {"engine_eval_clock_se_s", sig(p.engine_eval_clock_se_s, 4)},
          {"engine_allreduce_clock_se_s", sig(p.engine_allreduce_clock_se_s, 4)},
          {"engine_allreduce_eval_clock_se_s", sig(p.engine_allreduce_eval_clock_se_s, 4)},
          {"engine_fms_clock_se_s", sig(p.engine_fms_clock_se_s, 4)},
          {"engine_fms_eval_clock_se_s", sig(p.engine_fms_eval_clock_se_s, 4)}};
}

Json link_keys(const SchemeProfile& p) {
  return {{"link_a_us", sig(p.link.a_us, 6)},
          {"link_b_us_per_byte", sig(p.link.b_us_per_byte, 6)},
          {"link_gbit_s", sig(p.link.b_us_per_byte > 0 ? 8e-3 / p.link.b_us_per_byte : 0.0, 4)},
          {"bcast_r2", sig(p.bcast_r2, 4)},
          {"bcast_cpu_ns_per_byte", sig(p.bcast_cpu_ns_per_byte, 4)},
          {"incast_a_us", sig(p.incast_a_us, 6)},
          {"incast_b_us_per_byte", sig(p.incast_b_us_per_byte, 6)},
          {"allreduce_a_us", sig(p.allreduce_a_us, 6)},
          {"allreduce_b_us_per_byte", sig(p.allreduce_b_us_per_byte, 6)},
          {"allreduce_r2", sig(p.allreduce_r2, 4)},
          {"allreduce_block_bytes", p.allreduce_block_bytes},
          {"reconcile", p.reconcile},
          {"reconcile_every", p.reconcile_every},
          {"profile_s", sig(p.profile_s, 4)},
          {"skipped", p.skipped},
          {"cpu_stolen_share", p.cpu_stolen_share >= 0 ? Json(sig(p.cpu_stolen_share, 4)) : Json(nullptr)}};
}

Json eval_keys(const SchemeProfile& p) {
  return {{"eval_every", p.eval_every},           {"eval_s", sig(p.eval_s, 6)},
          {"eval_copy_s", sig(p.eval_copy_s, 6)}, {"eval_sketch_s", sig(p.eval_sketch_s, 6)},
          {"eval_snapshot", p.eval_snapshot},     {"eval_rows_per_clock", sig(p.eval_rows_per_clock, 6)}};
}

}  // namespace

Json to_json(const SchemeProfile& p) {
  Json j = job_keys(p);
  for (const Json& part : {piece_keys(p), engine_keys(p), link_keys(p), eval_keys(p)}) j.update(part);
  return j;
}

namespace {

// The profile's "layout"; profiles of earlier builds did not record it: row-major.
Layout stored_layout(const Json& j, const std::string& source) {
  if (!j.contains("layout")) return Layout::kRowMajor;
  const std::string l = json_string(j, "layout", source);
  SFB_CHECK_DATA(l == layout_name(Layout::kRowMajor) || l == layout_name(Layout::kFeatureMajor),
                 "{}: \"layout\" = \"{}\" is not one of row-major, feature-major", source, l);
  return l == layout_name(Layout::kRowMajor) ? Layout::kRowMajor : Layout::kFeatureMajor;
}

// A profile's numbers by key, each within its range (else an error naming the file and the key).
struct ProfileKeys {
  const Json& j;
  const std::string& source;
  double num(const char* k, double lo, double hi) const { return get_number(j, k, source, lo, hi); }
  // A key earlier builds did not write: 0 where it is missing.
  double opt(const char* k, double lo, double hi) const { return j.contains(k) ? num(k, lo, hi) : 0.0; }
};

// The evaluations' keys (eval_every and what one costs).
void read_evals(const Json& j, const std::string& source, SchemeProfile& p) {
  const ProfileKeys k{j, source};
  p.eval_every = static_cast<int64_t>(k.num("eval_every", 0, 1e15));
  p.eval_s = k.num("eval_s", 0, 1e6);
  p.eval_copy_s = k.num("eval_copy_s", 0, 1e6);
  p.eval_sketch_s = k.num("eval_sketch_s", 0, 1e6);
  const std::string snap = json_string(j, "eval_snapshot", source);
  const auto mode = choice_named<Snapshot>(snap);
  SFB_CHECK_DATA(mode.has_value(), "{}: \"eval_snapshot\" = \"{}\" is not one of auto, copy, in_place", source, snap);
  p.eval_snapshot = *mode;
}

// The engines' runs at the profiled N (engine_*): their clocks, the FMS engine's servers and the
// clocks' standard errors.
void read_engines(const Json& j, const std::string& source, SchemeProfile& p) {
  const ProfileKeys k{j, source};
  p.engine_clock_s = k.num("engine_clock_s", 0, 1e6);
  p.engine_sf_s = k.num("engine_sf_s", 0, 1e6);
  p.engine_comm_s = k.num("engine_comm_s", 0, 1e6);
  p.engine_apply_s = k.num("engine_apply_s", 0, 1e6);
  // Profiles of earlier builds have no engine run with evaluations, nor a pair run.
  p.engine_eval_clock_s = k.opt("engine_eval_clock_s", 0, 1e6);
  p.engine_pair_clock_s = k.opt("engine_pair_clock_s", 0, 1e6);
  p.engine_allreduce_clock_s = k.num("engine_allreduce_clock_s", 0, 1e6);
  // Profiles of earlier builds, or taken without server ranks, have no FMS engine.
  p.engine_fms_clock_s = k.opt("engine_fms_clock_s", 0, 1e6);
  p.engine_fms_servers = static_cast<int>(k.opt("engine_fms_servers", 0, 1 << 20));
  SFB_CHECK_DATA(!(p.engine_fms_clock_s > 0) || p.engine_fms_servers >= 1,
                 "{}: \"engine_fms_clock_s\" = {} needs \"engine_fms_servers\" >= 1", source, p.engine_fms_clock_s);
  // Profiles of earlier builds did not say where the servers ran: on hosts of their own.
  p.engine_fms_servers_beside = static_cast<int>(k.opt("engine_fms_servers_beside", 0, p.engine_fms_servers));
  // Profiles of earlier builds have no dense engine run with evaluations.
  p.engine_allreduce_eval_clock_s = k.opt("engine_allreduce_eval_clock_s", 0, 1e6);
  p.engine_fms_eval_clock_s = k.opt("engine_fms_eval_clock_s", 0, 1e6);
  // Profiles of earlier builds have no standard errors (0: unknown).
  for (const auto& [key, se] : {std::pair{"engine_clock_se_s", &p.engine_clock_se_s},
                                {"engine_eval_clock_se_s", &p.engine_eval_clock_se_s},
                                {"engine_allreduce_clock_se_s", &p.engine_allreduce_clock_se_s},
                                {"engine_allreduce_eval_clock_se_s", &p.engine_allreduce_eval_clock_se_s},
                                {"engine_fms_clock_se_s", &p.engine_fms_clock_se_s},
                                {"engine_fms_eval_clock_se_s", &p.engine_fms_eval_clock_se_s}})
    *se = k.opt(key, 0, 1e6);
}

}  // namespace

namespace {

// The job and its host: the config, the model, the ranks and cores, W's shape, v and the batch.
void read_job(const Json& j, const std::string& source, SchemeProfile& p) {
  const ProfileKeys k{j, source};
  const auto big = 1e15;
  p.config = json_string(j, "config", source);
  p.model = json_string(j, "model", source);
  p.workers = static_cast<int>(k.num("workers", 1, 1 << 20));
  p.ranks_on_host = static_cast<int>(k.num("ranks_on_host", 1, 1 << 20));
  p.cores = k.num("cores", 0.001, 1 << 20);
  p.machine_cores = k.opt("machine_cores", 0, 1 << 20);
  p.threads = static_cast<int>(k.num("threads", 1, 4096));
  p.J = static_cast<int64_t>(k.num("J", 1, big));
  p.D = static_cast<int64_t>(k.num("D", 1, big));
  p.K = static_cast<int64_t>(k.num("K", 1, big));
  // Profiles of earlier builds measured the job's own K.
  p.job_K = static_cast<int64_t>(k.opt("job_K", 0, big));
  SFB_CHECK_DATA(j.contains("sparse_v") && j["sparse_v"].is_boolean(), "{}: the profile has no boolean \"sparse_v\"",
                 source);
  p.sparse_v = j["sparse_v"].get<bool>();
  p.v_nonzeros = k.num("v_nonzeros", 0, big);
  p.layout = stored_layout(j, source);
  // Profiles of earlier builds did not record the model's prox: none (memory_per_rank counts less).
  SFB_CHECK_DATA(!j.contains("has_prox") || j["has_prox"].is_boolean(), "{}: \"has_prox\" must be true or false",
                 source);
  p.has_prox = j.contains("has_prox") && j["has_prox"].get<bool>();
  p.batch_bytes = static_cast<int64_t>(k.num("batch_bytes", 0, big));
}

// The pieces measured alone: the SF computation, the apply, the dense form and add, memory bandwidth.
void read_pieces(const Json& j, const std::string& source, SchemeProfile& p) {
  const ProfileKeys k{j, source};
  p.sf_s = k.num("sf_s", 0, 1e6);
  // Profiles of earlier builds timed the SF computation at one K: all of it grows with K.
  p.sf_fixed_s = k.opt("sf_fixed_s", 0, p.sf_s);
  p.apply_fixed_s = k.num("apply_fixed_s", -1e6, 1e6);
  p.apply_batch_s = k.num("apply_batch_s", 0, 1e6);
  p.form_dense_s = k.num("form_dense_s", 0, 1e6);
  p.add_dense_s = k.num("add_dense_s", 0, 1e6);
  // Profiles written before the bandwidth was measured have none: no memory floor then.
  p.mem_bytes_per_s = k.opt("mem_bytes_per_s", 0, 1e15);
}

// The fitted links and collectives, the reconciliation, and what the profile took and left out.
void read_links(const Json& j, const std::string& source, SchemeProfile& p) {
  const ProfileKeys k{j, source};
  const auto big = 1e15;
  p.link = {"fitted", k.num("link_a_us", 0, 1e9), k.num("link_b_us_per_byte", 1e-12, 1e6)};
  p.bcast_r2 = k.num("bcast_r2", -1e9, 1);
  // Profiles of earlier builds did not measure the broadcast's CPU: the link alone.
  p.bcast_cpu_ns_per_byte = k.opt("bcast_cpu_ns_per_byte", 0, 1e6);
  // Profiles written before the incast was measured have none: the broadcast's link stands in.
  p.incast_a_us = k.opt("incast_a_us", 0, 1e9);
  p.incast_b_us_per_byte = k.opt("incast_b_us_per_byte", 0, 1e6);
  p.allreduce_a_us = k.num("allreduce_a_us", -1e9, 1e9);
  p.allreduce_b_us_per_byte = k.num("allreduce_b_us_per_byte", 0, 1e6);
  p.allreduce_r2 = k.num("allreduce_r2", -1e9, 1);
  // Profiles of earlier builds fitted the all-reduce at W / 4 and W.
  p.allreduce_block_bytes = static_cast<int64_t>(k.opt("allreduce_block_bytes", 0, big));
  p.reconcile = json_string(j, "reconcile", source);
  p.reconcile_every = static_cast<int64_t>(k.num("reconcile_every", 0, big));
  p.profile_s = k.opt("profile_s", 0, 1e9);
  // Profiles of earlier builds did not say what they skipped (their warnings did).
  if (j.contains("skipped")) {
    SFB_CHECK_DATA(j["skipped"].is_array() && j["skipped"].size() <= 16,
                   "{}: \"skipped\" must be a list of the measurements left out", source);
    for (const auto& e : j["skipped"]) {
      SFB_CHECK_DATA(e.is_string() && e.get<std::string>().size() <= 64,
                     "{}: \"skipped\" must hold the names of measurements, got {}", source, e.dump());
      p.skipped.push_back(e.get<std::string>());
    }
  }
  p.cpu_stolen_share =
      j.contains("cpu_stolen_share") && !j["cpu_stolen_share"].is_null() ? k.num("cpu_stolen_share", 0, 1) : -1;
}

}  // namespace

SchemeProfile profile_from_json(const Json& j, const std::string& source) {
  SFB_CHECK_DATA(j.is_object() && json_string(j, "format", source) == "sfb-scheme-profile/1",
                 "{}: not an sfb scheme profile (\"format\" must be \"sfb-scheme-profile/1\"; sfbd --profile writes "
                 "one)",
                 source);
  SchemeProfile p;
  read_job(j, source, p);
  read_pieces(j, source, p);
  read_engines(j, source, p);
  read_links(j, source, p);
  // Profiles written before evaluations were modelled leave them out; before they were measured,
  // they have only eval_rows_per_clock.
  p.eval_rows_per_clock = ProfileKeys{j, source}.opt("eval_rows_per_clock", 0, 1e15);
  if (j.contains("eval_every")) read_evals(j, source, p);
  return p;
}

SchemeProfile read_profile(const std::string& path) {
  return profile_from_json(read_json_file(path, "scheme profile"), path);
}

}  // namespace sfb::predict
