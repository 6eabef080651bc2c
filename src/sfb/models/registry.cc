#include "sfb/models/registry.h"

#include <fmt/ranges.h>

#include "sfb/core/error.h"
#include "sfb/models/mlr.h"

namespace sfb::models {

std::vector<std::string> model_names() { return {"mlr"}; }

std::unique_ptr<api::Model> make_model(const std::string& name) {
  if (name == "mlr") return std::make_unique<Mlr>();
  throw InvalidArgument(fmt::format("model.name: unknown model \"{}\"; built-in models are: {}", name,
                                    fmt::join(model_names(), ", ")));
}

}  // namespace sfb::models
