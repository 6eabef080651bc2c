#include "sfb/core/log.h"

#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace sfb {

void init_logging(int rank, const std::string& level) {
  auto logger = spdlog::stderr_color_mt(fmt::format("rank{}", rank));
  logger->set_pattern(fmt::format("[%H:%M:%S.%e] [rank {}] [%^%l%$] %v", rank));
  logger->set_level(spdlog::level::from_str(level));
  spdlog::set_default_logger(logger);
}

}  // namespace sfb
