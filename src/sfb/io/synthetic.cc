#include "sfb/io/synthetic.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "sfb/core/error.h"
#include "sfb/core/rng.h"

namespace sfb::io {
namespace {

// Standard normal from a hash (Box-Muller on two hashed uniforms).
float hashed_normal(uint64_t seed, int64_t y, int64_t j) {
  const uint64_t h1 =
      splitmix64(seed ^ splitmix64(static_cast<uint64_t>(y) * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(j)));
  const uint64_t h2 = splitmix64(h1);
  const double u1 = (static_cast<double>(h1 >> 11) + 0.5) / 9007199254740992.0;
  const double u2 = static_cast<double>(h2 >> 11) / 9007199254740992.0;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

}  // namespace

Dataset make_synthetic(const SyntheticSpec& spec, int64_t begin, int64_t end) {
  if (end < 0) end = spec.samples;
  SFB_ENFORCE(begin >= 0 && begin <= end && end <= spec.samples, "rows [{}, {}) of {}", begin, end, spec.samples);
  return make_synthetic(spec, range_rows({begin, end}));
}

Dataset make_synthetic(const SyntheticSpec& spec, const RowList& rows) {
  SFB_CHECK(spec.features > 0 && spec.classes > 1 && spec.samples >= 0,
            "synthetic data needs features > 0 and classes > 1, got {} and {}", spec.features, spec.classes);
  for (size_t i = 0; i < rows.size(); ++i)
    SFB_ENFORCE(rows[i] >= 0 && rows[i] < spec.samples && (i == 0 || rows[i] > rows[i - 1]), "row {} of {}", rows[i],
                spec.samples);
  const auto n = static_cast<int64_t>(rows.size());
  const bool sparse = spec.density < 1.0;
  const int64_t nnz = sparse ? std::max<int64_t>(1, std::llround(spec.density * spec.features)) : spec.features;
  // Class separation: the prototypes' distance along the support is about `separation` noise
  // std-devs (4 by default).
  const float sep = static_cast<float>(spec.separation / std::sqrt(static_cast<double>(nnz)));
  const uint64_t proto_seed = splitmix64(spec.seed ^ 0x5eed);

  Dataset d;
  d.name = "synthetic";
  d.n = n;
  d.dim = spec.features;
  d.classes = spec.classes;
  d.sparse = sparse;
  d.labels.resize(static_cast<size_t>(n));
  std::vector<Eigen::Triplet<float, int32_t>> trip;
  if (sparse)
    trip.reserve(static_cast<size_t>(n * nnz));
  else
    d.dense.resize(n, spec.features);
  std::vector<int32_t> support;
  std::vector<char> taken(sparse ? static_cast<size_t>(spec.features) : 0, 0);
  for (int64_t r = 0; r < n; ++r) {
    Rng rng = make_rng(spec.seed, (spec.stream << 48) ^ static_cast<uint64_t>(rows[static_cast<size_t>(r)]));
    std::normal_distribution<float> gauss(0.0f, 1.0f);
    const int64_t y = std::uniform_int_distribution<int64_t>(0, spec.classes - 1)(rng);
    int64_t label = y;
    if (std::uniform_real_distribution<double>(0.0, 1.0)(rng) < spec.noise)
      label = std::uniform_int_distribution<int64_t>(0, spec.classes - 1)(rng);
    d.labels[static_cast<size_t>(r)] = static_cast<int32_t>(label);
    if (!sparse) {
      for (int64_t j = 0; j < spec.features; ++j) d.dense(r, j) = sep * hashed_normal(proto_seed, y, j) + gauss(rng);
    } else {
      // Floyd's algorithm: nnz distinct features without touching all D.
      support.clear();
      for (int64_t j = spec.features - nnz; j < spec.features; ++j) {
        const int64_t t = std::uniform_int_distribution<int64_t>(0, j)(rng);
        const int64_t pick = taken[static_cast<size_t>(t)] ? j : t;
        taken[static_cast<size_t>(pick)] = 1;
        support.push_back(static_cast<int32_t>(pick));
      }
      for (int32_t j : support) taken[static_cast<size_t>(j)] = 0;
      std::sort(support.begin(), support.end());
      for (int32_t j : support)
        trip.emplace_back(static_cast<int32_t>(r), j, sep * hashed_normal(proto_seed, y, j) + gauss(rng));
    }
  }
  if (sparse) {
    d.csr = SparseRows(n, spec.features);
    d.csr.setFromTriplets(trip.begin(), trip.end());
  }
  return d;
}

}  // namespace sfb::io
