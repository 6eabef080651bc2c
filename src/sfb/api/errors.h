#pragma once
// Errors a plugin may throw to say what is wrong (part of the plugin API; no dependency beyond
// the standard library).
//
//   throw sfb::api::ConfigError("label_smoothing must be in [0, 1), got 1.5");
//
// sfbd reports a ConfigError from a plugin's constructor or init() like any bad config value:
// named with the plugin, once, and with exit code 2 before the ranks start training. Any other
// exception from plugin code (std::exception or not) ends the job as a failed rank (exit code 3),
// its message prefixed with the plugin and the call that threw.
#include <stdexcept>

namespace sfb::api {

class ConfigError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

}  // namespace sfb::api
