#include "sfb/io/model_file.h"

#include <cstring>
#include <string>

#include "sfb/core/bytes.h"
#include "sfb/core/error.h"
#include "sfb/core/files.h"
#include "sfb/core/hash.h"

namespace sfb::io {

void write_model(const std::string& path, const Matrix& w) {
  const auto data = std::as_bytes(std::span(w.data(), static_cast<size_t>(w.size())));
  ByteWriter out(kModelHeaderBytes + data.size());
  out.put_raw(kModelMagic, 8);
  out.put<uint32_t>(kModelVersion);
  out.put<uint32_t>(1);  // dtype float32
  out.put<int64_t>(w.rows());
  out.put<int64_t>(w.cols());
  out.put<uint32_t>(crc32(data));
  out.put<uint32_t>(0);
  out.put_raw(data.data(), data.size());
  write_file_atomic(path, out.bytes());
}

Matrix read_model(const std::string& path) {
  const Bytes file = read_file(path, "model file");
  SFB_CHECK_DATA(file.size() >= kModelHeaderBytes, "{}: model file is truncated: header needs {} bytes, file has {}",
                 path, kModelHeaderBytes, file.size());
  ByteReader r(file, path, ByteReader::Source::kFile);
  SFB_CHECK_DATA(std::memcmp(r.take(8, "magic").data(), kModelMagic, 8) == 0, "{}: bad magic: not an sfb model file",
                 path);
  const auto version = r.get<uint32_t>("version");
  SFB_CHECK_DATA(version == kModelVersion, "{}: model format version {} is not supported (expected {})", path, version,
                 kModelVersion);
  const auto dtype = r.get<uint32_t>("dtype");
  SFB_CHECK_DATA(dtype == 1, "{}: dtype {} is not supported (1 = float32)", path, dtype);
  const auto rows = r.get<int64_t>("rows");
  const auto cols = r.get<int64_t>("cols");
  const auto expected_crc = r.get<uint32_t>("CRC");
  r.skip(4, "reserved");
  SFB_CHECK_DATA(rows >= 0 && cols >= 0 && rows <= (int64_t{1} << 31) && cols <= (int64_t{1} << 31),
                 "{}: implausible shape {} x {}", path, rows, cols);
  // The shape is checked against the file's length before anything is allocated (rows * cols
  // compared by division: 2^31 x 2^31 x 4 bytes would overflow 64 bits).
  const uint64_t elems = r.remaining() / sizeof(float);
  SFB_CHECK_DATA(cols == 0 || static_cast<uint64_t>(rows) <= elems / static_cast<uint64_t>(cols),
                 "{}: model data is truncated: {} x {} floats, the file holds {} bytes of data", path, rows, cols,
                 r.remaining());
  const uint64_t bytes = static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols) * sizeof(float);
  SFB_CHECK_DATA(r.remaining() == bytes, "{}: trailing bytes after the {} x {} model data", path, rows, cols);
  Matrix w(rows, cols);
  r.get_array(w.data(), static_cast<size_t>(w.size()), "W");
  const uint32_t crc = crc32(std::as_bytes(std::span(w.data(), static_cast<size_t>(w.size()))));
  SFB_CHECK_DATA(crc == expected_crc, "{}: checksum mismatch (stored 0x{:08x}, computed 0x{:08x}): the file is corrupt",
                 path, expected_crc, crc);
  return w;
}

}  // namespace sfb::io
