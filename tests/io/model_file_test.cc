#include "sfb/io/model_file.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sfb/core/error.h"

namespace sfb::io {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string path_for(const std::string& name) {
  return (fs::temp_directory_path() / (name + "_" + std::to_string(::getpid()))).string();
}

std::string error_reading(const std::string& path) {
  try {
    read_model(path);
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

void patch(const std::string& path, std::streamoff off, char c) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(off);
  f.put(c);
}

TEST(ModelFile, RoundTripsExactly) {
  const auto path = path_for("model_rt");
  for (auto [r, c] : {std::pair{0, 0}, {1, 1}, {10, 785}}) {
    const Matrix w = Matrix::Random(r, c);
    write_model(path, w);
    EXPECT_EQ(read_model(path), w);
    EXPECT_EQ(fs::file_size(path), kModelHeaderBytes + 4 * static_cast<size_t>(r * c));
  }
  for (const auto& e : fs::directory_iterator(fs::temp_directory_path()))
    EXPECT_EQ(e.path().string().find(path + ".tmp"), std::string::npos) << "temporary file left behind";
  fs::remove(path);
}

TEST(ModelFile, CorruptionIsDetectedAndNamed) {
  const auto path = path_for("model_bad");
  const Matrix w = Matrix::Random(3, 5);
  write_model(path, w);
  patch(path, kModelHeaderBytes + 7, 0x5a);
  EXPECT_THAT(error_reading(path), HasSubstr("checksum mismatch"));
  write_model(path, w);
  patch(path, 0, 'X');
  EXPECT_THAT(error_reading(path), HasSubstr("bad magic"));
  write_model(path, w);
  patch(path, 8, 9);
  EXPECT_THAT(error_reading(path), HasSubstr("version 9 is not supported"));
  write_model(path, w);
  fs::resize_file(path, fs::file_size(path) - 4);
  EXPECT_THAT(error_reading(path), HasSubstr("model data is truncated"));
  fs::resize_file(path, 20);
  EXPECT_THAT(error_reading(path), HasSubstr("header needs 40 bytes"));
  EXPECT_THAT(error_reading(path + ".missing"), HasSubstr("cannot read model file"));
  fs::remove(path);
}

}  // namespace
}  // namespace sfb::io
