#include "sfb/io/model_file.h"

#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include "sfb/core/error.h"
#include "sfb/core/hash.h"
#include "sfb/core/metrics.h"

namespace sfb::io {

static_assert(std::endian::native == std::endian::little, "the model format is little-endian");

namespace {
template <typename T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(v));
}
template <typename T>
T get(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
}  // namespace

void write_model(const std::string& path, const Matrix& w) {
  const auto data = std::as_bytes(std::span(w.data(), static_cast<size_t>(w.size())));
  std::string out;
  out.reserve(kModelHeaderBytes + data.size());
  out.append(kModelMagic, 8);
  put<uint32_t>(out, kModelVersion);
  put<uint32_t>(out, 1);
  put<int64_t>(out, w.rows());
  put<int64_t>(out, w.cols());
  put<uint32_t>(out, crc32(data));
  put<uint32_t>(out, 0);
  out.append(reinterpret_cast<const char*>(data.data()), data.size());
  write_file_atomic(path, out);
}

Matrix read_model(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  SFB_CHECK_DATA(in.good(), "{}: cannot open model file: {}", path, std::strerror(errno));
  char h[kModelHeaderBytes];
  in.read(h, kModelHeaderBytes);
  SFB_CHECK_DATA(in.gcount() == static_cast<std::streamsize>(kModelHeaderBytes),
                 "{}: model file is truncated: header needs {} bytes, file has {}", path, kModelHeaderBytes,
                 in.gcount());
  SFB_CHECK_DATA(std::memcmp(h, kModelMagic, 8) == 0, "{}: bad magic: not an sfb model file", path);
  const auto version = get<uint32_t>(h + 8);
  SFB_CHECK_DATA(version == kModelVersion, "{}: model format version {} is not supported (expected {})", path,
                 version, kModelVersion);
  const auto dtype = get<uint32_t>(h + 12);
  SFB_CHECK_DATA(dtype == 1, "{}: dtype {} is not supported (1 = float32)", path, dtype);
  const auto rows = get<int64_t>(h + 16);
  const auto cols = get<int64_t>(h + 24);
  SFB_CHECK_DATA(rows >= 0 && cols >= 0 && rows <= (int64_t{1} << 31) && cols <= (int64_t{1} << 31),
                 "{}: implausible shape {} x {}", path, rows, cols);
  const auto expected_crc = get<uint32_t>(h + 32);
  Matrix w(rows, cols);
  const auto bytes = static_cast<std::streamsize>(w.size() * sizeof(float));
  in.read(reinterpret_cast<char*>(w.data()), bytes);
  SFB_CHECK_DATA(in.gcount() == bytes, "{}: model data is truncated: {} x {} needs {} bytes, found {}", path,
                 rows, cols, bytes, in.gcount());
  in.peek();
  SFB_CHECK_DATA(in.eof(), "{}: trailing bytes after the {} x {} model data", path, rows, cols);
  const uint32_t crc = crc32(std::as_bytes(std::span(w.data(), static_cast<size_t>(w.size()))));
  SFB_CHECK_DATA(crc == expected_crc, "{}: checksum mismatch (stored 0x{:08x}, computed 0x{:08x}): the file is corrupt",
                 path, expected_crc, crc);
  return w;
}

}  // namespace sfb::io
