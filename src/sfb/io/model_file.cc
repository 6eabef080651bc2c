#include "sfb/io/model_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
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
  std::ifstream in(path, std::ios::binary);
  SFB_CHECK_DATA(in.good(), "{}: cannot open model file: {}", path, std::strerror(errno));
  std::byte h[kModelHeaderBytes];
  in.read(reinterpret_cast<char*>(h), kModelHeaderBytes);
  SFB_CHECK_DATA(in.gcount() == static_cast<std::streamsize>(kModelHeaderBytes),
                 "{}: model file is truncated: header needs {} bytes, file has {}", path, kModelHeaderBytes,
                 in.gcount());
  ByteReader r(h, path, ByteReader::Source::kFile);
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
  SFB_CHECK_DATA(rows >= 0 && cols >= 0 && rows <= (int64_t{1} << 31) && cols <= (int64_t{1} << 31),
                 "{}: implausible shape {} x {}", path, rows, cols);
  Matrix w(rows, cols);
  const auto bytes = static_cast<std::streamsize>(w.size() * sizeof(float));
  in.read(reinterpret_cast<char*>(w.data()), bytes);
  SFB_CHECK_DATA(in.gcount() == bytes, "{}: model data is truncated: {} x {} needs {} bytes, found {}", path, rows,
                 cols, bytes, in.gcount());
  in.peek();
  SFB_CHECK_DATA(in.eof(), "{}: trailing bytes after the {} x {} model data", path, rows, cols);
  const uint32_t crc = crc32(std::as_bytes(std::span(w.data(), static_cast<size_t>(w.size()))));
  SFB_CHECK_DATA(crc == expected_crc, "{}: checksum mismatch (stored 0x{:08x}, computed 0x{:08x}): the file is corrupt",
                 path, expected_crc, crc);
  return w;
}

}  // namespace sfb::io
