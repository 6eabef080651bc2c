#include "sfb/models/dml.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "sfb/core/error.h"
#include "sfb/core/gemm.h"

namespace sfb::models {
namespace {

// d = x_a - x_b of `data` as a dense row.
void diff_row(const io::Dataset& data, int64_t a, int64_t b, Eigen::Ref<Eigen::RowVectorXf> d) {
  if (!data.sparse) {
    d = data.dense.row(a) - data.dense.row(b);
    return;
  }
  d.setZero();
  for (io::SparseRows::InnerIterator it(data.csr, a); it; ++it) d(it.index()) += it.value();
  for (io::SparseRows::InnerIterator it(data.csr, b); it; ++it) d(it.index()) -= it.value();
}

// A partner of row r: same class when `similar` (another row if the class has one), else any row
// of another class. Returns -1 when no such row exists.
int64_t partner(const std::vector<std::vector<int64_t>>& by_class, const std::vector<int32_t>& labels, int64_t r,
                bool similar, Rng& rng) {
  const int32_t y = labels[static_cast<size_t>(r)];
  if (similar) {
    const auto& rows = by_class[static_cast<size_t>(y)];
    if (rows.size() < 2) return -1;
    for (;;) {
      const int64_t q = rows[rng() % rows.size()];
      if (q != r) return q;
    }
  }
  int64_t others = 0;
  for (size_t c = 0; c < by_class.size(); ++c)
    if (static_cast<int32_t>(c) != y) others += static_cast<int64_t>(by_class[c].size());
  if (others == 0) return -1;
  auto pick = static_cast<int64_t>(rng() % static_cast<uint64_t>(others));
  for (size_t c = 0; c < by_class.size(); ++c) {
    if (static_cast<int32_t>(c) == y) continue;
    const auto sz = static_cast<int64_t>(by_class[c].size());
    if (pick < sz) return by_class[c][static_cast<size_t>(pick)];
    pick -= sz;
  }
  return -1;
}

std::vector<std::vector<int64_t>> rows_by_class(const io::Dataset& data, int64_t n) {
  std::vector<std::vector<int64_t>> by_class(static_cast<size_t>(std::max<int64_t>(data.classes, 1)));
  for (int64_t i = 0; i < n; ++i) by_class[static_cast<size_t>(data.labels[static_cast<size_t>(i)])].push_back(i);
  return by_class;
}

}  // namespace

Dml::Dml(const api::ModelContext& ctx)
    : ShapedModel("dml", ctx.param_int("dim", 32), ctx.train().dim, ctx.train().sparse,
                  model_layout(ctx, "dml", false)),
      train_(ctx.train()),
      margin_(ctx.param_double("margin", 1.0)),
      eval_pairs_(ctx.param_int("eval_pairs", 2000)),
      seed_(ctx.seed()),
      rank_(ctx.rank()) {
  SFB_CHECK(rows() >= 1, "model.dim must be >= 1, got {}", rows());
  SFB_CHECK(margin_ > 0, "model.margin must be > 0, got {}", margin_);
  by_class_ = rows_by_class(train_, train_.n);
}

void Dml::init(MatrixMap W, Rng& rng) {
  // L_jk ~ N(0, 1/D): E ||L d||^2 = (J/D) ||d||^2, distances start at the data's own scale.
  std::normal_distribution<float> g(0.0f, 1.0f / std::sqrt(static_cast<float>(cols())));
  for (Eigen::Index i = 0; i < W.size(); ++i) W.data()[i] = g(rng);
}

void DmlRows::init_block(MatrixMap block, int64_t row0, Rng& rng) {
  // Dml::init's stream (row-major J x D), keeping this block's rows: the same L as an unsharded run.
  std::normal_distribution<float> g(0.0f, 1.0f / std::sqrt(static_cast<float>(m_.cols())));
  const int64_t D = m_.cols(), end = (row0 + block.rows()) * D;
  for (int64_t i = 0; i < end; ++i) {
    const float v = g(rng);
    if (i >= row0 * D) block.data()[i - row0 * D] = v;
  }
}

std::vector<Dml::Pair> Dml::batch_pairs(const api::MiniBatch& batch) const {
  // Partners depend on (seed, rank, clock) only: a resumed run draws the same pairs.
  Rng rng = make_rng(seed_ ^ 0xD3D3D3D3ULL, (static_cast<uint64_t>(rank_) << 40) + static_cast<uint64_t>(batch.clock));
  std::vector<Pair> pairs;
  for (int64_t i = 0; i < batch.size(); ++i) {
    const int64_t r = batch.rows[static_cast<size_t>(i)];
    bool similar = (rng() & 1) != 0;
    int64_t q = partner(by_class_, train_.labels, r, similar, rng);
    if (q < 0) {
      similar = !similar;
      q = partner(by_class_, train_.labels, r, similar, rng);
    }
    if (q < 0) q = r;  // a partition of one row: d = 0, no update
    pairs.push_back({r, q, similar});
  }
  return pairs;
}

double Dml::pair_loss(const Matrix& L, const io::Dataset& data, const std::vector<Pair>& pairs) const {
  if (pairs.empty()) return 0.0;
  const auto dist = distances(L, data, pairs);
  double loss = 0.0;
  for (size_t i = 0; i < pairs.size(); ++i) loss += pairs[i].similar ? dist[i] : std::max(0.0, margin_ - dist[i]);
  return loss / static_cast<double>(pairs.size());
}

double Dml::batch_loss(const api::Weights& weights, const api::MiniBatch& batch) const {
  const Matrix& W = row_major_only(weights, name());
  return pair_loss(W, train_, batch_pairs(batch));
}

void Dml::compute_sf(const api::Weights& W, const api::MiniBatch& batch, api::SfWriter& out) {
  const int64_t k = batch.size();
  const auto pairs = batch_pairs(batch);
  Matrix d(k, cols());
  std::vector<float> sign(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) {
    diff_row(train_, pairs[static_cast<size_t>(i)].a, pairs[static_cast<size_t>(i)].b, d.row(i));
    sign[static_cast<size_t>(i)] = pairs[static_cast<size_t>(i)].similar ? 1.0f : -1.0f;
  }
  Matrix z;
  gemm(Op::kNone, d, Op::kTranspose, row_major_only(W, name()), z);  // K x J: rows are (L d_i)^T
  if (W.scale != 1.0f) z *= W.scale;
  for (int64_t i = 0; i < k; ++i) {
    const double dist = z.row(i).squaredNorm();
    // Similar: d/dL ||Ld||^2 = 2 (Ld) d^T. Dissimilar: -2 (Ld) d^T while inside the margin, else 0.
    const float g = sign[static_cast<size_t>(i)] > 0 ? 2.0f : (dist < margin_ ? -2.0f : 0.0f);
    z.row(i) *= g;
  }
  out.write_u_block(z);
  if (sparse_v())
    api::write_v_nonzeros(out, d);
  else
    out.write_v_block(d);
  out.commit();
}

std::vector<Dml::Pair> Dml::draw_pairs(const io::Dataset& data, int64_t n, int64_t count, uint64_t seed) {
  n = (n <= 0 || n > data.n) ? data.n : n;
  std::vector<Pair> pairs;
  if (n < 2) return pairs;
  const auto by_class = rows_by_class(data, n);
  Rng rng = make_rng(seed, 0xE7A1);
  for (int64_t i = 0; i < count; ++i) {
    const auto r = static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
    const bool similar = (i % 2) == 0;
    const int64_t q = partner(by_class, data.labels, r, similar, rng);
    if (q >= 0) pairs.push_back({r, q, similar});
  }
  return pairs;
}

std::vector<double> Dml::distances(const Matrix& L, const io::Dataset& data, const std::vector<Pair>& pairs) {
  std::vector<double> out(pairs.size());
  constexpr int64_t kBlock = 512;
  Matrix d;
  for (size_t b = 0; b < pairs.size(); b += kBlock) {
    const auto m = static_cast<int64_t>(std::min(pairs.size() - b, static_cast<size_t>(kBlock)));
    d.resize(m, data.dim);
    for (int64_t i = 0; i < m; ++i)
      diff_row(data, pairs[b + static_cast<size_t>(i)].a, pairs[b + static_cast<size_t>(i)].b, d.row(i));
    Matrix z;
    gemm(Op::kNone, d, Op::kTranspose, L, z);
    for (int64_t i = 0; i < m; ++i) out[b + static_cast<size_t>(i)] = z.row(i).squaredNorm();
  }
  return out;
}

double Dml::objective(const api::Weights& weights, const io::Dataset& data, int64_t limit) const {
  const Matrix& W = row_major_only(weights, name());
  return pair_loss(W, data, draw_pairs(data, limit, eval_pairs_, seed_));
}

double Dml::accuracy(const api::Weights& weights, const io::Dataset& data) const {
  const Matrix& W = row_major_only(weights, name());
  const auto pairs = draw_pairs(data, 0, eval_pairs_, seed_ + 1);
  if (pairs.empty()) return -1.0;
  const auto dist = distances(W, data, pairs);
  int64_t right = 0;
  for (size_t i = 0; i < pairs.size(); ++i) right += (dist[i] < 0.5 * margin_) == pairs[i].similar ? 1 : 0;
  return static_cast<double>(right) / static_cast<double>(pairs.size());
}

api::NamedValues Dml::metrics(const api::Weights& weights, const io::Dataset& train, int64_t limit,
                              const io::Dataset* test) const {
  const Matrix& W = row_major_only(weights, name());
  const io::Dataset& data = test && test->n > 1 ? *test : train;
  const auto pairs = draw_pairs(data, test && test->n > 1 ? 0 : limit, eval_pairs_, seed_ + 1);
  const auto dist = distances(W, data, pairs);
  for (double d : dist)
    if (!std::isfinite(d)) return {{"pair_auc", NAN}, {"margin_violations", NAN}};  // no NaN reaches the sort
  // AUC of the score -distance for the class "similar": the probability that a random similar
  // pair is closer than a random dissimilar one (ties count one half), by sorting.
  std::vector<size_t> order(pairs.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return dist[a] < dist[b]; });
  double pos = 0, neg = 0, rank_sum = 0;
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j < order.size() && dist[order[j]] == dist[order[i]]) ++j;
    const double mid = 0.5 * static_cast<double>(i + j - 1) + 1.0;  // 1-based mean rank of the tie group
    for (size_t t = i; t < j; ++t) {
      if (pairs[order[t]].similar) {
        rank_sum += mid;
        pos += 1;
      } else {
        neg += 1;
      }
    }
    i = j;
  }
  // Similar pairs should rank first (small distance): AUC = P(dist_sim < dist_dis).
  const double auc = (pos > 0 && neg > 0) ? 1.0 - (rank_sum - pos * (pos + 1) / 2) / (pos * neg) : -1.0;
  return {{"pair_auc", auc}, {"margin_violations", [&] {
                                double v = 0;
                                for (size_t i = 0; i < pairs.size(); ++i)
                                  v += pairs[i].similar ? 0 : (dist[i] < margin_ ? 1 : 0);
                                return neg > 0 ? v / neg : 0.0;
                              }()}};
}

