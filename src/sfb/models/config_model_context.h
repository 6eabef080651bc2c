#pragma once
// ConfigModelContext: the runtime's ModelContext (sfb/api/model_context.h) over a Config. A
// parameter `key` is looked up in [model.params] first (a plugin's own keys), then as the built-in
// schema key `model.<key>`; a value of the wrong type throws InvalidArgument naming where it was
// set. check_all_params_read() reports [model.params] keys that the model never asked for.
//
// Used by the thread that creates the model; not thread-safe.
#include <set>
#include <string>

#include "sfb/api/model_context.h"
#include "sfb/core/config.h"

namespace sfb::models {

class ConfigModelContext final : public api::ModelContext {
 public:
  ConfigModelContext(const Config& cfg, const io::Dataset& train, int64_t train_total, int rank, int ranks)
      : cfg_(cfg), train_(train), train_total_(train_total), rank_(rank), ranks_(ranks) {}

  int rank() const override { return rank_; }
  int ranks() const override { return ranks_; }
  uint64_t seed() const override { return cfg_.job.seed; }
  const io::Dataset& train() const override { return train_; }
  int64_t train_total() const override { return train_total_; }
  int64_t minibatch() const override { return cfg_.optimizer.minibatch; }
  double param_double(std::string_view key, double fallback) const override;
  int64_t param_int(std::string_view key, int64_t fallback) const override;
  std::string param_string(std::string_view key, std::string_view fallback) const override;
  bool param_bool(std::string_view key, bool fallback) const override;

  // Throws InvalidArgument for a key of [model.params] that no param_*() call asked for.
  void check_all_params_read(const std::string& model_name) const;

 private:
  // The value's TOML text and where it came from, or an empty text when it is not set.
  struct Found {
    std::string text, type, where;
  };
  Found find(std::string_view key) const;

  const Config& cfg_;
  const io::Dataset& train_;
  int64_t train_total_;
  int rank_, ranks_;
  mutable std::set<std::string, std::less<>> read_;
};

}  // namespace sfb::models
