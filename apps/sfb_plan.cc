// sfb-plan: which communication scheme wins for this matrix model on this cluster, or on one we
// don't have. From a scheme profile that sfbd measured on the job (sfbd --profile FILE, or the
// "profile" of a comm.scheme = "auto" run's summary.json), predicts seconds per clock, bytes per
// clock and time to target of SFB full broadcast, Halton, FMS and the all-reduce at N nodes on named
// or fitted links (sfb/predict/scheme_model.h has the model and what it ignores), and the
// crossovers: the N, and the link rate, at which the winner changes. The profile's pieces scale to
// another shape and other nodes (sfb/predict/profile.h): --rows, --cols, --minibatch and --nnz
// give the model's shape, --cores and --threads a node's cores and a rank's threads.
//
//   sfb-plan --profile p.json [--nodes 4,8,...,1024] [--links fitted,1gbe,10gbe,25gbe,ib,100gbe]
//            [--schemes sfb,halton,fms:1,allreduce] [--one-host] [--clocks C] [--csv out.csv]
//            [--rows J] [--cols D] [--minibatch K] [--nnz Z] [--cores C] [--threads T]
//            [--node-memory 64GiB] [--fms-placement own|workers]
// It also prints every scheme's memory per rank and per node by sfbd --check's estimate
// (plan_memory.h) and, with --node-memory, which fit and how many ranks a node holds; FMS's servers
// are placed where the profile's ran (beside the workers, or on hosts of their own) unless
// --fms-placement says, and each FMS row says where.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli_exit.h"
#include "plan_memory.h"
#include "sfb/core/error.h"
#include "sfb/core/files.h"
#include "sfb/core/json.h"
#include "sfb/core/links.h"
#include "sfb/core/strings.h"
#include "sfb/predict/crossovers.h"
#include "sfb/predict/scheme_model.h"

