#include "sfb/io/libsvm_reader.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string_view>
#include <vector>

#include "sfb/core/error.h"

namespace sfb::io {
namespace {

bool is_data_line(std::string_view s) {
  const size_t p = s.find_first_not_of(" \t\r");
  return p != std::string_view::npos && s[p] != '#';
}

std::ifstream open(const std::string& path) {
  std::ifstream in(path);
  SFB_CHECK_DATA(in.good(), "{}: cannot open: {}", path, std::strerror(errno));
  return in;
}

}  // namespace

int64_t count_libsvm_rows(const std::string& path) {
  auto in = open(path);
  std::string line;
  int64_t rows = 0;
  while (std::getline(in, line)) rows += is_data_line(line) ? 1 : 0;
  return rows;
}

Dataset read_libsvm(const std::string& path, const LibsvmOptions& opt, int64_t begin, int64_t end) {
  auto in = open(path);
  return parse_libsvm(in, path, opt, begin, end);
}

Dataset parse_libsvm(std::istream& in, const std::string& path, const LibsvmOptions& opt, int64_t begin, int64_t end) {
  SFB_ENFORCE(opt.features > 0 && opt.classes > 0, "features {} classes {}", opt.features, opt.classes);
  std::vector<int32_t> labels;
  std::vector<int32_t> row_ptr{0};
  std::vector<int32_t> cols;
  std::vector<float> vals;
  std::string line;
  int64_t lineno = 0;
  int64_t row = -1;
  while (std::getline(in, line)) {
    ++lineno;
    if (!is_data_line(line)) continue;
    ++row;
    if (row < begin) continue;
    if (end >= 0 && row >= end) break;
    std::string_view s(line);
    if (auto hash = s.find('#'); hash != std::string_view::npos) s = s.substr(0, hash);
    size_t pos = 0;
    auto next_token = [&]() -> std::string_view {
      while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\t' || s[pos] == '\r')) ++pos;
      const size_t start = pos;
      while (pos < s.size() && s[pos] != ' ' && s[pos] != '\t' && s[pos] != '\r') ++pos;
      return s.substr(start, pos - start);
    };
    const std::string_view lab = next_token();
    double label_value = 0;
    auto [lp, lec] = std::from_chars(lab.data(), lab.data() + lab.size(), label_value);
    SFB_CHECK_DATA(lec == std::errc() && lp == lab.data() + lab.size() && label_value == std::floor(label_value),
                   "{}:{}: label '{}' is not an integer", path, lineno, lab);
    // Range-check in double first: casting a huge label to int64 is undefined (found by fuzz_libsvm).
    const double shifted = label_value - static_cast<double>(opt.label_offset);
    SFB_CHECK_DATA(shifted >= 0 && shifted < static_cast<double>(opt.classes),
                   "{}:{}: label {} minus data.label_offset {} is outside [0, {})", path, lineno, lab, opt.label_offset,
                   opt.classes);
    const int64_t label = static_cast<int64_t>(shifted);
    SFB_CHECK_DATA(label >= 0 && label < opt.classes,
                   "{}:{}: label {} minus data.label_offset {} = {} is outside [0, {})", path, lineno, lab,
                   opt.label_offset, label, opt.classes);
    labels.push_back(static_cast<int32_t>(label));
    int64_t prev = 0;
    for (std::string_view tok = next_token(); !tok.empty(); tok = next_token()) {
      const size_t colon = tok.find(':');
      SFB_CHECK_DATA(colon != std::string_view::npos, "{}:{}: token '{}' is not index:value", path, lineno, tok);
      int64_t idx = 0;
      float val = 0;
      auto [ip, iec] = std::from_chars(tok.data(), tok.data() + colon, idx);
      SFB_CHECK_DATA(iec == std::errc() && ip == tok.data() + colon, "{}:{}: index '{}' is not an integer", path,
                     lineno, tok.substr(0, colon));
      auto [vp, vec] = std::from_chars(tok.data() + colon + 1, tok.data() + tok.size(), val);
      SFB_CHECK_DATA(vec == std::errc() && vp == tok.data() + tok.size() && std::isfinite(val),
                     "{}:{}: value '{}' is not a finite number", path, lineno, tok.substr(colon + 1));
      SFB_CHECK_DATA(idx >= 1 && idx <= opt.features, "{}:{}: feature index {} is outside [1, {}] (data.features)",
                     path, lineno, idx, opt.features);
      SFB_CHECK_DATA(idx > prev, "{}:{}: feature index {} does not increase (after {})", path, lineno, idx, prev);
      prev = idx;
      cols.push_back(static_cast<int32_t>(idx - 1));
      vals.push_back(val);
    }
    SFB_CHECK_DATA(cols.size() < static_cast<size_t>(INT32_MAX), "{}: more than 2^31 non-zeros in one partition", path);
    row_ptr.push_back(static_cast<int32_t>(cols.size()));
  }
  if (end >= 0) {
    SFB_CHECK_DATA(row + 1 >= end, "{}: rows [{}, {}) requested but the file has {} rows", path, begin, end, row + 1);
  }
  Dataset d;
  d.name = path;
  d.n = static_cast<int64_t>(labels.size());
  d.dim = opt.features;
  d.classes = opt.classes;
  d.sparse = true;
  d.labels = std::move(labels);
  d.csr = SparseRows(d.n, d.dim);
  d.csr.resizeNonZeros(static_cast<Eigen::Index>(cols.size()));
  std::copy(row_ptr.begin(), row_ptr.end(), d.csr.outerIndexPtr());
  std::copy(cols.begin(), cols.end(), d.csr.innerIndexPtr());
  std::copy(vals.begin(), vals.end(), d.csr.valuePtr());
  return d;
}

}  // namespace sfb::io
