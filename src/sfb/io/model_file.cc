#include "sfb/io/model_file.h"

#include <cstring>
#include <string>

#include <fmt/format.h>

#include "sfb/core/bytes.h"
#include "sfb/core/error.h"
#include "sfb/core/files.h"
#include "sfb/core/hash.h"
#include "sfb/core/memory.h"

namespace sfb::io {

namespace {
Bytes encode_header(int64_t rows, int64_t cols, uint32_t crc) {
  ByteWriter out(kModelHeaderBytes);
  out.put_raw(kModelMagic, 8);
  out.put<uint32_t>(kModelVersion);
  out.put<uint32_t>(1);  // dtype float32
  out.put<int64_t>(rows);
  out.put<int64_t>(cols);
  out.put<uint32_t>(crc);
  out.put<uint32_t>(0);
  return out.take();
}

struct Header {
  int64_t rows = 0, cols = 0;
  uint32_t crc = 0;
};

// The header, checked against the `data_bytes` that follow it.
Header decode_header(std::span<const std::byte> head, uint64_t data_bytes, const std::string& path) {
  SFB_CHECK_DATA(head.size() >= kModelHeaderBytes, "{}: model file is truncated: header needs {} bytes, file has {}",
                 path, kModelHeaderBytes, head.size());
  ByteReader r(head.first(kModelHeaderBytes), path, ByteReader::Source::kFile);
  SFB_CHECK_DATA(std::memcmp(r.take(8, "magic").data(), kModelMagic, 8) == 0, "{}: bad magic: not an sfb model file",
                 path);
  const auto version = r.get<uint32_t>("version");
  SFB_CHECK_DATA(version == kModelVersion, "{}: model format version {} is not supported (expected {})", path, version,
                 kModelVersion);
  const auto dtype = r.get<uint32_t>("dtype");
  SFB_CHECK_DATA(dtype == 1, "{}: dtype {} is not supported (1 = float32)", path, dtype);
  Header h;
  h.rows = r.get<int64_t>("rows");
  h.cols = r.get<int64_t>("cols");
  h.crc = r.get<uint32_t>("CRC");
  SFB_CHECK_DATA(h.rows >= 0 && h.cols >= 0 && h.rows <= (int64_t{1} << 31) && h.cols <= (int64_t{1} << 31),
                 "{}: implausible shape {} x {}", path, h.rows, h.cols);
  // The shape is checked against the file's length before anything is allocated (rows * cols
  // compared by division: 2^31 x 2^31 x 4 bytes would overflow 64 bits).
  const uint64_t elems = data_bytes / sizeof(float);
  SFB_CHECK_DATA(h.cols == 0 || static_cast<uint64_t>(h.rows) <= elems / static_cast<uint64_t>(h.cols),
                 "{}: model data is truncated: {} x {} floats, the file holds {} bytes of data", path, h.rows, h.cols,
                 data_bytes);
  const uint64_t bytes = static_cast<uint64_t>(h.rows) * static_cast<uint64_t>(h.cols) * sizeof(float);
  SFB_CHECK_DATA(data_bytes == bytes, "{}: trailing bytes after the {} x {} model data", path, h.rows, h.cols);
  return h;
}
// A header that failed a structural check (`header_says`): the data's CRC (which the header does
// not cover) tells which part is damaged, so the report never trusts a field alone. Only a file
// with the magic, version and dtype of a model file is read to its end for this.
void refuse_as_corrupt(FileReader& in, std::span<const std::byte> head, const std::string& path,
                       const std::string& header_says) {
  if (head.size() < kModelHeaderBytes || std::memcmp(head.data(), kModelMagic, 8) != 0) return;
  uint32_t version = 0, dtype = 0, stored = 0;
  std::memcpy(&version, head.data() + 8, 4);
  std::memcpy(&dtype, head.data() + 12, 4);
  std::memcpy(&stored, head.data() + 32, 4);
  if (version != kModelVersion || dtype != 1) return;
  uint32_t crc = 0;
  Bytes block(std::size_t{1} << 20);
  for (uint64_t left = in.size() - kModelHeaderBytes; left > 0;) {
    const auto n = static_cast<size_t>(std::min<uint64_t>(left, block.size()));
    in.read(std::span(block).first(n), "data");
    crc = crc32(std::span<const std::byte>(block).first(n), crc);
    left -= n;
  }
  throw DataError(crc == stored ? fmt::format("{}: the header is corrupt: the data's CRC holds but the header does not "
                                              "fit it ({})",
                                              path, header_says)
                                : fmt::format("{}: checksum mismatch (stored 0x{:08x}, computed 0x{:08x}): the file is "
                                              "corrupt (its header cannot be trusted; it says: {})",
                                              path, stored, crc, header_says));
}
}  // namespace

void write_model(const std::string& path, const Matrix& w) { write_model(path, row_source(w)); }

void write_model(const std::string& path, const RowSource& w) {
  AtomicFileWriter out(path);
  out.write(encode_header(w.rows, w.cols, 0));
  const uint32_t crc = write_row_blocks(out, w, 0);
  out.write_at(0, encode_header(w.rows, w.cols, crc));
  out.commit();
}

Matrix read_model(const std::string& path) {
  Matrix w;
  read_model(path, [&w, &path](int64_t rows, int64_t cols) {
    check_fits_in_memory(path, "model file", rows, cols);
    w.resize(rows, cols);
    return row_sink(w, Layout::kRowMajor);
  });
  return w;
}

void read_model(const std::string& path, const std::function<RowSink(int64_t rows, int64_t cols)>& open,
                FileSeal* seal) {
  FileReader in(path, "model file");
  const Bytes head = in.read_head(kModelHeaderBytes);
  const bool sealed = seal && !seal->empty();  // a second read: the first one's CRC held
  if (seal) seal_or_check(*seal, in, head);
  Header h;
  try {
    h = decode_header(head, in.size() - std::min<uint64_t>(in.size(), kModelHeaderBytes), path);
  } catch (const DataError& e) {
    refuse_as_corrupt(in, head, path, e.what());
    throw;
  }
  const RowSink sink = open(h.rows, h.cols);
  const uint32_t crc = read_row_blocks(in, h.rows, h.cols, sink, 0);
  if (seal) in.check_identity(seal->identity, "while it was read");
  if (sealed && crc != h.crc)
    throw FileChanged(
        fmt::format("{}: the model file changed while it was read (its CRC held when it was verified, "
                    "now it does not): refused",
                    path));
  SFB_CHECK_DATA(crc == h.crc, "{}: checksum mismatch (stored 0x{:08x}, computed 0x{:08x}): the file is corrupt", path,
                 h.crc, crc);
}

}  // namespace sfb::io