namespace {

// The pairs' differences as sharded samples: dense rows, label 1 for similar.
api::MiniBatch pair_samples(const io::Dataset& data, const std::vector<Dml::Pair>& pairs) {
  api::MiniBatch s;
  s.x.resize(static_cast<int64_t>(pairs.size()), data.dim);
  for (size_t i = 0; i < pairs.size(); ++i) {
    diff_row(data, pairs[i].a, pairs[i].b, s.x.row(static_cast<Eigen::Index>(i)));
    s.labels.push_back(pairs[i].similar ? 1 : 0);
  }
  return s;
}

}  // namespace

api::MiniBatch DmlRows::shard_samples(const api::MiniBatch& batch) {
  auto s = pair_samples(m_.train_, m_.batch_pairs(batch));
  s.clock = batch.clock;
  return s;
}

api::MiniBatch DmlRows::eval_samples(const io::Dataset& data, int64_t limit, api::EvalSet set) const {
  // The pairs Dml::objective and Dml::accuracy draw.
  return set == api::EvalSet::kObjective ? pair_samples(data, Dml::draw_pairs(data, limit, m_.eval_pairs_, m_.seed_))
                                         : pair_samples(data, Dml::draw_pairs(data, 0, m_.eval_pairs_, m_.seed_ + 1));
}

