#pragma once
// The argument discipline of every installed C++ tool (sfb-plan, mgwfbp-plan, sfb-gradcheck,
// sfb-datagen, sfb-commbench; sfbd has its own in config.cc): exit 0 after --help, 2 after any bad
// argument with a message naming the option and the value; numbers are checked by the validators
// below (CLI::Range alone lets NaN through, and a negative number into an unsigned option).
// CLI11 exits with its own codes (105-109 for a missing or malformed option); parse_args maps them.
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

namespace sfb_tools {

// Parses the command line; an exit code when the tool should exit now: 0 after --help or
// --version, 2 after an argument error (printed by CLI11 when `print`).
inline std::optional<int> parse_args(CLI::App& app, int argc, char** argv, bool print = true) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (print) app.exit(e);
    return e.get_exit_code() == 0 ? 0 : 2;
  }
  return std::nullopt;
}

// `text` as a finite number in [lo, hi] (the whole text: "1e3" yes, "1x", "nan", "inf" no).
inline std::optional<double> finite_in(const std::string& text, double lo, double hi) {
  if (text.empty() || text.size() > 64) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(v) || v < lo || v > hi) return std::nullopt;
  return v;
}

// `text` as an integer in [lo, hi] (no sign games: "-1" is no unsigned number, "1e3" no integer).
template <typename T>
std::optional<T> integer_in(const std::string& text, T lo, T hi) {
  T v{};
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v < lo || v > hi) return std::nullopt;
  return v;
}

// Validators for CLI11 options; the message names the value (CLI11 prefixes the option).
inline CLI::Validator Finite(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        return finite_in(s, lo, hi) ? std::string() : fmt::format("'{}' is not a finite number in [{}, {}]", s, lo, hi);
      },
      fmt::format("FINITE in [{}, {}]", lo, hi));
}

template <typename T>
CLI::Validator Integer(T lo, T hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        return integer_in<T>(s, lo, hi) ? std::string() : fmt::format("'{}' is not an integer in [{}, {}]", s, lo, hi);
      },
      fmt::format("INT in [{}, {}]", lo, hi));
}

// A seed: any unsigned 64-bit integer.
inline CLI::Validator Seed() { return Integer<uint64_t>(0, UINT64_MAX); }

}  // namespace sfb_tools
