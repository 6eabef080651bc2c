#include "sfb/mgwfbp/cost_model.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "sfb/core/error.h"
#include "sfb/core/files.h"
#include "sfb/core/fit.h"
#include "sfb/core/links.h"

namespace sfb::mgwfbp {

Fit fit_cost_model(const std::vector<Sample>& samples, int64_t min_bytes) {
  std::vector<double> x, y;
  for (const auto& s : samples) {
    if (s.bytes < min_bytes) continue;
    x.push_back(static_cast<double>(s.bytes));
    y.push_back(s.us);
  }
  SFB_CHECK(x.size() >= 2, "fitting T = a + b*M needs at least 2 samples with >= {} bytes, got {}", min_bytes,
            x.size());
  SFB_CHECK(std::any_of(x.begin(), x.end(), [&](double v) { return v != x.front(); }),
            "fitting T = a + b*M needs at least two different message sizes");
  const LineFit l = fit_line(x, y);
  Fit f;
  f.model.a_us = l.a;
  f.model.b_us_per_byte = l.b;
  f.r2 = l.r2;
  f.used = l.used;
  return f;
}

std::vector<Sample> read_osu_log(const std::string& path) {
  std::vector<Sample> out;
  for_each_line(path, "OSU log", [&](const std::string& line, int lineno) {
    // "N,bytes latency": the node count prefix is dropped.
    const auto comma = line.find(',');
    std::istringstream ss(comma == std::string::npos ? line : line.substr(comma + 1));
    double bytes = 0, us = 0;
    SFB_CHECK_DATA(static_cast<bool>(ss >> bytes >> us) && bytes >= 0 && us >= 0 && std::isfinite(us),
                   "{}:{}: expected 'bytes latency_us', got '{}'", path, lineno, line);
    out.push_back({static_cast<int64_t>(bytes), us});
  });
  SFB_CHECK_DATA(!out.empty(), "{}: no measurements", path);
  return out;
}

Algorithm parse_algorithm(const std::string& name) {
  if (name == "ring") return Algorithm::kRing;
  if (name == "rd") return Algorithm::kRecursiveDoubling;
  if (name == "tree") return Algorithm::kTree;
  throw InvalidArgument(fmt::format("all-reduce algorithm must be ring, rd or tree, got \"{}\"", name));
}

CostModel alpha_beta_model(Algorithm algo, int nodes, double alpha_us, double beta_us_per_byte) {
  SFB_CHECK(nodes >= 1, "nodes must be >= 1, got {}", nodes);
  if (nodes == 1) return {};
  const double n = nodes;
  const double lg = std::ceil(std::log2(n));
  const double ag_b = (n - 1) * beta_us_per_byte;
  switch (algo) {
    case Algorithm::kRing:
      return {2 * (n - 1) * alpha_us, 2 * (n - 1) / n * beta_us_per_byte, (n - 1) * alpha_us, ag_b, nodes};
    case Algorithm::kRecursiveDoubling: return {lg * alpha_us, lg * beta_us_per_byte, lg * alpha_us, ag_b, nodes};
    case Algorithm::kTree: return {2 * lg * alpha_us, 2 * lg * beta_us_per_byte, (n - 1) * alpha_us, ag_b, nodes};
  }
  return {};
}

CostModel with_ring_allgather(CostModel c, int nodes) {
  c.nodes = nodes;
  c.ag_a_us = nodes > 1 ? c.a_us / 2 : 0.0;
  c.ag_b_us_per_byte = nodes > 1 ? c.b_us_per_byte * nodes / 2 : 0.0;
  return c;
}

Network named_network(const std::string& name) {
  if (name == "fitted")  // sfb-plan's name for a profile's own link: mgwfbp-plan fits with fit:FILE
    throw InvalidArgument("network \"fitted\": give the measurements to fit as fit:FILE");
  try {
    const NamedLink& l = find_link(name);
    return {l.name, l.a_us, l.b_us_per_byte};
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(
        fmt::format("network must be a named link, fit:FILE or ab:<a_us>,<b_us_per_byte>: {}", e.what()));
  }
}

}  // namespace sfb::mgwfbp
