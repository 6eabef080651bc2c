#include "predict.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "job.h"
#include "sfb/core/error.h"
#include "sfb/core/files.h"
#include "sfb/io/libsvm_reader.h"

namespace sfbd {

Classifier read_classifier(const std::string& path) {
  Classifier c;
  c.W = sfb::io::read_model(path, &c.meta);
  SFB_CHECK_DATA(c.meta.labels.empty() || static_cast<int64_t>(c.meta.labels.size()) == c.W.rows(),
                 "{}: the model file has {} labels for the {} rows of W: it is not a classifier's (mlr, l2mlr)", path,
                 c.meta.labels.size(), c.W.rows());
  SFB_CHECK_DATA(c.W.rows() >= 2 && c.features() >= 1, "{}: W is {} x {}: not a classifier of 2 classes or more", path,
                 c.W.rows(), c.W.cols());
  c.labels = c.meta.labels;
  if (c.labels.empty())
    for (int64_t j = 0; j < c.W.rows(); ++j) c.labels.push_back(j);
  return c;
}

namespace {

// One prediction line: the label, then with probabilities each class's in the header's order.
void write_row(std::FILE* out, const Classifier& c, const float* p, bool probabilities) {
  const int64_t J = c.W.rows();
  const int64_t best = std::max_element(p, p + J) - p;
  std::string line = fmt::format("{}", c.labels[static_cast<size_t>(best)]);
  for (int64_t j = 0; probabilities && j < J; ++j) line += fmt::format(" {:g}", p[j]);
  line += '\n';
  SFB_CHECK_DATA(std::fputs(line.c_str(), out) >= 0, "writing the predictions failed: {}", std::strerror(errno));
}

}  // namespace

sfb::ClassReport score_rows(const Classifier& c, const sfb::io::Dataset& d, std::FILE* out, bool probabilities) {
  const int64_t J = c.W.rows();
  const bool add_bias = c.meta.bias && d.dim == c.features();
  SFB_CHECK_DATA(d.dim == c.W.cols() || add_bias, "{}: rows of {} features, but the model's W is {} x {}{}", d.name,
                 d.dim, J, c.W.cols(), c.meta.bias ? " (with data.bias's column)" : "");
  sfb::ClassReport report(J);
  if (out && probabilities) {
    std::string head = "labels";
    for (int64_t l : c.labels) head += fmt::format(" {}", l);
    std::fputs((head + "\n").c_str(), out);
  }
  // Blocks of rows: the scores X W^T, then each row's softmax (in double, from its largest score).
  constexpr int64_t kBlock = 4096;
  const auto Wx = c.W.leftCols(d.dim);
  for (int64_t r0 = 0; r0 < d.n; r0 += kBlock) {
    const int64_t n = std::min(kBlock, d.n - r0);
    sfb::Matrix S = d.sparse ? sfb::Matrix(d.csr.middleRows(r0, n) * Wx.transpose())
                             : sfb::Matrix(d.dense.middleRows(r0, n) * Wx.transpose());
    if (add_bias) S.rowwise() += c.W.col(c.W.cols() - 1).transpose();
    for (int64_t i = 0; i < n; ++i) {
      float* p = S.row(i).data();
      const double m = *std::max_element(p, p + J);
      double z = 0;
      for (int64_t j = 0; j < J; ++j) z += std::exp(static_cast<double>(p[j]) - m);
      for (int64_t j = 0; j < J; ++j) p[j] = static_cast<float>(std::exp(static_cast<double>(p[j]) - m) / z);
      report.add(d.labels[static_cast<size_t>(r0 + i)], p);
      if (out) write_row(out, c, p, probabilities);
    }
  }
  return report;
}

sfb::ClassReport score_libsvm(const Classifier& c, const std::string& data, int64_t max_rows, std::FILE* out,
                              bool probabilities) {
  sfb::io::LibsvmOptions opt;
  opt.features = c.features();
  opt.classes = c.W.rows();
  opt.label_map = c.labels;
  opt.unknown_labels = true;
  opt.skip_extra_features = true;
  const int64_t rows = max_rows > 0 ? std::min(max_rows, sfb::io::count_libsvm_rows(data)) : -1;
  return score_rows(c, sfb::io::read_libsvm(data, opt, 0, rows), out, probabilities);
}

sfb::Json class_report_json(const sfb::ClassReport& r, const std::vector<int64_t>& labels) {
  sfb::Json per = sfb::Json::array();
  for (size_t j = 0; j < labels.size(); ++j) {
    const auto k = static_cast<int64_t>(j);
    int64_t support = 0;
    for (size_t p = 0; p < labels.size(); ++p) support += r.count(k, static_cast<int64_t>(p));
    per.push_back({{"label", labels[j]},
                   {"precision", sfb::sig(r.precision(k), 6)},
                   {"recall", sfb::sig(r.recall(k), 6)},
                   {"f1", sfb::sig(r.f1(k), 6)},
                   {"support", support}});
  }
  return {{"rows", r.rows()},
          {"unknown_label_rows", r.unknown_rows()},
          {"accuracy", sfb::sig(r.accuracy(), 8)},
          {"log_loss", sfb::sig(r.log_loss(), 8)},
          {"macro_f1", sfb::sig(r.macro_f1(), 8)},
          {"per_class", per}};
}

int predict(const std::string& model, const std::string& data, const std::string& out, bool probabilities, int rank) {
  if (rank != 0) return kExitOk;
  try {
    SFB_CHECK(!data.empty() && !out.empty(), "--predict MODEL needs --data FILE (libsvm) and --out PRED");
    const Classifier c = read_classifier(model);
    const std::string tmp = out + ".tmp";
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(tmp.c_str(), "w"), &std::fclose);
    SFB_CHECK(f != nullptr, "--out {}: cannot write: {}", out, std::strerror(errno));
    // Written to a temporary and renamed: a bad row leaves no half-written PRED behind.
    std::optional<sfb::ClassReport> r;
    try {
      r = score_libsvm(c, data, 0, f.get(), probabilities);
      SFB_CHECK_DATA(std::fclose(f.release()) == 0, "--out {}: writing failed: {}", out, std::strerror(errno));
    } catch (...) {
      f.reset();
      std::filesystem::remove(tmp);
      throw;
    }
    std::filesystem::rename(tmp, out);
    const int64_t right = std::llround(r->accuracy() * static_cast<double>(r->rows()));
    fmt::print("Accuracy = {:g}% ({}/{}) (classification)\nLog-loss = {:.6g}\n", 100 * r->accuracy(), right, r->rows(),
               r->log_loss());
    return kExitOk;
  } catch (const sfb::Error& e) {
    fmt::print(stderr, "sfbd: error: {}\n", e.what());
    return kExitBadInput;
  }
}

}  // namespace sfbd
