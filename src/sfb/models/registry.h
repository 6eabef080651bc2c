#pragma once
// Built-in models by name (config model.name).
#include <memory>
#include <string>
#include <vector>

#include "sfb/api/model.h"

namespace sfb::models {

std::unique_ptr<api::Model> make_model(const std::string& name);
std::vector<std::string> model_names();

}  // namespace sfb::models
