#include "sfb/io/checkpoint.h"

#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "sfb/core/error.h"
#include "sfb/core/hash.h"
#include "sfb/core/metrics.h"

namespace sfb::io {

static_assert(std::endian::native == std::endian::little, "the checkpoint format is little-endian");

namespace {
constexpr char kMagic[8] = {'S', 'F', 'B', 'C', 'K', 'P', 'T', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kCrcOffset = 64;

template <typename T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(v));
}
template <typename T>
T get(std::span<const std::byte> d, size_t off) {
  T v;
  std::memcpy(&v, d.data() + off, sizeof(v));
  return v;
}

uint32_t checksum(std::span<const std::byte> header, std::span<const std::byte> data) {
  std::byte h[kCheckpointHeaderBytes];
  std::memcpy(h, header.data(), kCheckpointHeaderBytes);
  std::memset(h + kCrcOffset, 0, 4);
  return crc32(data, crc32(std::span<const std::byte>(h, kCheckpointHeaderBytes)));
}
}  // namespace

std::string encode_checkpoint(const Checkpoint& c) {
  std::string out;
  out.reserve(kCheckpointHeaderBytes + static_cast<size_t>(c.W.size()) * 4);
  out.append(kMagic, 8);
  put<uint32_t>(out, kVersion);
  put<uint32_t>(out, 1);
  put<uint64_t>(out, c.fingerprint);
  put<uint64_t>(out, c.seed);
  put<int64_t>(out, c.clock);
  put<int32_t>(out, c.ranks);
  put<uint32_t>(out, 0);
  put<int64_t>(out, c.W.rows());
  put<int64_t>(out, c.W.cols());
  put<uint32_t>(out, 0);  // CRC, filled below
  put<uint32_t>(out, 0);
  out.append(reinterpret_cast<const char*>(c.W.data()), static_cast<size_t>(c.W.size()) * 4);
  const auto bytes = std::as_bytes(std::span(out.data(), out.size()));
  const uint32_t crc = checksum(bytes.first(kCheckpointHeaderBytes), bytes.subspan(kCheckpointHeaderBytes));
  std::memcpy(out.data() + kCrcOffset, &crc, 4);
  return out;
}

Checkpoint decode_checkpoint(std::span<const std::byte> d, const std::string& name) {
  SFB_CHECK_DATA(d.size() >= kCheckpointHeaderBytes, "{}: checkpoint is truncated: {} bytes, the header alone has {}",
                 name, d.size(), kCheckpointHeaderBytes);
  SFB_CHECK_DATA(std::memcmp(d.data(), kMagic, 8) == 0, "{}: bad magic: not an sfb checkpoint", name);
  const auto version = get<uint32_t>(d, 8);
  SFB_CHECK_DATA(version == kVersion, "{}: checkpoint version {} is not supported (expected {})", name, version, kVersion);
  const auto dtype = get<uint32_t>(d, 12);
  SFB_CHECK_DATA(dtype == 1, "{}: dtype {} is not supported (1 = float32)", name, dtype);
  Checkpoint c;
  c.fingerprint = get<uint64_t>(d, 16);
  c.seed = get<uint64_t>(d, 24);
  c.clock = get<int64_t>(d, 32);
  c.ranks = get<int32_t>(d, 40);
  const auto rows = get<int64_t>(d, 48);
  const auto cols = get<int64_t>(d, 56);
  SFB_CHECK_DATA(c.clock >= 0 && c.ranks >= 1, "{}: clock {} / ranks {} are invalid", name, c.clock, c.ranks);
  SFB_CHECK_DATA(rows >= 0 && cols >= 0 && rows <= (int64_t{1} << 31) && cols <= (int64_t{1} << 31),
                 "{}: implausible shape {} x {}", name, rows, cols);
  const auto data_bytes = static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols) * 4;
  SFB_CHECK_DATA(d.size() - kCheckpointHeaderBytes == data_bytes,
                 "{}: checkpoint has {} data bytes, a {} x {} matrix needs {}", name, d.size() - kCheckpointHeaderBytes,
                 rows, cols, data_bytes);
  const auto stored = get<uint32_t>(d, kCrcOffset);
  const uint32_t crc = checksum(d.first(kCheckpointHeaderBytes), d.subspan(kCheckpointHeaderBytes));
  SFB_CHECK_DATA(crc == stored, "{}: checksum mismatch (stored 0x{:08x}, computed 0x{:08x}): the checkpoint is corrupt",
                 name, stored, crc);
  c.W.resize(rows, cols);
  if (data_bytes > 0) std::memcpy(c.W.data(), d.data() + kCheckpointHeaderBytes, static_cast<size_t>(data_bytes));
  return c;
}

void write_checkpoint(const std::string& path, const Checkpoint& c) { write_file_atomic(path, encode_checkpoint(c)); }

Checkpoint read_checkpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  SFB_CHECK_DATA(in.good(), "{}: cannot open checkpoint: {}", path, std::strerror(errno));
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return decode_checkpoint(std::as_bytes(std::span(bytes.data(), bytes.size())), path);
}

}  // namespace sfb::io
