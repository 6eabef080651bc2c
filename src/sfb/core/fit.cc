#include "sfb/core/fit.h"

#include "sfb/core/error.h"

namespace sfb {

LineFit fit_line(const std::vector<double>& x, const std::vector<double>& y) {
  SFB_CHECK(x.size() == y.size() && x.size() >= 2, "fitting a line needs at least 2 points, got {} x and {} y values",
            x.size(), y.size());
  const double n = static_cast<double>(x.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0, syy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sx += x[i];
    sy += y[i];
    sxx += x[i] * x[i];
    sxy += x[i] * y[i];
    syy += y[i] * y[i];
  }
  const double vx = sxx - sx * sx / n, vy = syy - sy * sy / n, cxy = sxy - sx * sy / n;
  LineFit f;
  f.b = vx > 0 ? cxy / vx : 0.0;
  f.a = (sy - f.b * sx) / n;
  f.r2 = vy > 0 && vx > 0 ? cxy * cxy / (vx * vy) : 1.0;
  f.used = static_cast<int>(x.size());
  return f;
}

}  // namespace sfb
