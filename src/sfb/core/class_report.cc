#include "sfb/core/class_report.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "sfb/core/error.h"

namespace sfb {

ClassReport::ClassReport(int64_t classes) : classes_(classes) {
  SFB_ENFORCE(classes > 0, "a class report of {} classes", classes);
  confusion_.assign(static_cast<size_t>(classes * classes), 0);
}

void ClassReport::add(int32_t truth, const float* p) {
  SFB_ENFORCE(truth >= -1 && truth < classes_, "true class {} of {}", truth, classes_);
  const int64_t predicted = std::max_element(p, p + classes_) - p;
  ++rows_;
  if (truth < 0) {
    ++unknown_;
    return;
  }
  correct_ += predicted == truth ? 1 : 0;
  ++confusion_[truth * classes_ + predicted];
  log_loss_sum_ -= std::log(std::clamp(static_cast<double>(p[truth]), 1e-15, 1.0));
}

double ClassReport::accuracy() const { return rows_ > 0 ? static_cast<double>(correct_) / rows_ : 0.0; }

double ClassReport::log_loss() const {
  const int64_t known = rows_ - unknown_;
  return known > 0 ? log_loss_sum_ / static_cast<double>(known) : 0.0;
}

int64_t ClassReport::predicted_as(int64_t j) const {
  int64_t n = 0;
  for (int64_t t = 0; t < classes_; ++t) n += count(t, j);
  return n;
}

int64_t ClassReport::actually(int64_t j) const {
  int64_t n = 0;
  for (int64_t p = 0; p < classes_; ++p) n += count(j, p);
  return n;
}

double ClassReport::precision(int64_t j) const {
  const int64_t n = predicted_as(j);
  return n > 0 ? static_cast<double>(count(j, j)) / static_cast<double>(n) : 0.0;
}

double ClassReport::recall(int64_t j) const {
  const int64_t n = actually(j);
  return n > 0 ? static_cast<double>(count(j, j)) / static_cast<double>(n) : 0.0;
}

double ClassReport::f1(int64_t j) const {
  const double p = precision(j), r = recall(j);
  return p + r > 0 ? 2 * p * r / (p + r) : 0.0;
}

double ClassReport::macro_f1() const {
  double sum = 0;
  for (int64_t j = 0; j < classes_; ++j) sum += f1(j);
  return sum / static_cast<double>(classes_);
}

std::string ClassReport::confusion_csv(const std::vector<int64_t>& labels) const {
  const auto name = [&labels](int64_t j) { return labels.empty() ? j : labels[static_cast<size_t>(j)]; };
  std::string out = "true\\predicted";
  for (int64_t j = 0; j < classes_; ++j) out += fmt::format(",{}", name(j));
  out += '\n';
  for (int64_t t = 0; t < classes_; ++t) {
    out += fmt::format("{}", name(t));
    for (int64_t p = 0; p < classes_; ++p) out += fmt::format(",{}", count(t, p));
    out += '\n';
  }
  return out;
}

}  // namespace sfb
