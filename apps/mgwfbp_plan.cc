// mgwfbp-plan: the MG-WFBP planner, cost model and cluster simulator on the command line.
//
//   mgwfbp-plan --profile googlenet.csv --network 10gbe --nodes 2,4,8,16,32,64 [--out DIR]
//   mgwfbp-plan --bcaffe-log tmp8comm.log --network fit:allreduce8.log --nodes 8
//   mpirun -np 4 mgwfbp-plan --measure --out allreduce.csv      (benchmark the live communicator)
//   mgwfbp-plan --random-trials 10000                            (optimal vs mgwfbp)
//   mgwfbp-plan --model vgg16 --batch 32 --gflops 10000 --network 10gbe --nodes 4,16,64,1024
//                                                     (a reference network; hybrid SF/dense plans)
//
// Prints one row per planner and node count: groups, predicted iteration time, non-overlapped
// communication, speedup over one node, then each planner's groups at --timeline-nodes ("sf:"
// marks a group sent as sufficient factors); with --out also writes predictions.csv, speedup.png
// and timeline.png (gnuplot). A profile with sufficient factors (sf column, or --model) adds the
// hybrid planners to the default list.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <random>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "cli_exit.h"
#include "gnuplot.h"

#include "sfb/comm/mpi_session.h"
#include "sfb/core/error.h"
#include "sfb/core/files.h"
#include "sfb/core/links.h"
#include "sfb/mgwfbp/cost_model.h"
#include "sfb/mgwfbp/planner.h"
#include "sfb/mgwfbp/profile.h"
#include "sfb/mgwfbp/simulator.h"

namespace fs = std::filesystem;
using namespace sfb::mgwfbp;

namespace {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t c = s.find(',', pos);
    out.push_back(s.substr(pos, c == std::string::npos ? std::string::npos : c - pos));
    if (c == std::string::npos) break;
    pos = c + 1;
  }
  return out;
}

// A negative start-up means the line was pulled by super-linear large sizes (caches, shared
// memory): say so instead of planning with it silently.
void warn_if_unphysical(const Fit& f) {
  if (f.model.a_us < 0 || f.model.b_us_per_byte <= 0)
    fmt::print(stderr,
               "mgwfbp-plan: warning: the fitted a = {:.2f} us, b = {:.4e} us/B is not physical; restrict the "
               "sizes (--fit-min-bytes, --max-bytes) to the range the plan will use\n",
               f.model.a_us, f.model.b_us_per_byte);
}

// The all-reduce model at n nodes for --network.
struct NetworkSpec {
  std::string spec = "10gbe";  // --network
  Algorithm algo = Algorithm::kRing;
  int64_t fit_min_bytes = 8192;
  CostModel fixed;
  bool is_fixed = false;
  bool fixed_allgather = false;  // ab: with the all-gather's own a and b (as sfbd's profile.csv gives them)
  Network net;

  void resolve() {
    if (spec.rfind("ab:", 0) == 0) {
      const auto parts = split_list(spec.substr(3));
      SFB_CHECK(parts.size() == 2 || parts.size() == 4,
                "--network ab:<a_us>,<b_us_per_byte>[,<allgather a_us>,<allgather b_us_per_byte>], got \"{}\"", spec);
      std::vector<double> v;
      for (const auto& x : parts) {
        const auto d = sfb_tools::finite_in(x, 0.0, 1e12);
        SFB_CHECK(d.has_value(), "--network {}: '{}' is not a finite number >= 0", spec, x);
        v.push_back(*d);
      }
      SFB_CHECK(v[1] > 0, "--network {}: b (us per byte) must be > 0", spec);
      fixed = {v[0], v[1]};
      if (parts.size() == 4) {
        SFB_CHECK(v[3] > 0, "--network {}: the all-gather's b (us per byte) must be > 0", spec);
        fixed.ag_a_us = v[2];
        fixed.ag_b_us_per_byte = v[3];
        fixed_allgather = true;
      }
      is_fixed = true;
    } else if (spec.rfind("fit:", 0) == 0 || spec.rfind("bcaffe:", 0) == 0) {
      const bool osu = spec.rfind("fit:", 0) == 0;
      const std::string file = spec.substr(osu ? 4 : 7);
      const Fit f = fit_cost_model(osu ? read_osu_log(file) : read_bcaffe_comm(file), osu ? fit_min_bytes : 0);
      fixed = f.model;
      is_fixed = true;
      fmt::print(
          "fit of {} over sizes >= {} B ({} points): a = {:.2f} us, b = {:.4e} us/B ({:.2f} Gbit/s), R^2 = {:.4f}\n",
          file, osu ? fit_min_bytes : 0, f.used, f.model.a_us, f.model.b_us_per_byte, 8e-3 / f.model.b_us_per_byte,
          f.r2);
      warn_if_unphysical(f);
    } else {
      net = named_network(spec);
    }
  }
  CostModel at(int n) const {
    if (!is_fixed) return alpha_beta_model(algo, n, net.alpha_us, net.beta_us_per_byte);
    if (n == 1) return CostModel{};
    if (!fixed_allgather) return with_ring_allgather(fixed, n);
    CostModel c = fixed;
    c.nodes = n;
    return c;
  }
};

