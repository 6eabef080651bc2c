#pragma once
// Every installed tool follows sfbd's exit codes (README): 0 success, 2 bad input. CLI11 exits
// with its own codes (105-109 for a missing or malformed option); this maps them.
#include <optional>

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

}  // namespace sfb_tools