namespace {

using sfb::predict::Link;
using sfb::predict::Prediction;
using sfb::predict::Scheme;
using sfb::predict::SchemeProfile;
using sfb::predict::Target;

struct Options {
  std::string profile, nodes = "4,8,16,32,64,128,256,512,1024", links = "fitted,1gbe,10gbe,25gbe,100gbe",
                       schemes = "sfb,halton,fms:1,allreduce", csv;
  bool one_host = false;
  double clocks = -1;
  int at = 0;                                 // the N of the link-rate crossover (default: the profile's workers)
  int64_t rows = 0, cols = 0, minibatch = 0;  // 0: the profile's
  double nnz = 0, cores = 0;
  int threads = 0;
  std::string fms_placement;  // "own", "workers"; "": where the profile's servers ran
  std::string node_memory;    // a node's memory ("64GiB", bytes); "": none given
};

// The target's shape from --rows/--cols/--minibatch/--nnz over the profile's; InvalidArgument
// naming the option and value for anything out of range.
sfb::predict::Shape shape_of(const Options& o, const SchemeProfile& p) {
  sfb::predict::Shape s = p.job_shape();
  const auto count = [](const char* opt, int64_t v, int64_t& out) {
    if (v == 0) return;
    SFB_CHECK(v >= 1 && v <= (int64_t{1} << 40), "{} must be a count from 1 to 2^40, got {}", opt, v);
    out = v;
  };
  count("--rows", o.rows, s.J);
  count("--cols", o.cols, s.D);
  count("--minibatch", o.minibatch, s.K);
  if (o.nnz != 0) {
    SFB_CHECK(p.sparse_v,
              "--nnz {}: the profile's v is dense ({} = D nonzeros per pair): its pieces were measured on dense data "
              "and do not scale to sparse v; profile a job on sparse data",
              o.nnz, p.D);
    SFB_CHECK(std::isfinite(o.nnz) && o.nnz > 0 && o.nnz <= static_cast<double>(s.D),
              "--nnz must be the mean nonzeros of a sample, from 0 to D = {}, got {}", s.D, o.nnz);
    s.v_nonzeros = o.nnz;
  } else if (s.sparse_v) {
    s.v_nonzeros = std::min(s.v_nonzeros, static_cast<double>(s.D));
  }  // dense v: its width is D whatever v_nonzeros says (Shape::v_width)
  return s;
}

// A profile file, or a summary.json of comm.scheme = "auto" (its "auto.profile").
SchemeProfile load_profile(const std::string& path) {
  const auto j = sfb::read_json_file(path, "--profile");
  if (j.contains("auto") && j["auto"].is_object() && j["auto"].contains("profile"))
    return sfb::predict::profile_from_json(j["auto"]["profile"], path + " (auto.profile)");
  return sfb::predict::profile_from_json(j, path);
}

std::vector<int> parse_nodes(const std::string& list) {
  std::vector<int> out;
  for (const auto& s : sfb::split_trimmed(list, ',')) {
    const auto v = sfb_tools::integer_in<int>(s, 2, 1 << 20);
    SFB_CHECK(v.has_value(), "--nodes: \"{}\" is not a node count >= 2", s);
    out.push_back(*v);
  }
  SFB_CHECK(!out.empty(), "--nodes is empty");
  return out;
}

Link link_of(const std::string& name, const SchemeProfile& p) {
  if (name == "fitted") return p.link;
  try {
    return sfb::predict::named_link(name);
  } catch (const sfb::InvalidArgument& e) {
    throw sfb::InvalidArgument(fmt::format("--links: {}", e.what()));
  }
}

std::string seconds(double s) { return s < 0 ? "-" : s < 1 ? fmt::format("{:.4f}", s) : fmt::format("{:.3f}", s); }

// The winner at `nodes` on `link`.
const Prediction* fastest(const std::vector<Prediction>& rows) {
  return &*std::min_element(rows.begin(), rows.end(),
                            [](const Prediction& a, const Prediction& b) { return a.clock_s < b.clock_s; });
}

// The link rates (Gbit/s, 0.1 .. 400 in steps of 2^(1/4)) at which the winner at N changes.
std::string rate_crossovers(const SchemeProfile& p, const std::vector<Scheme>& schemes, Target t) {
  std::string out, prev;
  t.fitted = false;
  for (double g = 0.1; g <= 400; g *= std::pow(2.0, 0.25)) {
    t.link = Link{"", p.link.a_us, 8e-3 / g};
    std::vector<Prediction> rows;
    for (const auto& s : schemes) rows.push_back(sfb::predict::predict(p, s, t));
    const std::string best = fastest(rows)->label();
    if (!prev.empty() && best != prev) out += fmt::format("  {} -> {} at {:.3g} Gbit/s\n", prev, best, g);
    prev = best;
  }
  return out.empty() ? fmt::format("  {} wins from 0.1 to 400 Gbit/s\n", prev) : out;
}

void add_options(CLI::App& app, Options& o) {
  app.add_option("--profile", o.profile, "Scheme profile (sfbd --profile FILE) or an auto run's summary.json")
      ->required();
  app.add_option("--nodes", o.nodes, "Comma list of node counts (workers; FMS adds its servers)");
  app.add_option("--links", o.links,
                 fmt::format("Comma list of links: fitted (the profile's), {}", fmt::join(sfb::link_names(), ", ")));
  app.add_option("--schemes", o.schemes,
                 "Comma list of sfb, halton[:Q], fms[:S] (fms:n: a server per node), allreduce");
  app.add_flag("--one-host", o.one_host,
               "Every rank on the profiled host, sharing its cores (the netns cluster); default: a node each");
  app.add_option("--clocks", o.clocks, "Clocks to the target objective (from a measured run): time to target")
      ->check(sfb_tools::Finite(1.0, 1e15));
  app.add_option("--at", o.at, "N of the link-rate crossover (default: the profile's workers)");
  app.add_option("--csv", o.csv, "Also write every prediction as CSV");
  app.add_option("--rows", o.rows, "W's rows J (classes) to predict (default: the profile's)");
  app.add_option("--cols", o.cols, "W's columns D (features) to predict (default: the profile's)");
  app.add_option("--minibatch", o.minibatch, "Samples per clock K (default: the profile's)");
  app.add_option("--nnz", o.nnz, "Mean nonzeros of a sample, for a profile of sparse data (default: the profile's)");
  app.add_option("--cores", o.cores,
                 "A node's cores (default: the profiled host's); threads per rank then cores / ranks per node");
  app.add_option("--threads", o.threads, "Threads per rank (default: the profile's, or with --cores cores / ranks)");
  app.add_option("--node-memory", o.node_memory,
                 "A node's memory (bytes, or 64GiB, 512MiB, 2TiB, 64GB): which schemes fit and how many ranks a node "
                 "holds");
  app.add_option("--fms-placement", o.fms_placement,
                 "Where FMS's servers run: own (hosts of their own), workers (server s on worker s's host, as mpirun "
                 "--map-by node on as many hosts as workers places them) (default: where the profile's ran)");
}

// Where FMS's servers run (Target::fms_beside_workers): --fms-placement, or where the profile's ran.
bool fms_beside_workers(const Options& o, const SchemeProfile& p) {
  if (o.fms_placement.empty()) return p.engine_fms_servers_beside > 0;
  SFB_CHECK(o.fms_placement == "own" || o.fms_placement == "workers",
            "--fms-placement must be own or workers, got \"{}\"", o.fms_placement);
  return o.fms_placement == "workers";
}

// Where FMS's servers run at N workers, for the table: "own hosts" or "beside workers 0-1".
std::string fms_where(const Prediction& r, const Target& t) {
  if (r.servers <= 0) return "";
  if (!sfb::predict::fms_beside(t, r.servers))
    return r.servers == 1 ? " (on a host of its own)" : " (on hosts of their own)";
  return r.servers == 1 ? " (beside worker 0)" : fmt::format(" (beside workers 0-{})", r.servers - 1);
}

// Every value checked before any output (InvalidArgument naming the option and the value).
void check_options(const CLI::App& app, const Options& o, const SchemeProfile& p, const std::vector<Scheme>& schemes) {
  SFB_CHECK(!schemes.empty(), "--schemes is empty");
  if (!o.csv.empty()) sfb::prepare_output_file(o.csv, "--csv");  // a path that cannot be written costs no work
  SFB_CHECK(!sfb::split_trimmed(o.links, ',').empty(), "--links is empty: name at least one link (fitted, {})",
            fmt::join(sfb::link_names(), ", "));
  for (const auto& lname : sfb::split_trimmed(o.links, ',')) link_of(lname, p);  // every name, before any output
  SFB_CHECK(app.count("--cores") == 0 || (std::isfinite(o.cores) && o.cores > 0 && o.cores <= 1e6),
            "--cores must be a node's cores, above 0, got {}", o.cores);
  SFB_CHECK(app.count("--threads") == 0 || (o.threads >= 1 && o.threads <= 4096),
            "--threads must be threads per rank from 1 to 4096, got {}", o.threads);
  SFB_CHECK(app.count("--at") == 0 || (o.at >= 2 && o.at <= (1 << 20)), "--at must be a node count >= 2, got {}", o.at);
  fms_beside_workers(o, p);
  if (!o.node_memory.empty()) sfb_tools::parse_memory(o.node_memory, "--node-memory");
}

std::string gib(double bytes) { return fmt::format("{:.3g}", bytes / 1073741824.0); }

// Every scheme's memory at each N (plan_memory.h), and with --node-memory whether it fits and how
// many ranks a node holds.
void print_memory(const Options& o, const SchemeProfile& p, const Target& base, const std::vector<int>& nodes,
                  const std::vector<Scheme>& schemes) {
  const double mem = o.node_memory.empty() ? 0 : sfb_tools::parse_memory(o.node_memory, "--node-memory");
  fmt::print(
      "## memory (GiB): sfbd --check's estimate at each rank's peak (W, its snapshot, the queues' batches, the "
      "workspaces, the row blocks; not what the process holds before training: libraries, its data partition)\n\n");
  const std::string fit = mem > 0 ? fmt::format(" | fits {} GiB | ranks a node holds", gib(mem)) : "";
  fmt::print("| N | scheme | rank 0 | other ranks | FMS server | node (ranks){} |\n", fit);
  fmt::print("|---|---|---|---|---|---|{}\n", mem > 0 ? "---|---|" : "");
  for (int n : nodes) {
    Target t = base;
    t.nodes = n;
    for (const auto& s : schemes) {
      const auto m = sfb_tools::scheme_memory(p, s, t, mem);
      std::string cols;
      if (mem > 0)
        cols = fmt::format(" | {} | {}", m.node_bytes <= mem && m.ranks_fit >= 1 ? "yes" : "**no**",
                           m.ranks_fit >= 1 ? std::to_string(m.ranks_fit) : "none");
      fmt::print(
          "| {} | {} | {} | {} | {} | {} ({}{}){} |\n", n, s.label(), gib(m.rank0_bytes), gib(m.rank_bytes),
          m.server_bytes > 0 ? gib(m.server_bytes) : "-", gib(m.node_bytes), m.ranks_per_node,
          m.server_bytes > 0 && sfb::predict::fms_beside(t, s.servers > 0 ? s.servers : n) ? " and server 0" : "",
          cols);
    }
  }
  fmt::print("\n");
}

// One engine's two runs at the profiled N, "0.555 +- 0.021 / 0.541 +- 0.030 s (...)", and what the
// prediction takes from them (`taken`, SchemeProfile::Anchors): the evaluations' cost over their
// pieces, said to be within the runs' noise where the excess is less than twice the standard error
// of the difference (the run with evaluations overstates its own: engine_eval_clock_se_s), and
// what the runs measured where the prediction takes another value (less than 0 measured: 0; the
// all-reduce's: at most the pieces, its clock the faster run's), then `rule` where both runs are
// said; "" where not run.
std::string engine_runs(double without_s, double without_se_s, double with_s, double with_se_s, double evals_s,
                        double taken, std::string_view rule = "") {
  if (!(without_s > 0)) return "";
  const auto run = [](double s, double se) {
    return se > 0 ? fmt::format("{:.3g} +- {:.2g}", s, se) : fmt::format("{:.3g}", s);
  };
  std::string out = run(without_s, without_se_s);
  if (!(with_s > 0) || !(evals_s > 0)) return out + " s";
  const double diff = with_s - without_s;
  const bool known = without_se_s > 0 && with_se_s > 0;
  const bool noise = known && std::abs(diff) < 2.0 * std::hypot(without_se_s, with_se_s);
  std::string why;
  if (std::abs(taken - std::max(0.0, diff) / evals_s) > 1e-9 || diff < 0)
    why = fmt::format(", measured {:.2g}x", diff / evals_s);
  if (noise)
    why += ", within the runs' noise";
  else if (!known)
    why += "; no standard errors: an earlier build's profile, or fewer than two steady clocks";
  else if (diff < 0)
    why += ": faster with them";
  return out + " / " + run(with_s, with_se_s) +
         fmt::format(" s (evaluations {:.2g}x their pieces{}){}", taken, why, rule);
}

// The engines that anchor the prediction at the profiled N, without and with evaluations.
void print_engines(const SchemeProfile& p) {
  const double ev = p.evals_per_clock_s();
  const SchemeProfile::Anchors an = p.anchors();
  const std::string sfb =
      engine_runs(p.engine_clock_s, p.engine_clock_se_s, p.engine_eval_clock_s, p.engine_eval_clock_se_s, ev, an.eval);
  const std::string ar = engine_runs(p.engine_allreduce_clock_s, p.engine_allreduce_clock_se_s,
                                     p.engine_allreduce_eval_clock_s, p.engine_allreduce_eval_clock_se_s, ev,
                                     an.eval_allreduce, ": at most their pieces, its clock the faster run's");
  const std::string fms = engine_runs(p.engine_fms_clock_s, p.engine_fms_clock_se_s, p.engine_fms_eval_clock_s,
                                      p.engine_fms_eval_clock_se_s, ev, an.eval_fms);
  std::vector<std::string> parts;
  if (!sfb.empty()) parts.push_back("SFB " + sfb);
  if (!ar.empty()) parts.push_back("the all-reduce " + ar);
  if (!fms.empty())
    parts.push_back(
        fmt::format("FMS with {} server{} {}", p.engine_fms_servers, p.engine_fms_servers == 1 ? "" : "s", fms));
  if (parts.empty()) return;
  fmt::print("# the engines at the profiled {} workers, s a clock without / with evaluations (+- standard error): {}\n",
             p.workers, fmt::join(parts, "; "));
}

// A profile taken on a noisy machine says so: a hypervisor's steal of kNoisySteal or more of the CPU
// time the machine wanted (sfbd --profile warns at the same share), or an engine's steady clock
// whose standard error is kNoisySe of it or more (its runs without evaluations: those with them
// spread by the evaluations' own clocks). Chosen bars, not fitted ones.
constexpr double kNoisySteal = 0.10, kNoisySe = 0.10;
void print_noise(const SchemeProfile& p) {
  std::vector<std::string> spread;
  for (const auto& [name, clock, se] : {std::tuple{"SFB", p.engine_clock_s, p.engine_clock_se_s},
                                        {"the all-reduce", p.engine_allreduce_clock_s, p.engine_allreduce_clock_se_s},
                                        {"FMS", p.engine_fms_clock_s, p.engine_fms_clock_se_s}})
    if (clock > 0 && se >= kNoisySe * clock)
      spread.push_back(fmt::format("{}'s {:.3g} +- {:.2g} s ({:.0f}%)", name, clock, se, 100 * se / clock));
  const bool stolen = p.cpu_stolen_share >= kNoisySteal;
  if (!stolen && spread.empty()) return;
  fmt::print(
      "# NOISY PROFILE: {}{}{}: its times measure the machine's neighbours too, and a profile taken another time "
      "may predict the same rows tens of percent apart; profile again when the machine is quieter, or take several "
      "profiles and compare their predictions\n",
      stolen ? fmt::format("the hypervisor gave {:.1f}% of the CPU time the machine wanted to other guests while it "
                           "profiled",
                           100 * p.cpu_stolen_share)
             : "",
      stolen && !spread.empty() ? "; " : "",
      spread.empty() ? "" : fmt::format("the engines' clocks spread by a tenth or more: {}", fmt::join(spread, ", ")));
}

// What the profile was taken on: the header's first lines.
void print_profiled(const SchemeProfile& p) {
  fmt::print(
      "# sfb-plan: {} ({}), profiled on W {} x {} ({}), K = {}, {} v, {} workers ({} ranks sharing {:.3g} cores, "
      "{} threads each); fitted link {:.0f} us + {:.3f} Gbit/s\n",
      p.config, p.model, p.J, p.D, sfb::layout_name(p.layout), p.K,
      p.sparse_v ? fmt::format("sparse ({:.1f} nnz)", p.v_nonzeros) : "dense", p.workers, p.ranks_on_host, p.cores,
      p.threads, p.link.a_us, 8e-3 / p.link.b_us_per_byte);
  if (!p.skipped.empty())
    fmt::print(
        "# PARTIAL PROFILE: not measured: {} (no room in the profiler's time budget: the machine was busy or the "
        "clocks are long); the schemes they anchor are predicted from their pieces alone, with no engine cost "
        "of their own. Profile again when the machine is quieter\n",
        fmt::join(p.skipped, ", "));
  print_noise(p);
  print_engines(p);
  if (p.bcast_cpu_ns_per_byte > 0)
    fmt::print(
        "# the broadcast's CPU: {:.3g} ns a byte sent or received (on a rank of less than a core, SFB's and Halton's "
        "clock is at least its SF computation, evaluations, apply and this CPU at its cores, scaled down where that "
        "overstates the engine measured at the profile's N)\n",
        p.bcast_cpu_ns_per_byte);
  if (p.job_K > 0)
    fmt::print(
        "# the job's K = {} was cut to {} to profile within sfbd's time budget: predicted at K = {} unless "
        "--minibatch says another\n",
        p.job_K, p.K, p.job_K);
}

// The header's lines on the target: the cores a rank computes with, where FMS's servers run and the
// shape when it is not the profile's.
void print_target(const Options& o, const SchemeProfile& p, const Target& base, const std::vector<int>& nodes,
                  const std::vector<Scheme>& schemes) {
  if (o.one_host) {
    // Every rank on the profiled host: a rank's cores shrink with N.
    std::vector<std::string> at;
    for (int n : nodes) {
      Target t = base;
      t.nodes = n;
      at.push_back(fmt::format("{:.3g} at N = {}", sfb::predict::target_rank_cores(p, t), n));
    }
    fmt::print(
        "# compute and update scaled to every rank sharing the profiled host's {:.3g} cores, a rank computing with "
        "{} (profiled: {:.3g})\n",
        base.cores > 0 ? base.cores : p.cores, fmt::join(at, ", "), p.rank_cores());
  } else {
    fmt::print("# compute and update at one rank per node, a rank computing with {:.3g} cores (profiled: {:.3g})\n",
               sfb::predict::target_rank_cores(p, base), p.rank_cores());
  }
  if (std::any_of(schemes.begin(), schemes.end(), [](const Scheme& s) { return s.kind == sfb::Scheme::kFms; }))
    fmt::print(
        "# FMS's servers {} ({}; the profile's {}: --fms-placement)\n",
        base.fms_beside_workers ? "beside the workers: server s on worker s's host (mpirun --map-by node on N hosts)"
                                : "on hosts of their own, beside no worker (N + S hosts)",
        base.fms_beside_workers ? "a server's link does not carry its own worker's share" : "the model's default",
        p.engine_fms_servers == 0 ? "had no servers"
        : p.engine_fms_servers_beside > 0
            ? fmt::format("ran beside workers ({} of {})", p.engine_fms_servers_beside, p.engine_fms_servers)
            : "ran on hosts of their own");
  const auto& sh = base.shape;
  if (sh.J != p.J || sh.D != p.D || sh.K != p.K || sh.v_nonzeros != p.shape().v_nonzeros)
    fmt::print(
        "# predicted for W {} x {}, K = {}{}: the profile's pieces rescaled by their work (sfb/predict/profile.h){}\n",
        sh.J, sh.D, sh.K, sh.sparse_v ? fmt::format(", {:.4g} nonzeros per sample", sh.v_nonzeros) : "",
        p.mem_bytes_per_s > 0
            ? fmt::format(", no faster than {:.3g} GB/s of memory traffic per profiled rank", p.mem_bytes_per_s / 1e9)
            : "; this profile has no memory bandwidth (an older sfbd): no memory floor");
  fmt::print("\n");
}

// One link's table, its winners by N and its crossovers in N; its CSV rows appended to `csv`.
void print_link(const Options& o, const SchemeProfile& p, const Target& base, const std::vector<int>& nodes,
                const std::vector<Scheme>& schemes, const std::string& lname, std::string& csv) {
  const Link link = link_of(lname, p);
  const double mem = o.node_memory.empty() ? 0 : sfb_tools::parse_memory(o.node_memory, "--node-memory");
  fmt::print("## {} ({:.0f} us + {:.3g} Gbit/s)\n\n", lname, link.a_us, 8e-3 / link.b_us_per_byte);
  fmt::print(
      "| N | scheme | s/clock | compute | network | update | engine | MB/clock | busiest link MB | time to target s "
      "|\n");
  fmt::print("|---|---|---|---|---|---|---|---|---|---|\n");
  std::vector<std::string> winners;
  Target t = base;
  t.link = link;
  t.fitted = lname == "fitted";
  for (int n : nodes) {
    std::vector<Prediction> rows;
    t.nodes = n;
    for (const auto& s : schemes) rows.push_back(sfb::predict::predict(p, s, t, o.clocks));
    const Prediction* best = fastest(rows);
    for (const auto& r : rows) {
      fmt::print("| {} | {}{}{} | {} | {} | {} | {} | {} | {:.4g} | {:.4g} | {} |\n", n, r.label(), fms_where(r, t),
                 &r == best ? " **(fastest)**" : "", seconds(r.clock_s), seconds(r.compute_s), seconds(r.comm_s),
                 seconds(r.update_s), seconds(r.engine_s), r.bytes_per_clock / 1e6, r.link_bytes_per_clock / 1e6,
                 seconds(r.time_to_target_s));
      const auto m = sfb_tools::scheme_memory(p, schemes[static_cast<size_t>(&r - rows.data())], t, mem);
      csv += fmt::format(
          "{},{},{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{},{},{:.6g},{:.6g},{:.6g},{}\n",
          lname, n, r.label(), r.q, r.servers, r.clock_s, r.compute_s, r.comm_s, r.update_s, r.engine_s,
          r.bytes_per_clock, r.link_bytes_per_clock, r.time_to_target_s, &r == best ? 1 : 0,
          r.servers <= 0                           ? ""
          : sfb::predict::fms_beside(t, r.servers) ? "workers"
                                                   : "own",
          m.rank0_bytes, m.rank_bytes, m.node_bytes, m.ranks_fit);
    }
    winners.push_back(fmt::format("{}: {}", n, best->label()));
  }
  fmt::print("\nwinner by N: {}\n", fmt::join(winners, ", "));
  const auto cross = sfb::predict::crossovers(p, schemes, nodes, t);
  if (cross.empty()) fmt::print("crossover in N: none over {}..{}\n", nodes.front(), nodes.back());
  for (const auto& c : cross) fmt::print("crossover in N: {} -> {} at N = {}\n", c.from, c.to, c.nodes);
  fmt::print("\n");
}

int run(int argc, char** argv) {
  CLI::App app{"sfb-plan: predicts SFB, Halton, FMS and the all-reduce for a matrix model at N nodes"};
  Options o;
  add_options(app, o);
  if (const auto code = sfb_tools::parse_args(app, argc, argv, true)) return *code;
  const SchemeProfile p = load_profile(o.profile);
  const auto nodes = parse_nodes(o.nodes);
  std::vector<Scheme> schemes;
  for (const auto& s : sfb::split_trimmed(o.schemes, ',')) schemes.push_back(sfb::predict::parse_scheme(s));
  check_options(app, o, p, schemes);
  const int per_host = o.one_host ? 0 : 1;
  Target base{2, p.link, per_host, false, shape_of(o, p), o.cores, o.threads};
  base.fms_beside_workers = fms_beside_workers(o, p);
  print_profiled(p);
  print_target(o, p, base, nodes, schemes);
  std::string csv =
      "link,nodes,scheme,q,servers,clock_s,compute_s,comm_s,update_s,engine_s,bytes_per_clock,link_bytes,"
      "time_to_target_s,winner,servers_on,rank0_bytes,rank_bytes,node_bytes,ranks_fit\n";
  print_memory(o, p, base, nodes, schemes);
  for (const auto& lname : sfb::split_trimmed(o.links, ',')) print_link(o, p, base, nodes, schemes, lname, csv);
  Target at = base;
  at.nodes = o.at > 0 ? o.at : std::max(2, p.workers);
  fmt::print("## crossover in link rate at N = {} (start-up {:.0f} us)\n\n{}", at.nodes, p.link.a_us,
             rate_crossovers(p, schemes, at));
  if (!o.csv.empty()) sfb::write_file_atomic(o.csv, csv);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const sfb::InvalidArgument& e) {
    std::fprintf(stderr, "sfb-plan: error: %s\n", e.what());
    return 2;
  } catch (const sfb::DataError& e) {
    std::fprintf(stderr, "sfb-plan: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sfb-plan: %s\n", e.what());
    return 1;
  }
}
