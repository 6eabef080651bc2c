#pragma once
// Small string helpers shared by the parsers of profiles, network specs and the like.
#include <cstdio>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace sfb {

// `s` without the spaces, tabs and carriage returns around it.
inline std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  const auto e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// Splits `s` at `sep`, trimming every field.
inline std::vector<std::string> split_trimmed(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) out.push_back(trim(item));
  return out;
}

// `s` as it may appear in a message: non-printable bytes as \xNN, cut after `max` characters
// with the total length said ("abc... (104857600 bytes)"). Input echoed in errors goes through it.
inline std::string excerpt(std::string_view s, size_t max = 80) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < max; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  if (s.size() > max) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

}  // namespace sfb
