#include "sfb/mgwfbp/profile.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sfb/core/error.h"
#include "sfb/core/files.h"
#include "sfb/core/strings.h"

namespace sfb::mgwfbp {

double Profile::backward_us() const {
  double s = 0;
  for (const auto& l : layers) s += l.t_b_us;
  return s;
}

bool Profile::has_factors() const {
  return std::any_of(layers.begin(), layers.end(), [](const LayerTiming& l) { return l.sf_floats > 0; });
}

int64_t Profile::total_params() const {
  int64_t s = 0;
  for (const auto& l : layers) s += l.params;
  return s;
}

namespace {

double parse_double(const std::string& tok, const std::string& where, const char* field) {
  double v = 0;
  auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
  SFB_CHECK_DATA(ec == std::errc() && p == tok.data() + tok.size() && std::isfinite(v) && v >= 0,
                 "{}: {} '{}' is not a finite number >= 0", where, field, tok);
  return v;
}

int64_t parse_int(const std::string& tok, const std::string& where, const char* field) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
  SFB_CHECK_DATA(ec == std::errc() && p == tok.data() + tok.size() && v >= 0, "{}: {} '{}' is not an integer >= 0",
                 where, field, tok);
  return v;
}

}  // namespace

Profile read_profile_csv(const std::string& path) {
  Profile p;
  p.source = path;
  bool header = false, has_tf = false, has_sf = false;
  size_t columns = 0;
  for_each_line(path, "profile", [&](const std::string& line, int lineno) {
    const auto cols = split_trimmed(line, ',');
    const std::string where = fmt::format("{}:{}", path, lineno);
    if (!header) {
      const std::string h = fmt::format("{}", fmt::join(cols, ","));
      SFB_CHECK_DATA(h == "name,params,t_b" || h == "name,params,t_b,t_f" || h == "name,params,t_b,sf,t_sf" ||
                         h == "name,params,t_b,t_f,sf,t_sf",
                     "{}: header must be 'name,params,t_b[,t_f][,sf,t_sf]', got '{}'", where, line);
      header = true;
      columns = cols.size();
      has_tf = cols.size() == 4 || cols.size() == 6;
      has_sf = cols.size() >= 5;
      return;
    }
    SFB_CHECK_DATA(cols.size() == columns, "{}: expected {} columns, got {}", where, columns, cols.size());
    LayerTiming l;
    l.name = cols[0];
    l.params = parse_int(cols[1], where, "params");
    l.t_b_us = parse_double(cols[2], where, "t_b");
    if (has_tf) l.t_f_us = parse_double(cols[3], where, "t_f");
    if (has_sf) {
      l.sf_floats = parse_int(cols[columns - 2], where, "sf");
      l.t_sf_us = parse_double(cols[columns - 1], where, "t_sf");
    }
    p.forward_us += l.t_f_us;
    p.layers.push_back(std::move(l));
  });
  SFB_CHECK_DATA(header, "{}: empty profile (no header)", path);
  SFB_CHECK_DATA(!p.layers.empty(), "{}: profile has no layers", path);
  return p;
}

namespace {

struct Shape {
  std::string name;
  int64_t in = 0, out = 0, k = 0, hw = 0;  // conv: in -> out channels, k x k, output hw x hw; fc: k = 0
};

std::vector<Shape> reference_shapes(const std::string& model) {
  if (model == "alexnet")
    return {{"conv1", 3, 64, 11, 55},   {"conv2", 64, 192, 5, 27},  {"conv3", 192, 384, 3, 13},
            {"conv4", 384, 256, 3, 13}, {"conv5", 256, 256, 3, 13}, {"fc6", 9216, 4096, 0, 1},
            {"fc7", 4096, 4096, 0, 1},  {"fc8", 4096, 1000, 0, 1}};
  if (model == "vgg16")
    return {{"conv1_1", 3, 64, 3, 224},    {"conv1_2", 64, 64, 3, 224},  {"conv2_1", 64, 128, 3, 112},
            {"conv2_2", 128, 128, 3, 112}, {"conv3_1", 128, 256, 3, 56}, {"conv3_2", 256, 256, 3, 56},
            {"conv3_3", 256, 256, 3, 56},  {"conv4_1", 256, 512, 3, 28}, {"conv4_2", 512, 512, 3, 28},
            {"conv4_3", 512, 512, 3, 28},  {"conv5_1", 512, 512, 3, 14}, {"conv5_2", 512, 512, 3, 14},
            {"conv5_3", 512, 512, 3, 14},  {"fc6", 25088, 4096, 0, 1},   {"fc7", 4096, 4096, 0, 1},
            {"fc8", 4096, 1000, 0, 1}};
  throw InvalidArgument(fmt::format("reference model must be alexnet or vgg16, got \"{}\"", model));
}

}  // namespace

