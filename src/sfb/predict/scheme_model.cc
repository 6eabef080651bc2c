#include "sfb/predict/scheme_model.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sfb/core/collective_cost.h"
#include "sfb/core/error.h"
#include "sfb/core/halton.h"
#include "sfb/core/row_blocks.h"

namespace sfb::predict {
namespace {

// The link's per-step cost as the all-reduce's algorithm choice sees it.
LinkCost link_cost(const Link& l) { return LinkCost{l.a_us, l.b_us_per_byte}; }

// W's bytes at a shape.
double w_bytes(const Shape& sh) { return 4.0 * static_cast<double>(sh.J) * static_cast<double>(sh.D); }

// The target with the profile's node count (its link, cores and shape kept) and FMS's servers
// where they ran when the profile measured them.
Target at_profiled_nodes(const SchemeProfile& p, Target t) {
  t.nodes = p.workers;
  t.fms_beside_workers = p.engine_fms_servers_beside > 0;
  return t;
}

}  // namespace

std::string Scheme::label() const {
  switch (kind) {
    case sfb::Scheme::kSfb:
      if (broadcast == Broadcast::kFull) return "sfb";
      return q > 0 ? fmt::format("halton:q{}", q) : "halton";
    case sfb::Scheme::kFms: return servers > 0 ? fmt::format("fms:s{}", servers) : "fms:n";
    case sfb::Scheme::kAllreduce: return "allreduce";
    case sfb::Scheme::kSharded: return "sharded";
    case sfb::Scheme::kAuto: break;
  }
  return "auto";
}

void Scheme::apply_to(Config& cfg, int nodes) const {
  cfg.comm.scheme = kind;
  if (kind == sfb::Scheme::kSfb) {
    cfg.sfb.broadcast = broadcast;
    if (is_halton() && q > 0) cfg.sfb.halton_q = q;
  }
  if (kind == sfb::Scheme::kFms) cfg.fms.servers = servers > 0 ? servers : nodes;
}

Scheme parse_scheme(const std::string& spec) {
  const auto colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  // "halton" is SFB's partial broadcast; the other names are the config's (comm.scheme).
  const bool halton = name == "halton";
  const auto kind = halton ? sfb::Scheme::kSfb : choice_named<sfb::Scheme>(name);
  const bool takes_arg = halton || kind == sfb::Scheme::kFms;
  SFB_CHECK(kind && kind != sfb::Scheme::kAuto && (colon == std::string::npos || takes_arg),
            "unknown scheme \"{}\"; schemes are sfb, halton[:Q], fms[:S|n], allreduce, sharded", spec);
  int arg = -1;
  if (colon != std::string::npos) {
    std::string a = spec.substr(colon + 1);
    if (kind == sfb::Scheme::kFms && a == "n") return Scheme::fms(0);  // a server per node
    // The label form too: "halton:q3", "fms:s2" (Scheme::label, sfb-plan's CSV).
    if (!a.empty() && a[0] == (kind == sfb::Scheme::kFms ? 's' : 'q')) a.erase(0, 1);
    char* end = nullptr;
    const long v = std::strtol(a.c_str(), &end, 10);
    SFB_CHECK(!a.empty() && *end == '\0' && v >= 1 && v <= (1 << 20), "scheme \"{}\": {} must be a count >= 1", spec,
              a);
    arg = static_cast<int>(v);
  }
  if (halton) return Scheme::halton(arg > 0 ? arg : 0);
  if (kind == sfb::Scheme::kFms) return Scheme::fms(arg > 0 ? arg : 1);
  Scheme s;
  s.kind = *kind;
  return s;
}

double allreduce_s(int64_t bytes, int nodes, const Link& link) {
  if (nodes <= 1 || bytes <= 0) return 0.0;
  return allreduce_us(bytes, nodes, link_cost(link)) * 1e-6;
}

namespace {

// W's all-reduce at the target in the engine's `calls` calls. On the fitted link: the profile's fit
// (SchemeProfile::allreduce_s); on a named one, the link's per-step cost a call (one call of all
// the bytes for a profile of an earlier build, as it predicted).
double target_allreduce_s(const SchemeProfile& p, int64_t bytes, int64_t calls, const Target& t) {
  if (t.fitted && p.allreduce_b_us_per_byte > 0 && p.workers >= 2) return p.allreduce_s(bytes, calls, t.nodes);
  if (p.allreduce_block_bytes <= 0 || calls <= 1) return allreduce_s(bytes, t.nodes, t.link);
  const auto c = static_cast<double>(calls);
  return c * allreduce_s(static_cast<int64_t>(static_cast<double>(bytes) / c), t.nodes, t.link);
}

}  // namespace

int target_ranks_sharing(const Target& t) { return t.ranks_per_host > 0 ? t.ranks_per_host : t.nodes; }

double target_rank_cores(const SchemeProfile& p, const Target& t) {
  const int R = target_ranks_sharing(t);
  const double C = t.cores > 0 ? t.cores : p.cores;
  const int T = t.threads > 0 ? t.threads
                : t.cores > 0 ? std::max(1, static_cast<int>(std::floor(t.cores / R)))  // runtime.threads = 0
                              : p.threads;
  return std::min(static_cast<double>(T), C / R);
}

Shape target_shape(const SchemeProfile& p, const Target& t) { return t.shape.J > 0 ? t.shape : p.job_shape(); }

namespace {

// On a rank of less than a core (Pieces::bcast_cpu_s_per_byte > 0) its threads share the cores: the
// clock is at least the SF computation, the evaluations, the apply and the broadcast's CPU for the
// 2 n B bytes it sends and receives, all on that budget. Where that is longer than the anchored sum
// (the link's time and the engine's excess, which are waits the busy rank no longer has), the rank
// computes all the clock: the broadcast's CPU replaces them. 512 x 512, K = 1024 on 0.125-core netns
// hosts at 1 Gbit/s, profiled at 4 (0.76 ns a byte): SFB at 8 hosts needs 12.5 ms of CPU for SF
// computation, 65 for the apply and 45 for its 58.7 MB, 0.98 s at an eighth of a core, and measured
// 0.97; at 4 hosts the anchored sum (0.56 s) is the longer. The pieces' CPU seconds move between
// profiles: a validation half's profile an hour later (0.93 ns a byte, its apply 8% slower) put
// the same row 19.5% high, the anchored sum alone 10.1%, while the floor brought the 2048 x 2048
// job's SFB at 8 hosts from -13.3% to -5.6% (docs/compare-log.md, runs/pv12). Divided by
// Anchors::cpu_floor: never above the engine measured at the profiled N (ranks sharing a machine's
// vCPUs overstate their CPU seconds). Before Halton's reconciliation, which adds its link time and
// its add after it (its own CPU is not in the floor).
void cpu_bound(const Pieces& x, const SchemeProfile::Anchors& an, int n, Prediction& r) {
  const double floor_s = (r.compute_s + r.update_s + 2.0 * n * x.batch_bytes * x.bcast_cpu_s_per_byte) / an.cpu_floor;
  if (floor_s <= r.compute_s + r.comm_s + r.update_s + r.engine_s) return;
  r.comm_s = floor_s - r.compute_s - r.update_s;
  r.engine_s = 0;
}

// SFB full broadcast (n = N - 1 peers) or rotating Halton (n = Q), at least the CPU floor, and
// Halton's reconciliation. r.compute_s (SF computation and evaluations) is set.
void predict_broadcast(const SchemeProfile& p, const SchemeProfile::Anchors& an, const Pieces& x, const Shape& sh,
                       int n, bool halton, const Target& t, Prediction& r) {
  const double N = t.nodes, B = x.batch_bytes;
  r.q = halton ? n : 0;
  r.comm_s = n > 0 ? (t.link.a_us + n * B * t.link.b_us_per_byte) * 1e-6 : 0.0;
  r.update_s = std::max(0.0, x.apply_fixed_s + (n + 1) * x.apply_batch_s);
  // The engine's own cost, grown or shrunk by each batch a rank receives beyond the profile's.
  r.engine_s = std::max(0.0, an.sfb_s + an.sfb_per_peer_s * (n - (p.workers - 1)));
  r.link_bytes_per_clock = n * B;
  r.bytes_per_clock = N * n * B;
  cpu_bound(x, an, n, r);
  if (!halton || p.reconcile.empty() || n >= t.nodes - 1) return;
  const bool same_shape = sh.J == p.J && sh.D == p.D && sh.K == p.K;
  const int64_t every = p.reconcile_every > 0 && t.nodes == p.workers && same_shape
                            ? p.reconcile_every
                            : auto_reconcile_every(t.nodes, n, sh.K, sh.J, sh.D, sh.v_width());
  const auto wb = static_cast<int64_t>(w_bytes(sh));
  const bool direct = allreduce_direct(wb, t.nodes, link_cost(t.link));
  // W's all-reduce and the drift's one float (runtime/reconciler.h).
  const double sent =
      static_cast<double>(allreduce_bytes_sent(wb, t.nodes, direct) + allreduce_bytes_sent(4, t.nodes, true));
  r.comm_s +=
      target_allreduce_s(p, wb, reconcile_calls(p.stored_rows(sh), p.stored_cols(sh)), t) / static_cast<double>(every);
  r.update_s += x.add_dense_s / static_cast<double>(every);
  r.link_bytes_per_clock += sent / static_cast<double>(every);
  r.bytes_per_clock += N * sent / static_cast<double>(every);
}

}  // namespace

double fms_server_link_w(int nodes, int servers, bool beside) {
  const double N = nodes, S = std::max(1, servers);
  return beside ? (N + S - 2.0) / S : N / S;
}

bool fms_beside(const Target& t, int servers) {
  return t.fms_beside_workers && servers <= t.nodes && t.ranks_per_host == 1;
}

namespace {

// A server's link in FMS's exchange: on the fitted link the profile's incast (every worker pushing
// into one host at once).
Link fms_link(const SchemeProfile& p, const Target& t) { return t.fitted ? p.incast() : t.link; }

// FMS with S servers, its evaluations left out: SF computation and forming the update, the busiest
// link's one direction (a server's, or a worker's when S >= N), the worker's copy of W in; SF
// computation, forming and the adds scaled by `a`. On the fitted link a server's link is the
// profile's incast (every worker pushing into one host).
Prediction fms_pieces(const SchemeProfile& p, double a, const Pieces& x, const Shape& sh, int S, const Target& t) {
  Prediction r;
  const double W = w_bytes(sh);
  const double N = t.nodes, add_s = x.add_dense_s * a;
  const double form_s = x.form_dense_s * a;
  const Link in = fms_link(p, t);
  r.servers = S;
  r.compute_s = x.sf_s * a + form_s;
  const bool beside = fms_beside(t, S);
  const double busiest = W * std::max(1.0, fms_server_link_w(t.nodes, S, beside));
  // Pushes and pulls overlap (the servers return each block once every worker's push of it is
  // in: fms_exchange.h), so the busiest link's one direction; a worker forms its update block by
  // block while the earlier blocks travel, so the push waits only for what the link needs beyond
  // the forming. A server adds each block's N pushes while the later blocks arrive, so its adds of
  // N shards of W / S overlap the push too: the slower of the two, then the last block's adds and
  // the pipeline's fill and drain: a server's link takes every worker's first block before it
  // returns any, and returns every worker's last block after it took them, 2 N blocks of at most
  // 1 MiB beyond its bytes. The exchange alone (sfb-commbench --ops fms on netns hosts, 2-8
  // workers, 1 and 4 servers, 300 Mbit/s and 1 Gbit/s) ran within -7% to +9% of that at W = 16 MiB;
  // a fill of the window's 4 blocks, the same at every N, was 8-21% low at 8 workers. At 1 MiB,
  // where start-up counts, and with N <= S, where the fill hides behind the workers' links, 2 N
  // blocks are high (up to +43%: docs/compare.md). Measured with the adds after the push instead:
  // FMS with 1 server +35% to +47% on the 2048 job at 1 Gbit/s.
  const int64_t cols = p.stored_cols(sh), rows = ps_max_shard_rows(p.stored_rows(sh), S);
  const double block = 4.0 * static_cast<double>(ps_block_rows(rows, cols) * cols);
  const auto blocks = static_cast<double>(ps_shard_blocks(rows, cols));
  // With S >= N a worker's link is the busiest: the same count. Beside the workers, a server's own
  // worker's blocks do not cross its link.
  const double fill = 2.0 * (beside ? N - 1.0 : N) * block;
  const double push_s = (in.a_us + busiest * in.b_us_per_byte) * 1e-6;
  const double adds_s = N / S * add_s;
  r.comm_s = std::max(std::max(0.0, push_s - form_s), adds_s) + adds_s / blocks + fill * in.b_us_per_byte * 1e-6;
  r.update_s = add_s;  // the worker's copy of W in
  r.link_bytes_per_clock = busiest;
  r.bytes_per_clock = 2 * N * W;
  return r;
}

// The FMS engine measured with its servers (engine_fms_clock_s) against FMS's modelled clock at the
// profile (its N, servers and shape, on the fitted link), as dense_anchor puts it. Slower than the
// model, what it leaves is a cost of the exchange's windows (ps_rounds: a clock's blocks go to a
// server kPsWindowBlocks at a time, and each window waits for every worker's pushes and for the
// pulls, through every host's share of a core): seconds per window round, so it grows with the
// blocks of a server's shard (the shape and the server count). It is part of the exchange's phase
// at the profile's N, not a cost beside it: with more workers the exchange takes the longer of its
// model and that phase (fms_excess_s). FMS with 4 servers on the small job, on 0.125-core netns
// hosts, ran a flat clock from 4 workers to 8 in six runs (0.143 / 0.147, 0.206 / 0.194, 0.187 /
// 0.179, 0.117 / 0.125 s), where its servers' links carry twice the bytes (a seventh grew 12%,
// 0.110 / 0.123): the sum predicted +17% at 8 workers (2026-12-04, 300 Mbit/s), the longer +5%.
// Seconds of the profiled hosts, like the all-reduce's anchor: carried as they are to other cores;
// the count is BSP's (under SSP the window slides across clocks, and a model whose prox needs whole
// clocks pushes without one). Faster than the model (its pieces overlap), a ratio on all of FMS.
// Not measured: ratio 1 and no residual.
struct FmsAnchor {
  bool measured = false;
  double ratio = 1.0;
  double s_per_round = 0.0;
};
FmsAnchor fms_engine_anchor(const SchemeProfile& p) {
  if (!(p.engine_fms_clock_s > 0) || p.engine_fms_servers < 1 || p.workers < 1) return {};
  Target here{p.workers, p.link, p.ranks_on_host, true, p.shape()};
  here.fms_beside_workers = p.engine_fms_servers_beside > 0;  // where the servers ran
  const Pieces x = pieces_at(p, p.shape(), p.rank_cores(), p.ranks_on_host);
  const Prediction f = fms_pieces(p, 1.0, x, p.shape(), p.engine_fms_servers, here);
  const double modelled = f.compute_s + f.comm_s + f.update_s;
  if (!(modelled > 0)) return {};
  const DenseAnchor a = dense_anchor(p.engine_fms_clock_s, modelled);
  const auto rounds =
      static_cast<double>(ps_rounds(p.stored_rows(p.shape()), p.stored_cols(p.shape()), p.engine_fms_servers));
  return {true, a.ratio, a.s / rounds};
}

// The anchor a target takes. A ratio (the engine faster than its model) corrects the model in the
// regime it was measured in only: with N <= S a worker's link is the busiest and the fill of 2 N
// blocks hides behind it (the exchange alone ran 2-9% over bytes + 2 N blocks at W = 16 MiB with 4
// workers and 4 servers, and up to 43% over at 1 MiB), with N > S a server's link is, and the model
// held within -7% to +2% (docs/compare.md). A ratio measured on one side of N = S is 1 on the other:
// carried from 4 workers and 4 servers to 8 workers on the 2048 job it put FMS 12% low at 300 Mbit/s
// (the model alone: 2% low).
FmsAnchor fms_anchor_at(const SchemeProfile& p, int servers, const Target& t) {
  FmsAnchor m = fms_engine_anchor(p);
  // The regime: a worker's link the busiest (a server's carries at most W each way) or a server's.
  const bool workers_busiest_there =
      fms_server_link_w(p.workers, p.engine_fms_servers, p.engine_fms_servers_beside > 0) <= 1.0;
  const bool workers_busiest_here = fms_server_link_w(t.nodes, servers, fms_beside(t, servers)) <= 1.0;
  if (m.ratio < 1.0 && workers_busiest_there != workers_busiest_here) m.ratio = 1.0;
  return m;
}

// Seconds a worker's link idles in FMS's exchange: the busiest link (a server's, with N > S) carries
// W N / S each way against a worker's W. Rank 0's evaluation delays its own pushes only; the
// exchange waits for them only beyond that slack.
double fms_worker_slack_s(const SchemeProfile& p, const Shape& sh, int servers, const Target& t) {
  return w_bytes(sh) * std::max(0.0, fms_server_link_w(t.nodes, servers, fms_beside(t, servers)) - 1.0) *
         fms_link(p, t).b_us_per_byte * 1e-6;
}

// What the evaluations cost FMS at the target: `ev` (measured at the profile's N with its servers,
// or their own time) less the slack the target adds beyond the profile's. With 4 servers on the 2048
// job at 1 Gbit/s (0.125-core netns hosts, eval.every 4 against none, two runs each) they cost
// 0.079-0.081 s a clock at 4 workers, where a worker's link is the busiest, and 0.025-0.035 s at 8,
// where the slack is 0.134 s: this hides them all (0.03 s low), carrying them as measured was 0.05 s
// high (FMS at 8 workers +18% in the validation, +6% to -4% with the slack).
double fms_evals_s(const SchemeProfile& p, double ev, bool measured, const Shape& sh, int servers, const Target& t) {
  const double at_profile = measured && ev > 0 ? fms_worker_slack_s(p, sh, servers, at_profiled_nodes(p, t)) : 0.0;
  return std::max(0.0, ev + at_profile - fms_worker_slack_s(p, sh, servers, t));
}

// The FMS engine's excess at the target (FmsAnchor): its window rounds at the target's shape and
// servers; with more workers than profiled, what the exchange's phase at the profile's N leaves
// beyond the target's modelled exchange (`comm_s`, fms_pieces' at the target).
double fms_excess_s(const SchemeProfile& p, const FmsAnchor& m, const Pieces& x, const Shape& sh, int servers,
                    const Target& t, double comm_s) {
  const double excess = m.s_per_round * static_cast<double>(ps_rounds(p.stored_rows(sh), p.stored_cols(sh), servers));
  if (t.nodes <= p.workers || !(excess > 0)) return excess;
  const double phase = fms_pieces(p, 1.0, x, sh, servers, at_profiled_nodes(p, t)).comm_s + excess;
  return std::max(0.0, phase - comm_s);
}

// Evaluations per clock: rank 0's measured evaluation (and the snapshot's copy of W when the monitor
// copies at the target's W) and a rank's drift sketch, every eval_every clocks; a profile from before they were
// measured: eval_rows_per_clock rows at a sample's SF computation each.
double eval_per_clock_s(const SchemeProfile& p, const Pieces& x, const Shape& sh) {
  if (p.eval_every <= 0) return x.sf_s * p.eval_rows_per_clock / static_cast<double>(std::max<int64_t>(1, sh.K));
  return measured_evals_per_clock_s(p, x, sh);
}

// comm.scheme = "sharded" (runtime/sharded_worker.h) from the SFB pieces, not anchored (the profile
// runs no sharded engine): a rank's outputs for the P K samples on its J / N rows are K J D of work,
// one SF computation of K samples; its update of those rows one batch's apply; its evaluations
// 1 / N of rank 0's. On its link, two all-gathers one after the other: its K samples (label and v,
// dense floats or an index and a value per non-zero, and the 21-byte head) and its share of the N K
// samples' statistics (MLR's 5 floats each) to every other rank, as many received.
void predict_sharded(const Pieces& x, const Shape& sh, double ev, const Target& t, Prediction& r) {
  const double N = t.nodes, K = static_cast<double>(sh.K);
  const double v = sh.sparse_v ? 4.0 + 8.0 * sh.v_width() : 4.0 * static_cast<double>(sh.D);
  const double samples = 29.0 + K * (4.0 + v), stats = 8.0 + 4.0 * 5.0 * N * K;
  r.compute_s = x.sf_s + ev / N;
  r.update_s = x.apply_fixed_s + x.apply_batch_s;
  r.comm_s = N > 1 ? (2.0 * t.link.a_us + (N - 1) * (samples + stats) * t.link.b_us_per_byte) * 1e-6 : 0.0;
  r.link_bytes_per_clock = (N - 1) * (samples + stats);
  r.bytes_per_clock = N * r.link_bytes_per_clock;
}

// The dense all-reduce: its pieces scaled by its engine's anchor. `ev`: the evaluations' share.
void predict_allreduce(const SchemeProfile& p, const SchemeProfile::Anchors& an, const Pieces& x, const Shape& sh,
                       double ev, const Target& t, Prediction& r) {
  const auto wb = static_cast<int64_t>(w_bytes(sh));
  r.compute_s = x.sf_s * an.dense.ratio + ev + x.form_dense_s * an.dense.ratio;
  r.comm_s = target_allreduce_s(p, wb, dense_allreduce_calls(p.stored_rows(sh), p.stored_cols(sh)), t) * an.dense.ratio;
  r.update_s = x.add_dense_s * an.dense.ratio;
  r.engine_s = an.dense.s;
  const double sent =
      static_cast<double>(allreduce_bytes_sent(wb, t.nodes, allreduce_direct(wb, t.nodes, link_cost(t.link))));
  r.link_bytes_per_clock = sent;
  r.bytes_per_clock = t.nodes * sent;
}

// FMS with `servers` servers. Anchored by its engine measured with servers (fms_anchor_at: its
// window rounds' seconds, or a ratio on all of it on the profile's side of N = S; the evaluations
// less a worker's slack); else its compute and adds take the all-reduce engine's anchor and its
// network is the model alone. `ev`: the evaluations' own time, before the engine's factor.
void predict_fms(const SchemeProfile& p, const SchemeProfile::Anchors& an, const Pieces& x, const Shape& sh,
                 int servers, double ev, const Target& t, Prediction& r) {
  const bool measured_here = servers == p.engine_fms_servers;
  const FmsAnchor m = fms_anchor_at(p, servers, t);
  const Prediction f = fms_pieces(p, m.measured ? 1.0 : an.dense.ratio, x, sh, servers, t);
  r.compute_s =
      f.compute_s * m.ratio + fms_evals_s(p, ev * (measured_here ? an.eval_fms : 1.0), measured_here, sh, servers, t);
  r.comm_s = f.comm_s * m.ratio;
  r.update_s = f.update_s * m.ratio;
  r.engine_s = m.measured ? fms_excess_s(p, m, x, sh, servers, t, f.comm_s) : an.dense.s;
  r.servers = f.servers;
  r.link_bytes_per_clock = f.link_bytes_per_clock;
  r.bytes_per_clock = f.bytes_per_clock;
}

}  // namespace

Prediction predict(const SchemeProfile& p, const Scheme& s, const Target& t, double clocks_to_target) {
  SFB_CHECK(t.nodes >= 1, "nodes must be >= 1, got {}", t.nodes);
  Prediction r;
  r.which = s;
  r.nodes = t.nodes;
  const Shape sh = target_shape(p, t);
  const Pieces x = pieces_at(p, sh, target_rank_cores(p, t), target_ranks_sharing(t));
  const SchemeProfile::Anchors an = p.anchors();
  // SF computation, and the evaluations, which every rank waits for under BSP: what they cost the
  // scheme's engine (Anchors::eval, eval_allreduce, eval_fms: rank 0's monitor runs them beside the
  // engine's threads; FMS's at the server count it was measured with only: 0.012 s a clock with 1
  // server, 0.103 s with 4 on the same job), their own time where that was not measured.
  const double ev = eval_per_clock_s(p, x, sh);
  switch (s.kind) {
    case sfb::Scheme::kSfb:
      r.compute_s = x.sf_s + ev * an.eval;
      predict_broadcast(p, an, x, sh, s.is_halton() ? sfb::halton_receivers(t.nodes, s.q) : t.nodes - 1, s.is_halton(),
                        t, r);
      break;
    case sfb::Scheme::kAllreduce: predict_allreduce(p, an, x, sh, ev * an.eval_allreduce, t, r); break;
    case sfb::Scheme::kFms: predict_fms(p, an, x, sh, s.servers > 0 ? s.servers : t.nodes, ev, t, r); break;
    case sfb::Scheme::kSharded: predict_sharded(x, sh, ev * an.eval, t, r); break;
    case sfb::Scheme::kAuto: throw InvalidArgument("\"auto\" is a choice among schemes, not one to predict");
  }
  r.clock_s = r.compute_s + r.comm_s + r.update_s + r.engine_s;
  if (clocks_to_target > 0) r.time_to_target_s = clocks_to_target * r.clock_s;
  return r;
}

Json to_json(const Prediction& r) {
  Json j = {{"scheme", r.label()},
            {"nodes", r.nodes},
            {"clock_s", sig(r.clock_s, 5)},
            {"compute_s", sig(r.compute_s, 5)},
            {"comm_s", sig(r.comm_s, 5)},
            {"update_s", sig(r.update_s, 5)},
            {"engine_s", sig(r.engine_s, 5)},
            {"bytes_per_clock", sig(r.bytes_per_clock, 6)},
            {"link_bytes_per_clock", sig(r.link_bytes_per_clock, 6)}};
  if (r.q > 0) j["q"] = r.q;
  if (r.servers > 0) j["servers"] = r.servers;
  if (r.time_to_target_s >= 0) j["time_to_target_s"] = sig(r.time_to_target_s, 5);
  return j;
}

}  // namespace sfb::predict