void plot(const fs::path& script, const std::string& text, const std::vector<std::string>& args) {
  sfb::write_file_atomic(script.string(), text);
  const int rc = sfb_tools::run_gnuplot(script.string(), args);
  if (rc != 0)
    fmt::print(stderr, "mgwfbp-plan: gnuplot {} on {} ({}); the CSV files are still written\n",
               rc < 0 ? "is missing" : fmt::format("failed with status {}", rc), script.string(),
               "Debian: apt install gnuplot-nox");
}

// predictions.csv and speedup.png, timeline.csv and timeline.png. The scripts hold only numbers
// sfb computed; paths, the profile's name and the planner names are gnuplot's arguments
// (gnuplot.h): ARG1 the PNG, ARG2 the CSV, ARG3 a title part, ARG4 the planners separated by
// spaces (make_plan accepted each name, none has a space; gnuplot -c takes at most 9 arguments).
void write_plots(const fs::path& dir, const Profile& p, const std::vector<Prediction>& preds,
                 const std::vector<std::string>& planners, const NetworkSpec& net, int timeline_nodes) {
  std::string csv = "planner,nodes,groups,iteration_us,non_overlapped_us,speedup\n";
  for (const auto& r : preds)
    csv += fmt::format("{},{},{},{:.3f},{:.3f},{:.4f}\n", r.planner, r.nodes, r.groups, r.iteration_us,
                       r.non_overlapped_us, r.speedup);
  sfb::write_file_atomic((dir / "predictions.csv").string(), csv);
  std::vector<std::string> args{
      (dir / "speedup.png").string(), (dir / "predictions.csv").string(),
      fmt::format("{} ({})", fs::exists(p.source) ? fs::path(p.source).filename().string() : p.source, net.spec)};
  args.push_back(fmt::format("{}", fmt::join(planners, " ")));
  plot(dir / "speedup.gp",
       "set terminal pngcairo size 900,600 noenhanced\nset output ARG1\nset datafile separator ','\n"
       "set title 'Predicted speedup over one node: '.ARG3\nset xlabel 'nodes'\nset ylabel 'speedup'\n"
       "set logscale x 2\nset key left top\nset grid\n"
       "plot for [i=1:words(ARG4)] ARG2 using 2:(strcol(1) eq word(ARG4, i) ? $6 : 1/0) with linespoints "
       "title word(ARG4, i)\n",
       args);

  // timeline.png: backward compute and each group's all-reduce, one row per planner.
  const CostModel c = net.at(timeline_nodes);
  std::string boxes = "row,start_ms,end_ms,kind\n";
  int row = 0;
  for (const auto& name : planners) {
    const Timeline t = simulate(p, c, make_plan(name, p, c));
    boxes += fmt::format("{},{:.4f},{:.4f},0\n", row, p.forward_us / 1e3, (p.forward_us + t.backward_us) / 1e3);
    for (size_t g = 0; g < t.start_us.size(); ++g)
      boxes += fmt::format("{},{:.4f},{:.4f},{}\n", row, (p.forward_us + t.start_us[g]) / 1e3,
                           (p.forward_us + t.end_us[g]) / 1e3, 1 + static_cast<int>(g % 2));
    ++row;
  }
  sfb::write_file_atomic((dir / "timeline.csv").string(), boxes);
  args[0] = (dir / "timeline.png").string();
  args[1] = (dir / "timeline.csv").string();
  plot(dir / "timeline.gp",
       fmt::format("set terminal pngcairo size 1100,{} noenhanced\nset output ARG1\nset datafile separator ','\n"
                   "set title 'One iteration at {} nodes: backward (grey) and all-reduce groups (alternating "
                   "colours)'\nset xlabel 'ms (forward ends at {:.1f})'\nset ytics ()\n"
                   "do for [i=1:words(ARG4)] {{ set ytics add (word(ARG4, i) i-1) }}\nset yrange [-0.7:{}]\nunset key\n"
                   "set grid x\nplot ARG2 every ::1 using 2:($1 - ($4 == 0 ? 0.25 : -0.1)):2:3:($1 - ($4 == 0 ? "
                   "0.4 : -0.05)):($1 - ($4 == 0 ? 0.1 : -0.35)):4 with boxxyerrorbars fs solid 0.6 lc variable\n",
                   200 + 60 * row, timeline_nodes, p.forward_us / 1e3, row - 0.3),
       args);
}

