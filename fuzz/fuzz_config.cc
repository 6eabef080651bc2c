// Fuzzes the config loader: any text (and any --set override) must load or throw InvalidArgument.
#include <cstddef>
#include <cstdint>
#include <string>

#include "sfb/core/config.h"
#include "sfb/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto c = sfb::parse_config(text, "fuzz.toml");
    (void)c.fingerprint();
  } catch (const sfb::InvalidArgument&) {
  }
  // The same bytes as a --set override of a valid config.
  try {
    sfb::parse_config("[data]\nformat = \"synthetic\"\nfeatures = 4\nclasses = 2\n", "fuzz.toml", {text});
  } catch (const sfb::InvalidArgument&) {
  }
  return 0;
}
