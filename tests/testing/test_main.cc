// GoogleTest main: training progress logs stay quiet unless SFB_TEST_LOG=info (or debug) is set.
#include <cstdlib>

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const char* level = std::getenv("SFB_TEST_LOG");
  spdlog::set_level(spdlog::level::from_str(level ? level : "warn"));
  return RUN_ALL_TESTS();
}
