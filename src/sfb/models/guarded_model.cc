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

}  // namespace sfb::models
