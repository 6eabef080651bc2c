#include "sfb/mgwfbp/profile.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "sfb/core/error.h"
#include "sfb/core/files.h"
#include "sfb/core/strings.h"

namespace sfb::mgwfbp {

double Profile::backward_us() const {
  double s = 0;
  for (const auto& l : layers) s += l.t_b_us;
  return s;
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
  bool header = false, has_tf = false;
  for_each_line(path, "profile", [&](const std::string& line, int lineno) {
    const auto cols = split_trimmed(line, ',');
    const std::string where = fmt::format("{}:{}", path, lineno);
    if (!header) {
      SFB_CHECK_DATA((cols.size() == 3 || cols.size() == 4) && cols[0] == "name" && cols[1] == "params" &&
                         cols[2] == "t_b" && (cols.size() == 3 || cols[3] == "t_f"),
                     "{}: header must be 'name,params,t_b' or 'name,params,t_b,t_f', got '{}'", where, line);
      header = true;
      has_tf = cols.size() == 4;
      return;
    }
    SFB_CHECK_DATA(cols.size() == (has_tf ? 4u : 3u), "{}: expected {} columns, got {}", where, has_tf ? 4 : 3,
                   cols.size());
    Layer l;
    l.name = cols[0];
    l.params = parse_int(cols[1], where, "params");
    l.t_b_us = parse_double(cols[2], where, "t_b");
    if (has_tf) l.t_f_us = parse_double(cols[3], where, "t_f");
    p.forward_us += l.t_f_us;
    p.layers.push_back(std::move(l));
  });
  SFB_CHECK_DATA(header, "{}: empty profile (no header)", path);
  SFB_CHECK_DATA(!p.layers.empty(), "{}: profile has no layers", path);
  return p;
}

void write_profile_csv(const std::string& path, const Profile& p) {
  std::string out = "name,params,t_b,t_f\n";
  for (const auto& l : p.layers) out += fmt::format("{},{},{:.6g},{:.6g}\n", l.name, l.params, l.t_b_us, l.t_f_us);
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
    p.layers.push_back({fmt::format("layer{}", i / 2), rows[i].size + rows[i + 1].size, rows[i].compute, 0.0});
  return p;
}

}  // namespace sfb::mgwfbp
