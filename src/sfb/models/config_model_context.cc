#include "sfb/models/config_model_context.h"

#include <charconv>
#include <vector>

#include <fmt/ranges.h>

#include "sfb/core/error.h"

namespace sfb::models {

ConfigModelContext::Found ConfigModelContext::find(std::string_view key) const {
  read_.emplace(key);
  for (const auto& p : cfg_.model.params)
    if (p.key == key) return {p.value, p.type, p.where};
  const std::string full = fmt::format("model.{}", key);
  std::string text = config_value(cfg_, full);
  if (text.empty()) return {};
  std::string type = text.front() == '"' ? "string" : (text == "true" || text == "false") ? "boolean" : "number";
  return {std::move(text), std::move(type), fmt::format("{} ({})", cfg_.source, full)};
}

double ConfigModelContext::param_double(std::string_view key, double fallback) const {
  const Found f = find(key);
  if (f.text.empty()) return fallback;
  SFB_CHECK(f.type == "integer" || f.type == "float" || f.type == "number",
            "{}: model.params.{} must be a number, got {}", f.where, key, f.text);
  try {
    return std::stod(f.text);
  } catch (const std::exception&) {
    throw InvalidArgument(fmt::format("{}: model.params.{} must be a number, got {}", f.where, key, f.text));
  }
}

int64_t ConfigModelContext::param_int(std::string_view key, int64_t fallback) const {
  const Found f = find(key);
  if (f.text.empty()) return fallback;
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(f.text.data(), f.text.data() + f.text.size(), v);
  SFB_CHECK(ec == std::errc() && end == f.text.data() + f.text.size(), "{}: model.params.{} must be an integer, got {}",
            f.where, key, f.text);
  return v;
}

std::string ConfigModelContext::param_string(std::string_view key, std::string_view fallback) const {
  const Found f = find(key);
  if (f.text.empty()) return std::string(fallback);
  SFB_CHECK(f.type == "string", "{}: model.params.{} must be a string, got {}", f.where, key, f.text);
  return f.text.substr(1, f.text.size() - 2);
}

bool ConfigModelContext::param_bool(std::string_view key, bool fallback) const {
  const Found f = find(key);
  if (f.text.empty()) return fallback;
  SFB_CHECK(f.type == "boolean", "{}: model.params.{} must be true or false, got {}", f.where, key, f.text);
  return f.text == "true";
}

void ConfigModelContext::check_all_params_read(const std::string& model_name) const {
  std::vector<std::string> asked(read_.begin(), read_.end());
  for (const auto& p : cfg_.model.params)
    SFB_CHECK(read_.count(p.key) > 0, "{}: unknown key model.params.{}: model \"{}\" reads {}", p.where, p.key,
              model_name, asked.empty() ? std::string("no parameters") : fmt::format("{}", fmt::join(asked, ", ")));
}

}  // namespace sfb::models
