#pragma once
// Logging setup: spdlog's default logger writes to stderr, every line tagged with the rank.
// Libraries log through spdlog only and never print to stdout.
#include <string>

namespace sfb {

void init_logging(int rank, const std::string& level);

}  // namespace sfb
