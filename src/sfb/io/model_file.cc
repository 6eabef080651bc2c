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
Bytes encode_header(const RowSource& w, const ModelMeta& meta, uint32_t crc) {
  ByteWriter out(kModelHeaderBytes + 8 * meta.labels.size());
  out.put_raw(kModelMagic, 8);
  out.put<uint32_t>(kModelVersion);
  out.put<uint32_t>(1);  // dtype float32
  out.put<int64_t>(w.rows);
  out.put<int64_t>(w.cols);
  out.put<uint32_t>(crc);
  out.put<uint32_t>(meta.bias ? 1u : 0u);
  out.put<int64_t>(static_cast<int64_t>(meta.labels.size()));
  for (int64_t l : meta.labels) out.put<int64_t>(l);
  return out.take();
}

struct Header {
  ModelMeta meta;
  Bytes raw;  // the header's bytes as read (with a version-2 file's labels): what a FileSeal compares
  uint32_t crc = 0;
  uint32_t labels_crc = 0;  // version 2: the CRC of the label bytes, which the data's continues
};

// The labels of a version-2 file, after its fixed header: checked against the file's length
// before anything is allocated, and to be ascending (a map, not a list).
void read_labels(FileReader& in, Header& h, const std::string& path) {
  const Bytes head = in.read_head(8);
  SFB_CHECK_DATA(head.size() == 8, "{}: model file is truncated: header needs {} bytes", path, kModelHeaderBytes);
  ByteReader r(head, path, ByteReader::Source::kFile);
  const auto L = r.get<int64_t>("label count");
  const uint64_t left = in.size() - kModelHeaderBytes;
  SFB_CHECK_DATA(L >= 0 && L <= kMaxModelLabels && static_cast<uint64_t>(L) <= left / 8,
                 "{}: label count {} does not fit the file ({} bytes after the header)", path, L, left);
  const Bytes bytes = in.read_head(static_cast<size_t>(L) * 8);
  h.raw.insert(h.raw.end(), head.begin(), head.end());
  h.raw.insert(h.raw.end(), bytes.begin(), bytes.end());
  h.labels_crc = crc32(bytes, 0);
  ByteReader lr(bytes, path, ByteReader::Source::kFile);
  h.meta.labels.resize(static_cast<size_t>(L));
  for (int64_t j = 0; j < L; ++j) {
    h.meta.labels[j] = lr.get<int64_t>("label");
    SFB_CHECK_DATA(j == 0 || h.meta.labels[j] > h.meta.labels[j - 1],
                   "{}: labels are not ascending: class {} is label {} after {}", path, j, h.meta.labels[j],
                   h.meta.labels[j - 1]);
  }
}

