#include "sfb/io/checkpoint.h"

#include <cstring>

#include "sfb/core/bytes.h"
#include "sfb/core/config.h"
#include "sfb/core/error.h"
#include "sfb/core/files.h"
#include "sfb/core/hash.h"

namespace sfb::io {

namespace {
constexpr char kMagic[8] = {'S', 'F', 'B', 'C', 'K', 'P', 'T', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kCrcOffset = 64;

// CRC-32 of the header with its CRC field zeroed, then of the data.
uint32_t checksum(std::span<const std::byte> header, std::span<const std::byte> data) {
  std::byte h[kCheckpointHeaderBytes];
  std::memcpy(h, header.data(), kCheckpointHeaderBytes);
  std::memset(h + kCrcOffset, 0, 4);
  return crc32(data, crc32(std::span<const std::byte>(h, kCheckpointHeaderBytes)));
}
}  // namespace

Bytes encode_checkpoint(const Checkpoint& c) {
  ByteWriter w(kCheckpointHeaderBytes + static_cast<size_t>(c.W.size()) * 4);
  w.put_raw(kMagic, 8);
  w.put<uint32_t>(kVersion);
  w.put<uint32_t>(1);  // dtype float32
  w.put<uint64_t>(c.fingerprint);
  w.put<uint64_t>(c.seed);
  w.put<int64_t>(c.clock);
  w.put<int32_t>(c.ranks);
  w.put<uint32_t>(0);
  w.put<int64_t>(c.W.rows());
  w.put<int64_t>(c.W.cols());
  w.put<uint32_t>(0);  // CRC, filled below
  w.put<uint32_t>(0);
  w.put_array(c.W.data(), static_cast<size_t>(c.W.size()));
  const auto bytes = w.bytes();
  w.put_at<uint32_t>(kCrcOffset, checksum(bytes.first(kCheckpointHeaderBytes), bytes.subspan(kCheckpointHeaderBytes)));
  return w.take();
}

Checkpoint decode_checkpoint(std::span<const std::byte> d, const std::string& name) {
  SFB_CHECK_DATA(d.size() >= kCheckpointHeaderBytes, "{}: checkpoint is truncated: {} bytes, the header alone has {}",
                 name, d.size(), kCheckpointHeaderBytes);
  ByteReader r(d, name, ByteReader::Source::kFile);
  SFB_CHECK_DATA(std::memcmp(r.take(8, "magic").data(), kMagic, 8) == 0, "{}: bad magic: not an sfb checkpoint", name);
  const auto version = r.get<uint32_t>("version");
  SFB_CHECK_DATA(version == kVersion, "{}: checkpoint version {} is not supported (expected {})", name, version,
                 kVersion);
  const auto dtype = r.get<uint32_t>("dtype");
  SFB_CHECK_DATA(dtype == 1, "{}: dtype {} is not supported (1 = float32)", name, dtype);
  Checkpoint c;
  c.fingerprint = r.get<uint64_t>("fingerprint");
  c.seed = r.get<uint64_t>("seed");
  c.clock = r.get<int64_t>("clock");
  c.ranks = r.get<int32_t>("ranks");
  r.skip(4, "reserved");
  const auto rows = r.get<int64_t>("rows");
  const auto cols = r.get<int64_t>("cols");
  const auto stored = r.get<uint32_t>("CRC");
  r.skip(4, "reserved");
  SFB_CHECK_DATA(c.clock >= 0 && c.clock <= kMaxClock && c.ranks >= 1,
                 "{}: clock {} / ranks {} are invalid (clocks are 0 to 2^53)", name, c.clock, c.ranks);
  SFB_CHECK_DATA(rows >= 0 && cols >= 0 && rows <= (int64_t{1} << 31) && cols <= (int64_t{1} << 31),
                 "{}: implausible shape {} x {}", name, rows, cols);
  // 2^31 x 2^31 x 4 bytes would overflow 64 bits: the product is checked, never wrapped.
  uint64_t data_bytes = 0;
  SFB_CHECK_DATA(!__builtin_mul_overflow(static_cast<uint64_t>(rows), static_cast<uint64_t>(cols) * 4, &data_bytes),
                 "{}: a {} x {} matrix is more than any checkpoint holds", name, rows, cols);
  SFB_CHECK_DATA(r.remaining() == data_bytes, "{}: checkpoint has {} data bytes, a {} x {} matrix needs {}", name,
                 r.remaining(), rows, cols, data_bytes);
  const uint32_t crc = checksum(d.first(kCheckpointHeaderBytes), d.subspan(kCheckpointHeaderBytes));
  SFB_CHECK_DATA(crc == stored, "{}: checksum mismatch (stored 0x{:08x}, computed 0x{:08x}): the checkpoint is corrupt",
                 name, stored, crc);
  c.W.resize(rows, cols);
  r.get_array(c.W.data(), static_cast<size_t>(c.W.size()), "W");
  return c;
}

void write_checkpoint(const std::string& path, const Checkpoint& c) { write_file_atomic(path, encode_checkpoint(c)); }

Checkpoint read_checkpoint(const std::string& path) { return decode_checkpoint(read_file(path, "checkpoint"), path); }

}  // namespace sfb::io
