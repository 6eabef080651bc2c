#include "sfb/core/json.h"

#include "sfb/core/error.h"

namespace sfb {

Json parse_json(std::string_view text, const std::string& name, int max_depth) {
  try {
    return Json::parse(text, [&](int depth, Json::parse_event_t, Json&) {
      if (depth > max_depth)
        throw DataError(fmt::format("{}: JSON nested deeper than {} levels: refused", name, max_depth));
      return true;
    });
  } catch (const Json::exception& e) {
    throw DataError(fmt::format("{}: not JSON: {}", name, e.what()));
  }
}

std::string json_string(const Json& j, const std::string& key, const std::string& name) {
  if (!j.is_object() || !j.contains(key)) return "";
  const Json& v = j[key];
  SFB_CHECK_DATA(v.is_string(), "{}: \"{}\" must be a string, got {}", name, key, v.type_name());
  return v.get<std::string>();
}

}  // namespace sfb
