#pragma once
// What a model is told when it is created: who it runs on, its training partition, and the
// parameters of its config section. The runtime owns the context; a model may keep references to
// train() for its whole life.
//
// Parameters: param_*("lambda", fallback) reads `model.lambda` for built-in keys (documented in
// configs/README.md) or `[model.params] lambda = ...` for a plugin's own keys. A wrong type throws
// InvalidArgument naming the config file and line. After the factory returns, a key of
// [model.params] that the model never read is an error (a typo must not be silently ignored).
//
// Part of the plugin ABI (sfb/api/plugin.h): pure virtual, no data members.
#include <cstdint>
#include <string>
#include <string_view>

#include "sfb/io/dataset.h"

namespace sfb::api {

class ModelContext {
 public:
  virtual ~ModelContext() = default;
  virtual int rank() const = 0;
  virtual int ranks() const = 0;
  virtual uint64_t seed() const = 0;             // job.seed
  virtual const io::Dataset& train() const = 0;  // this rank's partition of the training data
  virtual int64_t train_total() const = 0;       // training rows over all ranks (n)
  virtual int64_t minibatch() const = 0;         // K, pairs per worker per clock
  virtual double param_double(std::string_view key, double fallback) const = 0;
  virtual int64_t param_int(std::string_view key, int64_t fallback) const = 0;
  virtual std::string param_string(std::string_view key, std::string_view fallback) const = 0;
  virtual bool param_bool(std::string_view key, bool fallback) const = 0;
};

}  // namespace sfb::api
