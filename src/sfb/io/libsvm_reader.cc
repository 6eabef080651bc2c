#include "sfb/io/libsvm_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string_view>
#include <vector>

#include "sfb/core/error.h"
#include "sfb/core/strings.h"

namespace sfb::io {
namespace {

constexpr double kMaxLabel = 9007199254740992.0;  // 2^53: every integer up to it is a double
constexpr int64_t kMaxIndex = INT32_MAX - 1;      // a column index, with room for data.bias's

bool is_data_line(std::string_view s) {
  const size_t p = s.find_first_not_of(" \t\r");
  return p != std::string_view::npos && s[p] != '#';
}

std::ifstream open(const std::string& path) {
  std::error_code ec;
  SFB_CHECK_DATA(!std::filesystem::is_directory(path, ec), "{}: is a directory, not a libsvm file", path);
  std::ifstream in(path);
  SFB_CHECK_DATA(in.good(), "{}: cannot open: {}", path, std::strerror(errno));
  return in;
}

// The tokens of one data line (comment stripped), with where they came from for messages.
class LineParser {
 public:
  LineParser(std::string_view line, const std::string& path, int64_t lineno) : s_(line), path_(path), lineno_(lineno) {
    if (auto hash = s_.find('#'); hash != std::string_view::npos) s_ = s_.substr(0, hash);
  }
  std::string_view next_token() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\r')) ++pos_;
    const size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] != ' ' && s_[pos_] != '\t' && s_[pos_] != '\r') ++pos_;
    return s_.substr(start, pos_ - start);
  }
  // The line's label as the file writes it: an integer (a leading '+' as in "+1" is fine).
  int64_t raw_label() {
    std::string_view lab = next_token();
    const std::string shown = excerpt(lab, 40);
    if (lab.size() > 1 && lab[0] == '+') lab.remove_prefix(1);
    double value = 0;
    auto [p, ec] = std::from_chars(lab.data(), lab.data() + lab.size(), value);
    SFB_CHECK_DATA(
        ec == std::errc() && p == lab.data() + lab.size() && std::isfinite(value) && value == std::floor(value),
        "{}:{}: label '{}' is not an integer (the first token of a line is its class label)", path_, lineno_, shown);
    // Range-check in double first: casting a huge label to int64 is undefined (found by fuzz_libsvm).
    SFB_CHECK_DATA(std::abs(value) <= kMaxLabel, "{}:{}: label {} is outside [-2^53, 2^53]", path_, lineno_, shown);
    return static_cast<int64_t>(value);
  }
  // The class of the line's label: its index in opt.label_map, or the label minus the offset.
  int32_t label(const LibsvmOptions& opt) {
    const int64_t value = raw_label();
    if (!opt.label_map.empty()) {
      const auto& m = opt.label_map;
      const auto it = std::lower_bound(m.begin(), m.end(), value);
      if (it != m.end() && *it == value) return static_cast<int32_t>(it - m.begin());
      SFB_CHECK_DATA(opt.unknown_labels, "{}:{}: label {} is not one of the {} labels the model knows ({} .. {})",
                     path_, lineno_, value, m.size(), m.front(), m.back());
      return -1;
    }
    const double shifted = static_cast<double>(value) - static_cast<double>(opt.label_offset);
    SFB_CHECK_DATA(shifted >= 0 && shifted < static_cast<double>(opt.classes),
                   "{}:{}: label {} minus data.label_offset {} is outside [0, {}) (leave data.classes unset to take "
                   "the classes from the file)",
                   path_, lineno_, value, opt.label_offset, opt.classes);
    return static_cast<int32_t>(shifted);
  }
  // index:value with a 1-based index in [1, features] (above it too when `skip`: the caller drops
  // it); values that underflow float are 0.
  std::pair<int64_t, float> feature(std::string_view tok, int64_t features, bool skip = false) {
    const size_t colon = tok.find(':');
    SFB_CHECK_DATA(colon != std::string_view::npos, "{}:{}: token '{}' is not index:value", path_, lineno_,
                   excerpt(tok, 40));
    int64_t idx = 0;
    auto [ip, iec] = std::from_chars(tok.data(), tok.data() + colon, idx);
    SFB_CHECK_DATA(iec == std::errc() && ip == tok.data() + colon, "{}:{}: index '{}' is not an integer", path_,
                   lineno_, excerpt(tok.substr(0, colon), 40));
    SFB_CHECK_DATA(idx >= 1 && (idx <= features || (skip && idx <= kMaxIndex)),
                   "{}:{}: feature index {} is outside [1, {}] (data.features; leave it unset to take it from the "
                   "file)",
                   path_, lineno_, idx, features);
    const std::string_view text = tok.substr(colon + 1);
    double v = 0;
    auto [vp, vec] = std::from_chars(text.data(), text.data() + text.size(), v);
    // Out of range is an underflow (as good as 0) or an overflow (refused below): from_chars leaves v
    // as it was either way, so strtod tells them apart.
    const bool out_of_range = vec == std::errc::result_out_of_range;
    if (out_of_range) v = std::strtod(std::string(text).c_str(), nullptr);
    SFB_CHECK_DATA((vec == std::errc() || out_of_range) && vp == text.data() + text.size(),
                   "{}:{}: value '{}' of feature {} is not a number", path_, lineno_, excerpt(text, 40), idx);
    SFB_CHECK_DATA(std::isfinite(v), "{}:{}: value '{}' of feature {} is not a finite number", path_, lineno_,
                   excerpt(text, 40), idx);
    SFB_CHECK_DATA(std::abs(v) <= std::numeric_limits<float>::max(),
                   "{}:{}: value '{}' of feature {} is outside the float range", path_, lineno_, excerpt(text, 40),
                   idx);
    return {idx, static_cast<float>(v)};
  }

 private:
  std::string_view s_;
  size_t pos_ = 0;
  const std::string& path_;
  int64_t lineno_;
};

}  // namespace

