#pragma once
// Loads a user model from a shared library (sfb/api/plugin.h): dlopen, the ABI version check, the
// factory call. The library stays loaded as long as the model it made; the model is destroyed by
// the library's own sfb_plugin_destroy. A missing file, a missing symbol or another ABI version
// throws InvalidArgument naming the file.
#include <memory>
#include <string>

#include "sfb/api/plugin.h"

namespace sfb::models {

// Deletes a model the way it was made: with `destroy` from its library (kept loaded by `library`),
// or with delete for a built-in model.
struct ModelDeleter {
  api::PluginDestroyFn destroy = nullptr;
  std::shared_ptr<void> library;
  void operator()(api::Model* m) const {
    if (destroy)
      destroy(m);
    else
      delete m;
  }
};
using ModelPtr = std::unique_ptr<api::Model, ModelDeleter>;

ModelPtr load_plugin(const std::string& path, const api::ModelContext& ctx);

}  // namespace sfb::models
