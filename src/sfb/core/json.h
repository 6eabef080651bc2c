#pragma once
// JSON for everything sfb writes as JSON (metrics lines, summaries, Chrome traces) and for the
// tests that read it back: nlohmann::json (Debian's nlohmann-json3-dev), objects keeping their
// insertion order. NaN and infinities are written as null (JSON has neither).
//
// Numbers measured in floats are rounded before they go in, so files stay readable: sig() keeps
// `digits` significant digits, fixed() `decimals` decimals (the same values the text formats
// "{:.8g}" and "{:.6f}" give).
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sfb/core/config.h"

namespace sfb {

using Json = nlohmann::ordered_json;

// A config choice goes into JSON by its name: these exact overloads win over nlohmann's own
// enum-as-integer conversion (found by ADL wherever this header is included).
inline void to_json(Json& j, JobMode e) { j = std::string(name(e)); }
inline void to_json(Json& j, Device e) { j = std::string(name(e)); }
inline void to_json(Json& j, Scheme e) { j = std::string(name(e)); }
inline void to_json(Json& j, TransportKind e) { j = std::string(name(e)); }
inline void to_json(Json& j, Collectives e) { j = std::string(name(e)); }
inline void to_json(Json& j, Broadcast e) { j = std::string(name(e)); }
inline void to_json(Json& j, DataFormat e) { j = std::string(name(e)); }
inline void to_json(Json& j, Partition e) { j = std::string(name(e)); }
inline void to_json(Json& j, Snapshot e) { j = std::string(name(e)); }
inline void to_json(Json& j, CnnKernels e) { j = std::string(name(e)); }
inline void to_json(Json& j, TraceRanks e) { j = std::string(name(e)); }

inline double sig(double v, int digits) {
  if (!std::isfinite(v)) return v;
  return std::strtod(fmt::format("{:.{}g}", v, digits).c_str(), nullptr);
}
inline double fixed(double v, int decimals) {
  if (!std::isfinite(v)) return v;
  return std::strtod(fmt::format("{:.{}f}", v, decimals).c_str(), nullptr);
}

// Every JSON document sfb reads (scheme profiles, summaries): `text` parsed with a nesting limit,
// enforced while it is parsed (a value nested deeper is refused before it is built, so nothing
// recurses over it), and every syntax error turned into DataError naming `name`.
Json parse_json(std::string_view text, const std::string& name, int max_depth = 32);
// The JSON file `path` (the `what` of the errors): at most `max_bytes` (refused by its size before
// it is read) and parsed as parse_json does. DataError naming the path.
Json read_json_file(const std::string& path, const std::string& what, int64_t max_bytes = int64_t{64} << 20);
// The string at `key` of object `j` ("" when absent); DataError naming `name` and the key when the
// value is there but not a string.
std::string json_string(const Json& j, const std::string& key, const std::string& name);

// One line of JSON (metrics.jsonl), or the indented form (summary.json).
inline std::string to_line(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }
inline std::string to_document(const Json& j) { return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n"; }

}  // namespace sfb