LibsvmSummary scan_libsvm(std::istream& in, const std::string& path) {
  LibsvmSummary sum;
  std::map<int64_t, int64_t> labels;  // label: its first line
  std::string line;
  for (int64_t lineno = 1; std::getline(in, line); ++lineno) {
    if (!is_data_line(line)) continue;
    ++sum.rows;
    LineParser p(line, path, lineno);
    labels.emplace(p.raw_label(), lineno);
    int64_t prev = 0;
    for (std::string_view tok = p.next_token(); !tok.empty(); tok = p.next_token()) {
      const int64_t idx = p.feature(tok, kMaxIndex).first;
      SFB_CHECK_DATA(idx > prev, "{}:{}: feature index {} does not increase (after {})", path, lineno, idx, prev);
      prev = idx;
    }
    if (prev > sum.max_index) {
      sum.max_index = prev;
      sum.max_index_line = lineno;
    }
  }
  for (const auto& [label, line] : labels) {
    sum.labels.push_back(label);
    sum.label_lines.push_back(line);
  }
  return sum;
}

LibsvmSummary scan_libsvm(const std::string& path) {
  auto in = open(path);
  return scan_libsvm(in, path);
}

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

Dataset read_libsvm(const std::string& path, const LibsvmOptions& opt, const RowList& rows) {
  auto in = open(path);
  return parse_libsvm(in, path, opt, rows);
}

namespace {

// Which data rows a parse keeps: [begin, end) (end < 0: to the end of the file), or the rows of
// a list (ascending).
struct RowFilter {
  int64_t begin = 0;
  int64_t end = -1;
  const RowList* rows = nullptr;
  size_t next = 0;  // rows: the first not yet kept

  bool done(int64_t row) const { return rows ? next >= rows->size() : (end >= 0 && row >= end); }
  bool keep(int64_t row) {
    if (!rows) return row >= begin;
    if (next >= rows->size() || (*rows)[next] != row) return false;
    ++next;
    return true;
  }
};

Dataset parse(std::istream& in, const std::string& path, const LibsvmOptions& opt, RowFilter filter) {
  SFB_ENFORCE(opt.features > 0 && opt.classes > 0, "features {} classes {}", opt.features, opt.classes);
  SFB_ENFORCE(opt.label_map.empty() || static_cast<int64_t>(opt.label_map.size()) == opt.classes,
              "label map of {} for {} classes", opt.label_map.size(), opt.classes);
  if (filter.rows)
    for (size_t i = 1; i < filter.rows->size(); ++i)
      SFB_ENFORCE((*filter.rows)[i] > (*filter.rows)[i - 1], "row list not ascending at {}", i);
  std::vector<int32_t> labels;
  std::vector<int32_t> row_ptr{0};
  std::vector<int32_t> cols;
  std::vector<float> vals;
  std::string line;
  int64_t row = -1;
  for (int64_t lineno = 1; std::getline(in, line); ++lineno) {
    if (!is_data_line(line)) continue;
    ++row;
    if (filter.done(row)) break;
    if (!filter.keep(row)) continue;
    LineParser p(line, path, lineno);
    labels.push_back(p.label(opt));
    int64_t prev = 0;
    for (std::string_view tok = p.next_token(); !tok.empty(); tok = p.next_token()) {
      const auto [idx, val] = p.feature(tok, opt.features, opt.skip_extra_features);
      SFB_CHECK_DATA(idx > prev, "{}:{}: feature index {} does not increase (after {})", path, lineno, idx, prev);
      prev = idx;
      if (idx > opt.features) continue;
      cols.push_back(static_cast<int32_t>(idx - 1));
      vals.push_back(val);
    }
    SFB_CHECK_DATA(cols.size() < static_cast<size_t>(INT32_MAX), "{}: more than 2^31 non-zeros in one partition", path);
    row_ptr.push_back(static_cast<int32_t>(cols.size()));
  }
  if (filter.rows) {
    SFB_CHECK_DATA(filter.next == filter.rows->size(), "{}: row {} requested but the file has {} rows", path,
                   filter.next < filter.rows->size() ? (*filter.rows)[filter.next] : 0, row + 1);
  } else if (filter.end >= 0) {
    SFB_CHECK_DATA(row + 1 >= filter.end, "{}: rows [{}, {}) requested but the file has {} rows", path, filter.begin,
                   filter.end, row + 1);
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

}  // namespace

Dataset parse_libsvm(std::istream& in, const std::string& path, const LibsvmOptions& opt, int64_t begin, int64_t end) {
  return parse(in, path, opt, RowFilter{begin, end});
}

Dataset parse_libsvm(std::istream& in, const std::string& path, const LibsvmOptions& opt, const RowList& rows) {
  return parse(in, path, opt, RowFilter{0, -1, &rows});
}

}  // namespace sfb::io
