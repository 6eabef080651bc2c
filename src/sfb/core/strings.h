#pragma once
// Small string helpers shared by the parsers of profiles, network specs and the like.
#include <sstream>
#include <string>
#include <vector>

namespace sfb {

// Splits `s` at `sep`, trimming spaces, tabs and carriage returns around every field.
inline std::vector<std::string> split_trimmed(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) {
    const auto b = item.find_first_not_of(" \t\r");
    const auto e = item.find_last_not_of(" \t\r");
    out.push_back(b == std::string::npos ? std::string() : item.substr(b, e - b + 1));
  }
  return out;
}

}  // namespace sfb
