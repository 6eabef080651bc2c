#pragma once
// Models by name: the built-in ones (config model.name) and plugins (model.plugin). Built-in
// models are created through the same factory signature as plugins: from a ModelContext.
#include <functional>
#include <string>
#include <vector>

#include "sfb/api/model_context.h"
#include "sfb/core/config.h"
#include "sfb/models/plugin_loader.h"

namespace sfb::models {

struct BuiltinModel {
  std::string name;
  std::function<api::Model*(const api::ModelContext&)> create;
};
const std::vector<BuiltinModel>& builtin_models();
std::vector<std::string> model_names();

// The built-in model `name`, created from ctx.
ModelPtr make_model(const std::string& name, const api::ModelContext& ctx);
// The configured model: model.plugin when set, else model.name. Unread [model.params] keys are an
// error.
ModelPtr make_model(const Config& cfg, const io::Dataset& train, int64_t train_total, int rank, int ranks);

}  // namespace sfb::models