// Random instances: how often and by how much optimal beats mgwfbp.
void random_trials(int trials, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> layers(2, 60);
  std::lognormal_distribution<double> tb(std::log(1000.0), 1.0), params(std::log(2e5), 2.0),
      alpha(std::log(200.0), 1.0);
  std::uniform_real_distribution<double> gbps(1.0, 100.0);
  int better = 0;
  double max_gain = 0, sum_gain = 0;
  std::vector<double> gains;
  for (int t = 0; t < trials; ++t) {
    Profile p;
    const int L = layers(rng);
    for (int l = 0; l < L; ++l)
      p.layers.push_back({"l", std::max<int64_t>(1, static_cast<int64_t>(params(rng))), tb(rng), 0});
    const CostModel c{alpha(rng), 8e-3 / gbps(rng)};
    const double opt = simulate(p, c, plan_optimal(p, c)).iteration_us;
    const double mg = simulate(p, c, plan_mgwfbp(p, c)).iteration_us;
    const double gain = mg / opt - 1.0;
    if (gain > 1e-9) {
      ++better;
      gains.push_back(gain);
      sum_gain += gain;
      max_gain = std::max(max_gain, gain);
    }
  }
  std::sort(gains.begin(), gains.end());
  fmt::print(
      "random instances: {} (L in 2..60, t_b ~ lognormal(median 1 ms), params ~ lognormal(median 2e5), "
      "a ~ lognormal(median 200 us), 1..100 Gbit/s)\n",
      trials);
  fmt::print(
      "optimal beats mgwfbp on {} ({:.2f}%); mgwfbp/optimal iteration time: mean +{:.3f}% over those, "
      "median +{:.3f}%, max +{:.3f}%\n",
      better, 100.0 * better / trials, better ? 100 * sum_gain / better : 0.0,
      gains.empty() ? 0.0 : 100 * gains[gains.size() / 2], 100 * max_gain);
}

std::vector<int> parse_nodes(const std::string& arg) {
  std::vector<int> nodes;
  for (const auto& s : split_list(arg)) {
    const auto n = sfb_tools::integer_in<int>(s, 1, 1 << 20);
    SFB_CHECK(n.has_value(), "--nodes: '{}' is not a node count in [1, 1048576]", s);
    nodes.push_back(*n);
  }
  SFB_CHECK(!nodes.empty(), "--nodes: no node count in '{}'", arg);
  return nodes;
}

// --measure: times MPI_Allreduce on the live communicator, prints (and writes) an OSU-style log
// and the fitted a, b.
int measure_main(int& argc, char**& argv, const sfb::comm::MpiAllreduceBench& bench, int64_t fit_min_bytes,
                 const std::string& out) {
  sfb::comm::MpiSession mpi(argc, argv, sfb::comm::MpiSession::Threads::kSerialized);
  const auto timed = mpi.measure_allreduce(bench);
  if (mpi.rank() != 0) return 0;
  std::vector<Sample> samples;
  std::string text = fmt::format(
      "# MPI_Allreduce float sum, {} ranks, median of {} (slowest rank per call)\n"
      "# Size       Avg Latency(us)\n",
      mpi.size(), bench.repeats);
  for (const auto& s : timed) {
    samples.push_back({s.bytes, s.us});
    text += fmt::format("{},{} {:.3f}\n", mpi.size(), s.bytes, s.us);
  }
  if (!out.empty()) sfb::write_file_atomic(out, text);
  fmt::print("{}", text);
  const Fit f = fit_cost_model(samples, fit_min_bytes);
  fmt::print("fit over sizes >= {} B: a = {:.2f} us, b = {:.4e} us/B, R^2 = {:.4f}\n", fit_min_bytes, f.model.a_us,
             f.model.b_us_per_byte, f.r2);
  warn_if_unphysical(f);
  return 0;
}

}  // namespace