void DmlRows::partial_statistics(const api::Weights& block, int64_t, const api::MiniBatch& samples, Matrix& outputs,
                                 float* stats) const {
  gemm(Op::kNone, samples.x, Op::kTranspose, row_major_only(block, m_.name()), outputs);  // n x rows: (L d)^T
  if (block.scale != 1.0f) outputs *= block.scale;
  for (int64_t i = 0; i < samples.size(); ++i) stats[i] = outputs.row(i).squaredNorm();
}

void DmlRows::block_factors(int64_t, const api::MiniBatch& samples, const float* stats, Matrix& outputs) const {
  for (int64_t i = 0; i < samples.size(); ++i) {
    const bool similar = samples.labels[static_cast<size_t>(i)] != 0;
    // As compute_sf: +2 (L d) for similar pairs, -2 (L d) for dissimilar ones inside the margin.
    outputs.row(i) *= similar ? 2.0f : (static_cast<double>(stats[i]) < m_.margin_ ? -2.0f : 0.0f);
  }
}

double DmlRows::sample_loss(const float* stats, int32_t label) const {
  const double dist = stats[0];
  return label != 0 ? dist : std::max(0.0, m_.margin_ - dist);
}

int DmlRows::sample_correct(const float* stats, int32_t label) const {
  return (static_cast<double>(stats[0]) < 0.5 * m_.margin_) == (label != 0) ? 1 : 0;
}

}  // namespace sfb::models
