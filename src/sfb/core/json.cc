#include "sfb/core/json.h"

#include "sfb/core/error.h"
#include "sfb/core/files.h"

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

Json read_json_file(const std::string& path, const std::string& what, int64_t max_bytes) {
  const Bytes b = read_file(path, what, max_bytes);
  return parse_json(std::string_view(reinterpret_cast<const char*>(b.data()), b.size()), path);
}

std::string json_string(const Json& j, const std::string& key, const std::string& name) {
  if (!j.is_object() || !j.contains(key)) return "";
  const Json& v = j[key];
  SFB_CHECK_DATA(v.is_string(), "{}: \"{}\" must be a string, got {}", name, key, v.type_name());
  return v.get<std::string>();
}

}  // namespace sfb
