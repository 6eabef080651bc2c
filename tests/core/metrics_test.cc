// JsonlWriter: the metrics file is made of complete lines, and a resumed run continues it.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "sfb/core/metrics.h"

namespace sfb {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(JsonlWriter, AResumedRunContinuesTheFileFromItsClock) {
  const std::string path = ::testing::TempDir() + "/continue.jsonl";
  {
    std::ofstream out(path);
    out << "{\"clock\":0,\"objective\":2.3}\n{\"clock\":100,\"objective\":1.0}\n{\"clock\":200,\"objective\":0.9}\n"
           "{\"clock\":300,\"objective\":0.8}\n{\"clock\":400,\"obj";  // the interrupted run's half line
  }
  JsonlWriter w;
  w.open_continuing(path, 200);
  w.write("{\"clock\":200,\"objective\":0.9}");
  w.write("{\"clock\":300,\"objective\":0.7}");
  EXPECT_EQ(read_all(path),
            "{\"clock\":0,\"objective\":2.3}\n{\"clock\":100,\"objective\":1.0}\n{\"clock\":200,\"objective\":0.9}\n"
            "{\"clock\":300,\"objective\":0.7}\n");
  // CNN runs count iterations; a missing file is created.
  const std::string cnn = ::testing::TempDir() + "/continue_cnn.jsonl";
  std::filesystem::remove(cnn);
  {
    std::ofstream out(cnn);
    out << "{\"iteration\":10,\"loss\":1}\n{\"iteration\":20,\"loss\":0.5}\n";
  }
  w.open_continuing(cnn, 20);
  EXPECT_EQ(read_all(cnn), "{\"iteration\":10,\"loss\":1}\n");
  const std::string none = ::testing::TempDir() + "/continue_none.jsonl";
  std::filesystem::remove(none);
  w.open_continuing(none, 50);
  w.write("{\"clock\":50}");
  EXPECT_EQ(read_all(none), "{\"clock\":50}\n");
}

TEST(JsonlWriter, OpenStartsOver) {
  const std::string path = ::testing::TempDir() + "/over.jsonl";
  {
    std::ofstream out(path);
    out << "old\n";
  }
  JsonlWriter w(path);
  w.write("{\"clock\":0}");
  EXPECT_EQ(read_all(path), "{\"clock\":0}\n");
}

}  // namespace
}  // namespace sfb