// mgwfbp-plan's arguments.
struct Args {
  std::string profile_path, bcaffe_log, model, nodes_arg = "2,4,8,16,32,64", planners_arg, out_dir, algo = "ring";
  int64_t batch = 32;
  double gflops = 10000;
  NetworkSpec net;
  double forward_ms = -1, forward_ratio = 0.5;
  bool measure = false;
  int trials = 0, timeline_nodes = 0;
  uint64_t seed = 1;
  sfb::comm::MpiAllreduceBench bench;
};

void add_options(CLI::App& app, Args& a) {
  app.add_option("--profile", a.profile_path,
                 "Layer profile CSV (name,params,t_b[,t_f][,sf,t_sf]; sfbd's profile.csv)");
  app.add_option("--bcaffe-log", a.bcaffe_log, "B-Caffe print_overheads log (last 128 rows)");
  app.add_option("--model", a.model, "A reference network from its layer shapes: alexnet | vgg16");
  app.add_option("--batch", a.batch, "--model: images per rank (default 32)")
      ->check(sfb_tools::Integer<int64_t>(1, 1 << 20));
  app.add_option("--gflops", a.gflops, "--model: compute rate that turns FLOPs into times (default 10000)")
      ->check(sfb_tools::Finite(1e-6, 1e12));
  app.add_option("--forward-ms", a.forward_ms, "Forward time of one iteration (overrides the profile's t_f)")
      ->check(sfb_tools::Finite(0, 1e9));
  app.add_option("--forward-ratio", a.forward_ratio,
                 "Forward = ratio * backward when the profile has no t_f (default 0.5)")
      ->check(sfb_tools::Finite(0, 1e6));
  app.add_option("--network", a.net.spec,
                 fmt::format("{} (named links, as in sfb-plan) | fit:OSU_LOG | bcaffe:LOG (per-layer comm times) | "
                             "ab:<a_us>,<b_us_per_byte>[,<allgather a_us>,<allgather b_us_per_byte>]",
                             fmt::join(sfb::link_names(), " | ")));
  app.add_option("--algo", a.algo, "All-reduce algorithm for a named link's extrapolation: ring | rd | tree");
  app.add_option("--fit-min-bytes", a.net.fit_min_bytes, "fit: use sizes >= this (default 8192)")
      ->check(sfb_tools::Integer<int64_t>(0, int64_t{1} << 40));
  app.add_option("--nodes", a.nodes_arg, "Node counts, comma separated");
  app.add_option("--planners", a.planners_arg,
                 "Planners, comma separated (default: wfbp,synceasgd,mgwfbp,optimal,ddp,horovod:64)");
  app.add_option("--out", a.out_dir, "Directory for predictions.csv and PNG plots; with --measure, the CSV file");
  app.add_option("--timeline-nodes", a.timeline_nodes,
                 "Node count of the timeline plot and the groups listing (default 8 when --nodes has it, else "
                 "the last of --nodes)")
      ->check(sfb_tools::Integer<int>(1, 1 << 20));
  app.add_flag("--measure", a.measure, "Benchmark MPI_Allreduce on the live communicator (run under mpirun)");
  app.add_option("--max-bytes", a.bench.max_bytes, "--measure: largest message (default 64 MiB)")
      ->check(sfb_tools::Integer<int64_t>(4, int64_t{1} << 34));
  app.add_option("--repeats", a.bench.repeats, "--measure: timed calls per size (median kept)")
      ->check(sfb_tools::Integer<int>(1, 1000000));
  app.add_option("--random-trials", a.trials, "Compare optimal and mgwfbp on this many random instances")
      ->check(sfb_tools::Integer<int>(0, 1000000));
  app.add_option("--seed", a.seed, "Seed of --random-trials")->check(sfb_tools::Seed());
}