// The header (and a version-2 file's labels), checked against the data bytes that follow.
Header decode_header(FileReader& in, const std::string& path) {
  const Bytes head = in.read_head(kModelV1HeaderBytes);
  SFB_CHECK_DATA(head.size() >= kModelV1HeaderBytes, "{}: model file is truncated: header needs {} bytes, file has {}",
                 path, kModelV1HeaderBytes, head.size());
  ByteReader r(head, path, ByteReader::Source::kFile);
  SFB_CHECK_DATA(std::memcmp(r.take(8, "magic").data(), kModelMagic, 8) == 0, "{}: bad magic: not an sfb model file",
                 path);
  Header h;
  h.raw = head;
  h.meta.version = r.get<uint32_t>("version");
  SFB_CHECK_DATA(h.meta.version == 1 || h.meta.version == kModelVersion,
                 "{}: model format version {} is not supported (this sfbd reads 1 and {})", path, h.meta.version,
                 kModelVersion);
  const auto dtype = r.get<uint32_t>("dtype");
  SFB_CHECK_DATA(dtype == 1, "{}: dtype {} is not supported (1 = float32)", path, dtype);
  h.meta.rows = r.get<int64_t>("rows");
  h.meta.cols = r.get<int64_t>("cols");
  h.crc = r.get<uint32_t>("CRC");
  const auto flags = r.get<uint32_t>("flags");
  const int64_t rows = h.meta.rows, cols = h.meta.cols;
  SFB_CHECK_DATA(rows >= 0 && cols >= 0 && rows <= (int64_t{1} << 31) && cols <= (int64_t{1} << 31),
                 "{}: implausible shape {} x {}", path, rows, cols);
  if (h.meta.version >= 2) {
    SFB_CHECK_DATA(flags <= 1, "{}: unknown flags 0x{:x} (bit 0: bias column)", path, flags);
    h.meta.bias = (flags & 1u) != 0;
    read_labels(in, h, path);
  }
  // The shape is checked against the file's length before anything is allocated (rows * cols
  // compared by division: 2^31 x 2^31 x 4 bytes would overflow 64 bits).
  const uint64_t before = h.meta.version >= 2 ? kModelHeaderBytes + 8 * h.meta.labels.size() : kModelV1HeaderBytes;
  const uint64_t data_bytes = in.size() - std::min<uint64_t>(in.size(), before);
  const uint64_t elems = data_bytes / sizeof(float);
  SFB_CHECK_DATA(cols == 0 || static_cast<uint64_t>(rows) <= elems / static_cast<uint64_t>(cols),
                 "{}: model data is truncated: {} x {} floats, the file holds {} bytes of data", path, rows, cols,
                 data_bytes);
  const uint64_t bytes = static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols) * sizeof(float);
  SFB_CHECK_DATA(data_bytes == bytes, "{}: trailing bytes after the {} x {} model data", path, rows, cols);
  return h;
}
// A header that failed a structural check (`header_says`): the CRC, which covers the labels and the
// data but not the fixed header, tells which part is damaged, so the report never trusts a field
// alone. Only a file with the magic, version and dtype of a version-2 model file is read to its end
// for this (a fresh read of `path`).
void refuse_as_corrupt(const std::string& path, const std::string& header_says) {
  FileReader in(path, "model file");
  const Bytes head = in.read_head(kModelHeaderBytes);
  if (head.size() < kModelHeaderBytes || std::memcmp(head.data(), kModelMagic, 8) != 0) return;
  uint32_t version = 0, dtype = 0, stored = 0;
  std::memcpy(&version, head.data() + 8, 4);
  std::memcpy(&dtype, head.data() + 12, 4);
  std::memcpy(&stored, head.data() + 32, 4);
  if (version != kModelVersion || dtype != 1) return;
  // Of the labels and the data, as write_model computes it.
  const uint32_t crc = in.crc32_of_next(in.size() - kModelHeaderBytes, 0, "data");
  throw DataError(crc == stored ? fmt::format("{}: the header is corrupt: the data's CRC holds but the header does not "
                                              "fit it ({})",
                                              path, header_says)
                                : fmt::format("{}: checksum mismatch (stored 0x{:08x}, computed 0x{:08x}): the file is "
                                              "corrupt (its header cannot be trusted; it says: {})",
                                              path, stored, crc, header_says));
}

}  // namespace

void write_model(const std::string& path, const Matrix& w, const ModelMeta& meta) {
  write_model(path, row_source(w), meta);
}

void write_model(const std::string& path, const RowSource& w, const ModelMeta& meta) {
  AtomicFileWriter out(path);
  Bytes head = encode_header(w, meta, 0);
  out.write(head);
  const uint32_t labels_crc = crc32(std::span(head).subspan(kModelHeaderBytes), 0);
  const uint32_t crc = write_row_blocks(out, w, labels_crc);
  out.write_at(0, encode_header(w, meta, crc));
  out.commit();
}

Matrix read_model(const std::string& path, ModelMeta* meta) {
  Matrix w;
  read_model(
      path,
      [&w, &path](int64_t rows, int64_t cols) {
        check_fits_in_memory(path, "model file", rows, cols);
        w.resize(rows, cols);
        return row_sink(w, Layout::kRowMajor);
      },
      meta);
  return w;
}

void read_model(const std::string& path, const std::function<RowSink(int64_t rows, int64_t cols)>& open,
                ModelMeta* meta, FileSeal* seal) {
  FileReader in(path, "model file");
  const bool sealed = seal && !seal->empty();  // a second read: the first one's CRC held
  Header h;
  try {
    h = decode_header(in, path);
  } catch (const FileChanged&) {
    throw;
  } catch (const DataError& e) {
    refuse_as_corrupt(path, e.what());
    throw;
  }
  if (seal) seal_or_check(*seal, in, h.raw);
  const RowSink sink = open(h.meta.rows, h.meta.cols);
  const uint32_t crc = read_row_blocks(in, h.meta.rows, h.meta.cols, sink, h.labels_crc);
  if (seal) in.check_identity(seal->identity, "while it was read");
  if (sealed && crc != h.crc)
    throw FileChanged(
        fmt::format("{}: the model file changed while it was read (its CRC held when it was verified, "
                    "now it does not): refused",
                    path));
  SFB_CHECK_DATA(crc == h.crc, "{}: checksum mismatch (stored 0x{:08x}, computed 0x{:08x}): the file is corrupt", path,
                 h.crc, crc);
  if (meta) *meta = std::move(h.meta);
}

ModelMeta read_model_meta(const std::string& path) {
  FileReader in(path, "model file");
  return decode_header(in, path).meta;
}

}  // namespace sfb::io
