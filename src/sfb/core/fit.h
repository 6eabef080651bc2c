#pragma once
// Ordinary least squares y = a + b x: the one line fit of the predictors (sfb/predict's link and
// all-reduce fits, sfb/mgwfbp's cost model fitted from OSU logs and live benchmarks).
#include <vector>

namespace sfb {

struct LineFit {
  double a = 0.0, b = 0.0;
  double r2 = 0.0;  // 1 when y is constant and fits exactly
  int used = 0;     // points fitted
};

// InvalidArgument unless x and y have the same size, at least 2 points each.
LineFit fit_line(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace sfb