int main(int argc, char** argv) {
  CLI::App app{"mgwfbp-plan: MG-WFBP planners, all-reduce cost model and cluster simulator"};
  Args a;
  add_options(app, a);
  if (const auto code = sfb_tools::parse_args(app, argc, argv)) return *code;

  try {
    if (a.measure) {
      if (!a.out_dir.empty()) sfb::prepare_output_file(a.out_dir, "--out");  // the CSV, before any timing
      return measure_main(argc, argv, a.bench, a.net.fit_min_bytes, a.out_dir);
    }
    if (a.trials > 0) {
      random_trials(a.trials, a.seed);
      return 0;
    }
    SFB_CHECK(a.profile_path.empty() + a.bcaffe_log.empty() + a.model.empty() == 2,
              "give exactly one of --profile, --bcaffe-log and --model");
    Profile p = !a.model.empty()          ? reference_profile(a.model, a.batch, a.gflops)
                : !a.profile_path.empty() ? read_profile_csv(a.profile_path)
                                          : read_bcaffe_log(a.bcaffe_log);
    if (a.forward_ms >= 0)
      p.forward_us = a.forward_ms * 1e3;
    else if (p.forward_us == 0)
      p.forward_us = a.forward_ratio * p.backward_us();
    a.net.algo = parse_algorithm(a.algo);
    a.net.resolve();
    const auto nodes = parse_nodes(a.nodes_arg);
    if (a.timeline_nodes <= 0)
      a.timeline_nodes = std::find(nodes.begin(), nodes.end(), 8) != nodes.end() ? 8 : nodes.back();
    const auto planners = app.count("--planners") == 0 ? planner_names(p) : split_list(a.planners_arg);
    // Every planner name and the output directory are checked before anything is printed.
    for (const auto& name : planners) {
      SFB_CHECK(!name.empty(), "--planners \"{}\": an empty planner name", a.planners_arg);
      make_plan(name, p, a.net.at(a.timeline_nodes));
    }
    if (!a.out_dir.empty()) {
      sfb::create_directories(a.out_dir);
      sfb::check_writable_directory(a.out_dir, "--out");
    }
    fmt::print(
        "profile {}: {} layers, {:.2f} M params ({:.1f} MiB), forward {:.2f} ms, backward {:.2f} ms; network {}{}\n",
        p.source, p.size(), p.total_params() / 1e6, p.total_params() * 4.0 / (1 << 20), p.forward_us / 1e3,
        p.backward_us() / 1e3, a.net.spec,
        a.net.is_fixed ? " (a, b used for every node count)" : " (" + a.algo + " all-reduce)");
    const auto preds = predict(p, planners, nodes, [&](int n) { return a.net.at(n); });
    fmt::print("\n{:>6} {:<15} {:>7} {:>14} {:>16} {:>9}\n", "nodes", "planner", "groups", "iteration ms",
               "non-overlap ms", "speedup");
    for (const auto& r : preds)
      fmt::print("{:>6} {:<15} {:>7} {:>14.2f} {:>16.2f} {:>9.2f}\n", r.nodes, r.planner, r.groups,
                 r.iteration_us / 1e3, r.non_overlapped_us / 1e3, r.speedup);
    const CostModel tc = a.net.at(a.timeline_nodes);
    fmt::print("\ngroups at {} nodes (backward order; sf: sent as sufficient factors):\n", a.timeline_nodes);
    for (const auto& name : planners) {
      const Plan plan = make_plan(name, p, tc);
      int64_t bytes = 0;
      for (const auto& g : plan)
        for (int l = g.lo; l <= g.hi; ++l) bytes += 4 * (g.sf ? p.layers[l].sf_floats : p.layers[l].params);
      fmt::print("  {:<14} {:>8.2f} MiB per rank  {}\n", name, bytes / double(1 << 20), describe(plan, p));
    }
    if (!a.out_dir.empty()) {
      write_plots(a.out_dir, p, preds, planners, a.net, a.timeline_nodes);
      fmt::print("\nwrote {}/predictions.csv, speedup.png, timeline.png\n", a.out_dir);
    }
  } catch (const sfb::Error& e) {
    fmt::print(stderr, "mgwfbp-plan: error: {}\n", e.what());
    return 2;
  }
  return 0;
}
