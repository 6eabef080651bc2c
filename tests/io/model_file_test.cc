#include "sfb/io/model_file.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sfb/core/bytes.h"
#include "sfb/core/error.h"
#include "sfb/core/hash.h"

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
  // The label map is covered by the CRC and must be ascending.
  write_model(path, w, ModelMeta{kModelVersion, 0, 0, {-1, 3, 7}, false});
  patch(path, kModelHeaderBytes + 8, 9);  // label 3 -> 9: above the next, 7
  EXPECT_THAT(error_reading(path), HasSubstr("labels are not ascending: class 2 is label 7 after 9"));
  write_model(path, w, ModelMeta{kModelVersion, 0, 0, {-1, 3, 7}, false});
  patch(path, kModelHeaderBytes + 8, 4);  // label 3 -> 4: ascending, but not what was written
  EXPECT_THAT(error_reading(path), HasSubstr("checksum mismatch"));
  write_model(path, w);
  patch(path, 40, 100);  // 100 labels in a file that has room for none
  EXPECT_THAT(error_reading(path), HasSubstr("label count 100 does not fit the file"));
  EXPECT_THAT(error_reading(path + ".missing"), HasSubstr("cannot read model file"));
  fs::remove(path);
}

TEST(ModelFile, KeepsTheLabelMapAndTheBiasFlag) {
  const auto path = path_for("model_labels");
  const Matrix w = Matrix::Random(3, 4);
  write_model(path, w, ModelMeta{kModelVersion, 0, 0, {-5, 2, 40}, true});
  ModelMeta meta;
  EXPECT_EQ(read_model(path, &meta), w);
  EXPECT_EQ(meta.version, kModelVersion);
  EXPECT_EQ(meta.labels, (std::vector<int64_t>{-5, 2, 40}));
  EXPECT_TRUE(meta.bias);
  EXPECT_EQ(fs::file_size(path), kModelHeaderBytes + 3 * 8 + 4 * 12);
  const ModelMeta head = read_model_meta(path);
  EXPECT_EQ(head.labels, meta.labels);
  EXPECT_EQ(head.rows, 3);
  EXPECT_EQ(head.cols, 4);
  fs::remove(path);
}

// A file of format version 1 (before label maps), written byte by byte as docs/formats.md
// describes it, still loads: no labels, no bias flag.
TEST(ModelFile, ReadsVersionOneFiles) {
  const auto path = path_for("model_v1");
  const Matrix w = Matrix::Random(2, 3);
  Matrix row_major = w;  // Matrix is row-major: its bytes are the file's data
  const auto data = std::as_bytes(std::span(row_major.data(), 6));
  ByteWriter out;
  out.put_raw(kModelMagic, 8);
  out.put<uint32_t>(1);
  out.put<uint32_t>(1);
  out.put<int64_t>(2);
  out.put<int64_t>(3);
  out.put<uint32_t>(crc32(data));
  out.put<uint32_t>(0);
  out.put_raw(data.data(), data.size());
  const Bytes bytes = out.take();
  {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  ModelMeta meta;
  EXPECT_EQ(read_model(path, &meta), w);
  EXPECT_EQ(meta.version, 1u);
  EXPECT_TRUE(meta.labels.empty());
  EXPECT_FALSE(meta.bias);
  patch(path, 40, 0x33);
  EXPECT_THAT(error_reading(path), HasSubstr("checksum mismatch"));
  fs::remove(path);
}

}  // namespace
}  // namespace sfb::io
