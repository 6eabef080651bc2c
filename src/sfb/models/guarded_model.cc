#include "sfb/models/guarded_model.h"

#include <cmath>

#include <fmt/format.h>

#include "sfb/core/error.h"

namespace sfb::models {
namespace {

// Translates whatever `fn` throws into sfb's error types, naming the plugin and the call.
template <typename Fn>
auto translate(const std::string& path, const char* what, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const Error&) {
    throw;  // sfb's own (an SfWriter contract error raised inside the plugin's call)
  } catch (const api::ConfigError& e) {
    throw InvalidArgument(fmt::format("model.plugin {}: {}", path, e.what()));
  } catch (const std::exception& e) {
    throw Error(fmt::format("model.plugin {}: {} threw: {}", path, what, e.what()));
  } catch (...) {
    throw Error(fmt::format("model.plugin {}: {} threw an exception that is not a std::exception", path, what));
  }
}

}  // namespace

void guard_plugin_call(const std::string& path, const char* what, const std::function<void()>& fn) {
  translate(path, what, fn);
}

template <typename Fn>
auto GuardedModel::call(const char* what, Fn&& fn) const -> decltype(fn()) {
  return translate(path_, what, std::forward<Fn>(fn));
}

GuardedModel::GuardedModel(ModelPtr inner, std::string path) : inner_(std::move(inner)), path_(std::move(path)) {
  rows_ = call("rows()", [&] { return inner_->rows(); });
  cols_ = call("cols()", [&] { return inner_->cols(); });
  reads_sparse_rows_ = call("reads_sparse_rows()", [&] { return inner_->reads_sparse_rows(); });
  sparse_v_ = call("sparse_v()", [&] { return inner_->sparse_v(); });
  has_prox_ = call("has_prox()", [&] { return inner_->has_prox(); });
  layout_ = call("layout()", [&] { return inner_->layout(); });
  SFB_CHECK(layout_ == Layout::kRowMajor || layout_ == Layout::kFeatureMajor,
            "model.plugin {}: layout() returned {}, neither Layout::kRowMajor nor kFeatureMajor", path_,
            static_cast<int>(layout_));
  sharded_ = call("row_sharded()", [&] { return inner_->row_sharded(); });
}

std::string GuardedModel::name() const {
  return call("name()", [&] { return inner_->name(); });
}

void GuardedModel::init(MatrixMap W, Rng& rng) {
  call("init()", [&] { inner_->init(W, rng); });
  SFB_CHECK(W.allFinite(), "model.plugin {}: init() left non-finite values in W", path_);
}

api::UpdateRule GuardedModel::update_rule() const {
  return call("update_rule()", [&] { return inner_->update_rule(); });
}

void GuardedModel::compute_sf(const api::Weights& W, const api::MiniBatch& batch, api::SfWriter& out) {
  call("compute_sf()", [&] { inner_->compute_sf(W, batch, out); });
}

void GuardedModel::prox(MatrixMap W, double step) {
  call("prox()", [&] { inner_->prox(W, step); });
}

double GuardedModel::prox_scale(double step) const {
  const double c = call("prox_scale()", [&] { return inner_->prox_scale(step); });
  if (!(std::isfinite(c) && c > 0))
    throw Error(
        fmt::format("model.plugin {}: prox_scale({}) returned {}, not a finite positive factor", path_, step, c));
  return c;
}

double GuardedModel::objective(const api::Weights& W, const io::Dataset& data, int64_t limit) const {
  return call("objective()", [&] { return inner_->objective(W, data, limit); });
}

double GuardedModel::accuracy(const api::Weights& W, const io::Dataset& data) const {
  return call("accuracy()", [&] { return inner_->accuracy(W, data); });
}

double GuardedModel::batch_loss(const api::Weights& W, const api::MiniBatch& batch) const {
  return call("batch_loss()", [&] { return inner_->batch_loss(W, batch); });
}

api::NamedValues GuardedModel::metrics(const api::Weights& W, const io::Dataset& train, int64_t limit,
                                       const io::Dataset* test) const {
  return call("metrics()", [&] { return inner_->metrics(W, train, limit, test); });
}

std::string GuardedModel::why_not_row_sharded() const {
  return call("why_not_row_sharded()", [&] { return inner_->why_not_row_sharded(); });
}

void GuardedModel::init_block(MatrixMap block, int64_t row0, Rng& rng) {
  call("init_block()", [&] { sharded_->init_block(block, row0, rng); });
  SFB_CHECK(block.allFinite(), "model.plugin {}: init_block() left non-finite values in W's rows from {}", path_, row0);
}

std::vector<api::Reduce> GuardedModel::statistics() const {
  auto s = call("statistics()", [&] { return sharded_->statistics(); });
  for (api::Reduce r : s)
    SFB_CHECK(r == api::Reduce::kSum || r == api::Reduce::kLogSumExp || r == api::Reduce::kMaxIndex,
              "model.plugin {}: statistics() returned reduction {}, not kSum, kLogSumExp or kMaxIndex", path_,
              static_cast<int>(r));
  SFB_CHECK(!s.empty(), "model.plugin {}: statistics() returned no statistic", path_);
  return s;
}

api::MiniBatch GuardedModel::shard_samples(const api::MiniBatch& batch) {
  auto s = call("shard_samples()", [&] { return sharded_->shard_samples(batch); });
  const int64_t cols = s.sparse ? s.x_csr.cols() : s.x.cols();
  SFB_CHECK(cols == cols_ && (s.sparse ? s.x_csr.rows() : s.x.rows()) == s.size(),
            "model.plugin {}: shard_samples() returned {} labels and rows of {} columns; W has {} columns", path_,
            s.size(), cols, cols_);
  return s;
}

api::MiniBatch GuardedModel::eval_samples(const io::Dataset& data, int64_t limit, api::EvalSet set) const {
  return call("eval_samples()", [&] { return sharded_->eval_samples(data, limit, set); });
}

void GuardedModel::partial_statistics(const api::Weights& block, int64_t row0, const api::MiniBatch& samples,
                                      Matrix& outputs, float* stats) const {
  call("partial_statistics()", [&] { sharded_->partial_statistics(block, row0, samples, outputs, stats); });
  SFB_CHECK(outputs.rows() == samples.size() && outputs.cols() == block.rows(),
            "model.plugin {}: partial_statistics() left outputs {} x {}, expected {} x {}", path_, outputs.rows(),
            outputs.cols(), samples.size(), block.rows());
}

void GuardedModel::block_factors(int64_t row0, const api::MiniBatch& samples, const float* stats,
                                 Matrix& outputs) const {
  const auto r = outputs.rows(), c = outputs.cols();
  call("block_factors()", [&] { sharded_->block_factors(row0, samples, stats, outputs); });
  SFB_CHECK(outputs.rows() == r && outputs.cols() == c, "model.plugin {}: block_factors() resized its outputs", path_);
}

double GuardedModel::sample_loss(const float* stats, int32_t label) const {
  return call("sample_loss()", [&] { return sharded_->sample_loss(stats, label); });
}

int GuardedModel::sample_correct(const float* stats, int32_t label) const {
  return call("sample_correct()", [&] { return sharded_->sample_correct(stats, label); });
}

double GuardedModel::block_regulariser(const api::Weights& block) const {
  return call("block_regulariser()", [&] { return sharded_->block_regulariser(block); });
}

}  // namespace sfb::models
