#pragma once
// The plugin boundary. A plugin's model is wrapped in GuardedModel, which forwards every call and
// makes two promises the rest of sfb can rely on:
//  * nothing but sfb's own error types leaves a plugin call: api::ConfigError becomes
//    InvalidArgument (exit code 2), any other exception, std::exception or not (`throw 42`),
//    becomes an Error naming the plugin, the call and what was thrown;
//  * what the plugin returns is checked: init() leaves W finite, the shape rows() x cols()
//    stays fixed, prox_scale() is a finite positive factor.
// Built-in models are not wrapped: their contract is checked by the tests.
#include <string>

#include "sfb/models/plugin_loader.h"

namespace sfb::models {

// It is also the plugin's row-sharded side (api/row_sharded.h), when the plugin has one.
class GuardedModel final : public api::Model, public api::RowSharded {
 public:
  // `inner` is the plugin's model; `path` names the plugin in messages.
  GuardedModel(ModelPtr inner, std::string path);

  std::string name() const override;
  int64_t rows() const override { return rows_; }
  int64_t cols() const override { return cols_; }
  void init(MatrixMap W, Rng& rng) override;
  api::UpdateRule update_rule() const override;
  bool reads_sparse_rows() const override { return reads_sparse_rows_; }
  bool sparse_v() const override { return sparse_v_; }
  void compute_sf(const api::Weights& W, const api::MiniBatch& batch, api::SfWriter& out) override;
  bool has_prox() const override { return has_prox_; }
  Layout layout() const override { return layout_; }
  void prox(MatrixMap W, double step) override;
  double prox_scale(double step) const override;
  double objective(const api::Weights& W, const io::Dataset& data, int64_t limit) const override;
  double accuracy(const api::Weights& W, const io::Dataset& data) const override;
  double batch_loss(const api::Weights& W, const api::MiniBatch& batch) const override;
  api::NamedValues metrics(const api::Weights& W, const io::Dataset& train, int64_t limit,
                           const io::Dataset* test) const override;
  api::RowSharded* row_sharded() override { return sharded_ ? this : nullptr; }
  std::string why_not_row_sharded() const override;

  void init_block(MatrixMap block, int64_t row0, Rng& rng) override;
  std::vector<api::Reduce> statistics() const override;
  api::MiniBatch shard_samples(const api::MiniBatch& batch) override;
  api::MiniBatch eval_samples(const io::Dataset& data, int64_t limit, api::EvalSet set) const override;
  void partial_statistics(const api::Weights& block, int64_t row0, const api::MiniBatch& samples, Matrix& outputs,
                          float* stats) const override;
  void block_factors(int64_t row0, const api::MiniBatch& samples, const float* stats, Matrix& outputs) const override;
  double sample_loss(const float* stats, int32_t label) const override;
  int sample_correct(const float* stats, int32_t label) const override;
  double block_regulariser(const api::Weights& block) const override;

 private:
  template <typename Fn>
  auto call(const char* what, Fn&& fn) const -> decltype(fn());

  ModelPtr inner_;
  std::string path_;
  int64_t rows_ = 0, cols_ = 0;  // asked once: fixed for the model's life
  bool reads_sparse_rows_ = false, sparse_v_ = false, has_prox_ = false;
  Layout layout_ = Layout::kRowMajor;
  api::RowSharded* sharded_ = nullptr;  // the plugin's row-sharded side (asked once), or null
};

// Runs a plugin call outside a model (its factory): the same translation of what it throws.
void guard_plugin_call(const std::string& path, const char* what, const std::function<void()>& fn);

}  // namespace sfb::models
