#include "sfb/io/checkpoint.h"

#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "sfb/core/bytes.h"
#include "sfb/core/config.h"
#include "sfb/core/error.h"
#include "sfb/core/files.h"
#include "sfb/core/hash.h"
#include "sfb/core/memory.h"

namespace sfb::io {

namespace {
constexpr char kMagic[8] = {'S', 'F', 'B', 'C', 'K', 'P', 'T', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kCrcOffset = 64;

// The header with CRC `crc`.
Bytes encode_header(const CheckpointInfo& c, uint32_t crc) {
  ByteWriter w(kCheckpointHeaderBytes);
  w.put_raw(kMagic, 8);
  w.put<uint32_t>(kVersion);
  w.put<uint32_t>(1);  // dtype float32
  w.put<uint64_t>(c.fingerprint);
  w.put<uint64_t>(c.seed);
  w.put<int64_t>(c.clock);
  w.put<int32_t>(c.ranks);
  uint64_t lr = 0;
  std::memcpy(&lr, &c.lr, 8);
  w.put<uint32_t>(static_cast<uint32_t>(lr));
  w.put<int64_t>(c.rows);
  w.put<int64_t>(c.cols);
  w.put<uint32_t>(crc);
  w.put<uint32_t>(static_cast<uint32_t>(lr >> 32));
  return w.take();
}

// The CRC of the header with its CRC field zeroed: where the data's CRC starts.
uint32_t header_crc(std::span<const std::byte> header) {
  std::byte h[kCheckpointHeaderBytes];
  std::memcpy(h, header.data(), kCheckpointHeaderBytes);
  std::memset(h + kCrcOffset, 0, 4);
  return crc32(std::span<const std::byte>(h, kCheckpointHeaderBytes));
}

uint32_t stored_crc(std::span<const std::byte> header) {
  uint32_t crc = 0;
  std::memcpy(&crc, header.data() + kCrcOffset, 4);
  return crc;
}

// The magic, version and dtype of this format's header: its CRC can be computed (a file of another
// version is reported by its version).
bool is_v1_header(std::span<const std::byte> header) {
  if (header.size() < kCheckpointHeaderBytes || std::memcmp(header.data(), kMagic, 8) != 0) return false;
  uint32_t version = 0, dtype = 0;
  std::memcpy(&version, header.data() + 8, 4);
  std::memcpy(&dtype, header.data() + 12, 4);
  return version == kVersion && dtype == 1;
}

// What a failed CRC says, with the structural check the header failed (`header_says`, "" when
// none): its fields cannot be trusted, so that check is only the header's word.
std::string corrupt(const std::string& name, uint32_t stored, uint32_t computed, const std::string& header_says) {
  return fmt::format(
      "{}: checksum mismatch (stored 0x{:08x}, computed 0x{:08x}): the checkpoint is corrupt{}", name, stored, computed,
      header_says.empty() ? "" : fmt::format(" (its header cannot be trusted; it says: {})", header_says));
}

// A header that failed a structural check (`header_says`): when the file's CRC fails too, it is
// reported as corrupt (its fields cannot be trusted); an intact file is left to the check's
// message. Only a file with the magic, version and dtype of a checkpoint is read to the end for this.
void refuse_if_corrupt(FileReader& in, std::span<const std::byte> header, const std::string& name,
                       const std::string& header_says) {
  if (!is_v1_header(header)) return;
  const uint32_t crc = in.crc32_of_next(in.size() - kCheckpointHeaderBytes, header_crc(header), "W");
  if (crc != stored_crc(header)) throw DataError(corrupt(name, stored_crc(header), crc, header_says));
}

CheckpointInfo info_of(const Checkpoint& c) {
  return {c.fingerprint, c.seed, c.clock, c.ranks, c.W.rows(), c.W.cols(), c.lr};
}
}  // namespace

CheckpointInfo decode_checkpoint_header(std::span<const std::byte> d, uint64_t data_bytes, const std::string& name) {
  SFB_CHECK_DATA(d.size() >= kCheckpointHeaderBytes, "{}: checkpoint is truncated: {} bytes, the header alone has {}",
                 name, d.size(), kCheckpointHeaderBytes);
  ByteReader r(d.first(kCheckpointHeaderBytes), name, ByteReader::Source::kFile);
  SFB_CHECK_DATA(std::memcmp(r.take(8, "magic").data(), kMagic, 8) == 0, "{}: bad magic: not an sfb checkpoint", name);
  const auto version = r.get<uint32_t>("version");
  SFB_CHECK_DATA(version == kVersion, "{}: checkpoint version {} is not supported (expected {})", name, version,
                 kVersion);
  const auto dtype = r.get<uint32_t>("dtype");
  SFB_CHECK_DATA(dtype == 1, "{}: dtype {} is not supported (1 = float32)", name, dtype);
  CheckpointInfo c;
  c.fingerprint = r.get<uint64_t>("fingerprint");
  c.seed = r.get<uint64_t>("seed");
  c.clock = r.get<int64_t>("clock");
  c.ranks = r.get<int32_t>("ranks");
  const uint64_t lr_low = r.get<uint32_t>("lr (low half)");
  c.rows = r.get<int64_t>("rows");
  c.cols = r.get<int64_t>("cols");
  r.skip(4, "CRC");
  const uint64_t lr_bits = lr_low | (uint64_t{r.get<uint32_t>("lr (high half)")} << 32);
  std::memcpy(&c.lr, &lr_bits, 8);
  SFB_CHECK_DATA(c.lr == 0 || (std::isfinite(c.lr) && c.lr > 0 && c.lr <= 1e6),
                 "{}: the learning rate {} it records is not a rate", name, c.lr);
  SFB_CHECK_DATA(c.clock >= 0 && c.clock <= kMaxClock && c.ranks >= 1,
                 "{}: clock {} / ranks {} are invalid (clocks are 0 to 2^53)", name, c.clock, c.ranks);
  SFB_CHECK_DATA(c.rows >= 0 && c.cols >= 0 && c.rows <= (int64_t{1} << 31) && c.cols <= (int64_t{1} << 31),
                 "{}: implausible shape {} x {}", name, c.rows, c.cols);
  // 2^31 x 2^31 x 4 bytes would overflow 64 bits: the product is checked, never wrapped.
  uint64_t need = 0;
  SFB_CHECK_DATA(!__builtin_mul_overflow(static_cast<uint64_t>(c.rows), static_cast<uint64_t>(c.cols) * 4, &need),
                 "{}: a {} x {} matrix is more than any checkpoint holds", name, c.rows, c.cols);
  SFB_CHECK_DATA(data_bytes == need, "{}: checkpoint has {} data bytes, a {} x {} matrix needs {}", name, data_bytes,
                 c.rows, c.cols, need);
  return c;
}

Bytes encode_checkpoint(const Checkpoint& c) {
  const auto data = std::as_bytes(std::span(c.W.data(), static_cast<size_t>(c.W.size())));
  const Bytes header = encode_header(info_of(c), 0);
  const uint32_t crc = crc32(data, header_crc(header));
  ByteWriter w(kCheckpointHeaderBytes + data.size());
  const Bytes final_header = encode_header(info_of(c), crc);
  w.put_raw(final_header.data(), final_header.size());
  w.put_raw(data.data(), data.size());
  return w.take();
}

Checkpoint decode_checkpoint(std::span<const std::byte> d, const std::string& name) {
  const uint64_t data_bytes = d.size() >= kCheckpointHeaderBytes ? d.size() - kCheckpointHeaderBytes : 0;
  CheckpointInfo info;
  std::string header_says;  // a structural check the header failed: its word only, until the CRC holds
  try {
    info = decode_checkpoint_header(d, data_bytes, name);
  } catch (const DataError& e) {
    if (!is_v1_header(d)) throw;
    header_says = e.what();
  }
  const auto header = d.first(kCheckpointHeaderBytes);
  const auto data = d.subspan(kCheckpointHeaderBytes);
  const uint32_t crc = crc32(data, header_crc(header));
  SFB_CHECK_DATA(crc == stored_crc(header), "{}", corrupt(name, stored_crc(header), crc, header_says));
  if (!header_says.empty()) throw DataError(header_says);
  Checkpoint c{info.fingerprint, info.seed, info.clock, info.ranks, Matrix(info.rows, info.cols), info.lr};
  std::memcpy(c.W.data(), data.data(), data.size());
  return c;
}

void write_checkpoint(const std::string& path, const Checkpoint& c) {
  write_checkpoint(path, info_of(c), row_source(c.W));
}

Checkpoint read_checkpoint(const std::string& path) {
  Checkpoint c;
  const CheckpointInfo info = read_checkpoint(path, [&c, &path](const CheckpointInfo& i) {
    check_fits_in_memory(path, "checkpoint", i.rows, i.cols);
    c.W.resize(i.rows, i.cols);
    return row_sink(c.W, Layout::kRowMajor);
  });
  c.fingerprint = info.fingerprint;
  c.seed = info.seed;
  c.clock = info.clock;
  c.ranks = info.ranks;
  c.lr = info.lr;
  return c;
}

void write_checkpoint(const std::string& path, CheckpointInfo info, const RowSource& W) {
  begin_checkpoint(path, info, W)->commit();
}

std::unique_ptr<AtomicFileWriter> begin_checkpoint(const std::string& path, CheckpointInfo info, const RowSource& W) {
  info.rows = W.rows;
  info.cols = W.cols;
  auto out = std::make_unique<AtomicFileWriter>(path);
  const Bytes header = encode_header(info, 0);
  out->write(header);
  const uint32_t crc = write_row_blocks(*out, W, header_crc(header));
  out->write_at(0, encode_header(info, crc));
  return out;
}

CheckpointInfo read_checkpoint(const std::string& path, const std::function<RowSink(const CheckpointInfo&)>& open,
                               int64_t block_bytes, FileSeal* seal) {
  FileReader in(path, "checkpoint");
  const Bytes header = in.read_head(kCheckpointHeaderBytes);
  const bool sealed = seal && !seal->empty();  // a second read: the first one's CRC held
  if (seal) seal_or_check(*seal, in, header);
  CheckpointInfo info;
  try {
    info = decode_checkpoint_header(header, in.size() - std::min<uint64_t>(in.size(), kCheckpointHeaderBytes), path);
  } catch (const DataError& e) {
    refuse_if_corrupt(in, header, path, e.what());
    throw;
  }
  const RowSink sink = open(info);
  const uint32_t crc = read_row_blocks(in, info.rows, info.cols, sink, header_crc(header), block_bytes);
  if (seal) in.check_identity(seal->identity, "while it was read");
  if (sealed && crc != stored_crc(header))
    throw FileChanged(
        fmt::format("{}: the checkpoint changed while it was read (its CRC held when it was verified, "
                    "now it does not): refused",
                    path));
  SFB_CHECK_DATA(crc == stored_crc(header), "{}", corrupt(path, stored_crc(header), crc, ""));
  return info;
}

}  // namespace sfb::io