Profile reference_profile(const std::string& model, int64_t batch, double gflops) {
  SFB_CHECK(batch >= 1 && gflops > 0, "reference profile: batch {} and GFLOP/s {} must be positive", batch, gflops);
  Profile p;
  p.source = fmt::format("{} (batch {}, {} GFLOP/s)", model, batch, gflops);
  const double us_per_flop = 1e-3 / gflops;
  for (const auto& s : reference_shapes(model)) {
    const int64_t weights = s.k > 0 ? s.out * s.in * s.k * s.k : s.out * s.in;
    const double fwd = 2.0 * static_cast<double>(weights) * static_cast<double>(s.hw * s.hw * batch);
    LayerTiming l{s.name, weights + s.out, 2 * fwd * us_per_flop, fwd * us_per_flop};
    if (s.k == 0) {
      l.sf_floats = batch * (s.out + s.in);
      l.t_sf_us = fwd * us_per_flop;  // 2 batch out in: the forward GEMM's FLOPs
    }
    p.forward_us += l.t_f_us;
    p.layers.push_back(std::move(l));
  }
  return p;
}

void write_profile_csv(const std::string& path, const Profile& p, const std::string& comment) {
  const bool sf = p.has_factors();
  std::string out;
  for (const auto& line : split_trimmed(comment, '\n'))
    if (!line.empty()) out += "# " + line + "\n";
  out += sf ? "name,params,t_b,t_f,sf,t_sf\n" : "name,params,t_b,t_f\n";
  for (const auto& l : p.layers) {
    out += fmt::format("{},{},{:.6g},{:.6g}", l.name, l.params, l.t_b_us, l.t_f_us);
    out += sf ? fmt::format(",{},{:.6g}\n", l.sf_floats, l.t_sf_us) : "\n";
  }
  write_file_atomic(path, out);
}

namespace {

struct BcaffeRow {
  int64_t id, size;
  double compute, comm;
  int lineno;
};

// The last 128 "[id, size, compute, comm(, merged)]" rows of a B-Caffe log.
std::vector<BcaffeRow> read_bcaffe_rows(const std::string& path) {
  std::vector<BcaffeRow> rows;
  for_each_line(path, "B-Caffe log", [&](const std::string& line, int lineno) {
    const auto open = line.find("] [");
    const auto close = line.rfind(']');
    if (open == std::string::npos || close == std::string::npos || close <= open + 3) return;
    const auto cols = split_trimmed(line.substr(open + 3, close - open - 3), ',');
    const std::string where = fmt::format("{}:{}", path, lineno);
    SFB_CHECK_DATA(cols.size() >= 4, "{}: expected [id, size, compute, comm, ...], got {} fields", where, cols.size());
    rows.push_back({parse_int(cols[0], where, "param id"), parse_int(cols[1], where, "size"),
                    parse_double(cols[2], where, "compute time"), parse_double(cols[3], where, "comm time"), lineno});
  });
  constexpr size_t kBlock = 128;
  SFB_CHECK_DATA(rows.size() >= kBlock, "{}: {} profile rows, need a block of {}", path, rows.size(), kBlock);
  rows.erase(rows.begin(), rows.end() - kBlock);
  for (size_t i = 0; i < kBlock; i += 2) {
    SFB_CHECK_DATA(rows[i].id == static_cast<int64_t>(i) && rows[i + 1].id == static_cast<int64_t>(i + 1),
                   "{}:{}: expected param ids {} and {} (weight, bias), got {} and {}", path, rows[i].lineno, i, i + 1,
                   rows[i].id, rows[i + 1].id);
  }
  return rows;
}

}  // namespace

std::vector<Sample> read_bcaffe_comm(const std::string& path) {
  const auto rows = read_bcaffe_rows(path);
  std::vector<Sample> out;
  for (size_t i = 0; i < rows.size(); i += 2) {
    // Newer logs attribute a layer's communication to its weight row (bias 0); older ones time
    // weight and bias separately.
    if (rows[i + 1].comm == 0)
      out.push_back({(rows[i].size + rows[i + 1].size) * 4, rows[i].comm});
    else {
      out.push_back({rows[i].size * 4, rows[i].comm});
      out.push_back({rows[i + 1].size * 4, rows[i + 1].comm});
    }
  }
  return out;
}

Profile read_bcaffe_log(const std::string& path) {
  const auto rows = read_bcaffe_rows(path);
  Profile p;
  p.source = path;
  for (size_t i = 0; i < rows.size(); i += 2)
    p.layers.push_back({fmt::format("layer{}", i / 2), rows[i].size + rows[i + 1].size, rows[i].compute, 0.0, 0, 0.0});
  return p;
}

}  // namespace sfb::mgwfbp
