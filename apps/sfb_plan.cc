// sfb-plan: which communication scheme wins for this matrix model on this cluster, or on one we
// don't have. From a scheme profile that sfbd measured on the job (sfbd --profile FILE, or the
// "profile" of a comm.scheme = "auto" run's summary.json), predicts seconds per clock, bytes per
// clock and time to target of SFB full broadcast, Halton, FMS and the all-reduce at N nodes on named
// or fitted links (sfb/predict/scheme_model.h has the model and what it ignores), and the
// crossovers: the N, and the link rate, at which the winner changes.
//
//   sfb-plan --profile p.json [--nodes 4,8,...,1024] [--links fitted,1gbe,10gbe,25gbe,100gbe]
//            [--schemes sfb,halton,fms:1,allreduce] [--one-host] [--clocks C] [--csv out.csv]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli_exit.h"
#include "sfb/core/error.h"
#include "sfb/core/files.h"
#include "sfb/core/json.h"
#include "sfb/core/strings.h"
#include "sfb/predict/scheme_model.h"

namespace {

using sfb::predict::Link;
using sfb::predict::Prediction;
using sfb::predict::Scheme;
using sfb::predict::SchemeProfile;

struct Options {
  std::string profile, nodes = "4,8,16,32,64,128,256,512,1024", links = "fitted,1gbe,10gbe,25gbe,100gbe",
                       schemes = "sfb,halton,fms:1,allreduce", csv;
  bool one_host = false;
  double clocks = -1;
  int at = 0;  // the N of the link-rate crossover (default: the profile's workers)
};

// A profile file, or a summary.json of comm.scheme = "auto" (its "auto.profile").
SchemeProfile load_profile(const std::string& path) {
  const sfb::Bytes b = sfb::read_file(path, "--profile");
  const auto j =
      sfb::parse_json(std::string_view(reinterpret_cast<const char*>(b.data()), b.size()), "--profile " + path);
  if (j.contains("auto") && j["auto"].is_object() && j["auto"].contains("profile"))
    return sfb::predict::profile_from_json(j["auto"]["profile"], path + " (auto.profile)");
  return sfb::predict::profile_from_json(j, path);
}

std::vector<int> parse_nodes(const std::string& list) {
  std::vector<int> out;
  for (const auto& s : sfb::split_trimmed(list, ',')) {
    char* end = nullptr;
    const long v = std::strtol(s.c_str(), &end, 10);
    SFB_CHECK(!s.empty() && *end == '\0' && v >= 2 && v <= (1 << 20), "--nodes: \"{}\" is not a node count >= 2", s);
    out.push_back(static_cast<int>(v));
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
std::string rate_crossovers(const SchemeProfile& p, const std::vector<Scheme>& schemes, int N, int per_host) {
  std::string out, prev;
  for (double g = 0.1; g <= 400; g *= std::pow(2.0, 0.25)) {
    const Link l{"", p.link.a_us, 8e-3 / g};
    std::vector<Prediction> rows;
    for (const auto& s : schemes) rows.push_back(sfb::predict::predict(p, s, {N, l, per_host, false}));
    const std::string best = fastest(rows)->scheme;
    if (!prev.empty() && best != prev) out += fmt::format("  {} -> {} at {:.3g} Gbit/s\n", prev, best, g);
    prev = best;
  }
  return out.empty() ? fmt::format("  {} wins from 0.1 to 400 Gbit/s\n", prev) : out;
}

int run(int argc, char** argv) {
  CLI::App app{"sfb-plan: predicts SFB, Halton, FMS and the all-reduce for a matrix model at N nodes"};
  Options o;
  app.add_option("--profile", o.profile, "Scheme profile (sfbd --profile FILE) or an auto run's summary.json")
      ->required();
  app.add_option("--nodes", o.nodes, "Comma list of node counts (workers; FMS adds its servers)");
  app.add_option(
      "--links", o.links,
      fmt::format("Comma list of links: fitted (the profile's), {}", fmt::join(sfb::predict::named_links(), ", ")));
  app.add_option("--schemes", o.schemes,
                 "Comma list of sfb, halton[:Q], fms[:S] (fms:n: a server per node), allreduce");
  app.add_flag("--one-host", o.one_host,
               "Every rank on the profiled host, sharing its cores (the netns cluster); default: a node each");
  app.add_option("--clocks", o.clocks, "Clocks to the target objective (from a measured run): time to target")
      ->check(CLI::Range(1.0, 1e15));  // NaN passes a range: checked again below
  app.add_option("--at", o.at, "N of the link-rate crossover (default: the profile's workers)");
  app.add_option("--csv", o.csv, "Also write every prediction as CSV");
  if (const auto code = sfb_tools::parse_args(app, argc, argv, true)) return *code;
  const SchemeProfile p = load_profile(o.profile);
  const auto nodes = parse_nodes(o.nodes);
  std::vector<Scheme> schemes;
  for (const auto& s : sfb::split_trimmed(o.schemes, ',')) schemes.push_back(sfb::predict::parse_scheme(s));
  SFB_CHECK(!schemes.empty(), "--schemes is empty");
  SFB_CHECK(app.count("--clocks") == 0 || (std::isfinite(o.clocks) && o.clocks >= 1),
            "--clocks must be a finite number of clocks >= 1, got {}", o.clocks);
  SFB_CHECK(!sfb::split_trimmed(o.links, ',').empty(), "--links is empty: name at least one link (fitted, {})",
            fmt::join(sfb::predict::named_links(), ", "));
  for (const auto& lname : sfb::split_trimmed(o.links, ',')) link_of(lname, p);  // every name, before any output
  const int per_host = o.one_host ? 0 : 1;
  fmt::print(
      "# sfb-plan: {} ({}), W {} x {}, K = {}, {} v; profiled on {} workers ({} ranks on {} cores, "
      "contention {:.2f}); fitted link {:.0f} us + {:.3f} Gbit/s\n",
      p.config, p.model, p.J, p.D, p.K, p.sparse_v ? fmt::format("sparse ({:.1f} nnz)", p.v_nonzeros) : "dense",
      p.workers, p.ranks_on_host, p.cores, p.contention(), p.link.a_us, 8e-3 / p.link.b_us_per_byte);
  fmt::print("# compute and update {}\n\n",
             o.one_host ? "scaled to every rank sharing the profiled host's cores" : "at one rank per node");
  std::string csv =
      "link,nodes,scheme,q,servers,clock_s,compute_s,comm_s,update_s,bytes_per_clock,link_bytes,"
      "time_to_target_s,winner\n";
  for (const auto& lname : sfb::split_trimmed(o.links, ',')) {
    const Link link = link_of(lname, p);
    fmt::print("## {} ({:.0f} us + {:.3g} Gbit/s)\n\n", lname, link.a_us, 8e-3 / link.b_us_per_byte);
    fmt::print(
        "| N | scheme | s/clock | compute | network | update | MB/clock | busiest link MB | time to target s |\n");
    fmt::print("|---|---|---|---|---|---|---|---|---|\n");
    std::vector<std::string> winners;
    for (int n : nodes) {
      std::vector<Prediction> rows;
      for (const auto& s : schemes)
        rows.push_back(sfb::predict::predict(p, s, {n, link, per_host, lname == "fitted"}, o.clocks));
      const Prediction* best = fastest(rows);
      for (const auto& r : rows) {
        fmt::print("| {} | {}{} | {} | {} | {} | {} | {:.4g} | {:.4g} | {} |\n", n, r.scheme,
                   &r == best ? " **(fastest)**" : "", seconds(r.clock_s), seconds(r.compute_s), seconds(r.comm_s),
                   seconds(r.update_s), r.bytes_per_clock / 1e6, r.link_bytes_per_clock / 1e6,
                   seconds(r.time_to_target_s));
        csv += fmt::format("{},{},{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{}\n", lname, n, r.scheme,
                           r.q, r.servers, r.clock_s, r.compute_s, r.comm_s, r.update_s, r.bytes_per_clock,
                           r.link_bytes_per_clock, r.time_to_target_s, &r == best ? 1 : 0);
      }
      winners.push_back(fmt::format("{}: {}", n, best->scheme));
    }
    fmt::print("\nwinner by N: {}\n", fmt::join(winners, ", "));
    const auto cross = sfb::predict::crossovers(p, schemes, nodes, link, per_host);
    if (cross.empty()) fmt::print("crossover in N: none over {}..{}\n", nodes.front(), nodes.back());
    for (const auto& c : cross) fmt::print("crossover in N: {} -> {} at N = {}\n", c.from, c.to, c.nodes);
    fmt::print("\n");
  }
  const int N = o.at > 0 ? o.at : std::max(2, p.workers);
  fmt::print("## crossover in link rate at N = {} (start-up {:.0f} us)\n\n{}", N, p.link.a_us,
             rate_crossovers(p, schemes, N, per_host));
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
