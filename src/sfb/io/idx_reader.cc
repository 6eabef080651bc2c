#include "sfb/io/idx_reader.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include <fmt/ranges.h>

#include "sfb/core/error.h"
#include "sfb/io/partition.h"

namespace sfb::io {
namespace {

// The most bytes one IDX file may describe (1 TiB): products of dimensions beyond it are refused
// before any arithmetic could overflow.
constexpr int64_t kMaxIdxBytes = int64_t{1} << 40;

// gzopen reads plain files transparently, so one path serves .gz and raw IDX.
class GzFile {
 public:
  explicit GzFile(const std::string& path) : path_(path) {
    f_ = gzopen(path.c_str(), "rb");
    SFB_CHECK_DATA(f_ != nullptr, "{}: cannot open: {}", path, std::strerror(errno));
    gzbuffer(f_, 1 << 17);
  }
  ~GzFile() {
    if (f_) gzclose(f_);
  }
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;

  // Reads up to n bytes; fewer only at the end of the data.
  size_t read_some(void* dst, size_t n) {
    auto* p = static_cast<char*>(dst);
    size_t done = 0;
    while (done < n) {
      const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - done, 1u << 30));
      const int got = gzread(f_, p + done, chunk);
      if (got < 0) fail_corrupt();
      if (got == 0) {
        check_clean_end();
        break;
      }
      done += static_cast<size_t>(got);
    }
    return done;
  }
  // Reads exactly n bytes or throws, naming what was being read and how much is missing.
  void read(void* dst, size_t n, const char* what) {
    const size_t got = read_some(dst, n);
    SFB_CHECK_DATA(got == n, "{}: file is truncated while reading {} ({} of {} bytes missing)", path_, what, n - got,
                   n);
  }
  void skip(int64_t n, const char* what) {
    std::vector<char> buf(1 << 16);
    while (n > 0) {
      const size_t k = static_cast<size_t>(std::min<int64_t>(n, static_cast<int64_t>(buf.size())));
      read(buf.data(), k, what);
      n -= static_cast<int64_t>(k);
    }
  }
  // Reads to the end: a gzip stream is only whole when its trailer (CRC-32 and length) checks.
  void verify_to_end() {
    std::vector<char> buf(1 << 16);
    while (read_some(buf.data(), buf.size()) > 0) {
    }
  }

 private:
  // zlib reports a bad stream wherever its read-ahead found it: name the position, not the field.
  [[noreturn]] void fail_corrupt() {
    throw DataError(
        fmt::format("{}: damaged gzip data near compressed byte {}: {}; the file is corrupt, get a fresh "
                    "copy",
                    path_, gzoffset(f_), zlib_message()));
  }
  // At the end of the data: a gzip file cut short (trailer missing) or with a wrong CRC is an error.
  void check_clean_end() {
    int err = 0;
    gzerror(f_, &err);
    if (err != Z_OK && err != Z_STREAM_END)
      throw DataError(fmt::format("{}: the gzip stream does not end cleanly: {}; the file is truncated or corrupt",
                                  path_, zlib_message()));
  }
  // zlib's message without the path it prefixes.
  std::string zlib_message() {
    int err = 0;
    const char* msg = gzerror(f_, &err);
    std::string m = msg ? msg : "unknown zlib error";
    if (m.rfind(path_ + ": ", 0) == 0) m.erase(0, path_.size() + 2);
    return m;
  }

  std::string path_;
  gzFile f_ = nullptr;
};

uint32_t be32(const unsigned char* b) {
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | uint32_t{b[3]};
}

IdxHeader read_header(GzFile& f, const std::string& path) {
  unsigned char m[4];
  f.read(m, 4, "the magic number");
  IdxHeader h;
  h.magic = be32(m);
  SFB_CHECK_DATA(m[0] == 0 && m[1] == 0, "{}: not an IDX file (magic 0x{:08x})", path, h.magic);
  SFB_CHECK_DATA(m[2] == 0x08, "{}: IDX element type 0x{:02x} is not unsigned byte (0x08)", path, m[2]);
  const int ndims = m[3];
  SFB_CHECK_DATA(ndims >= 1 && ndims <= 4, "{}: IDX has {} dimensions, expected 1..4", path, ndims);
  int64_t total = 1;  // the product of the non-zero dimensions so far
  for (int i = 0; i < ndims; ++i) {
    unsigned char d[4];
    f.read(d, 4, "the dimension sizes");
    h.dims.push_back(be32(d));
    // The product of the non-zero dimensions stays below 2^40, so no product of some of them (a
    // row: every dimension but the first) can overflow, even after a zero one (0 images of
    // 2^31 x 2^31 pixels), and a header cannot describe more data than any IDX file holds.
    SFB_CHECK_DATA(h.dims.back() == 0 || total <= kMaxIdxBytes / h.dims.back(),
                   "{}: IDX dimensions {} describe more than 2^40 bytes; the header is corrupt", path,
                   fmt::join(h.dims, " x "));
    if (h.dims.back() != 0) total *= h.dims.back();
  }
  return h;
}

void resolve_range(const std::string& path, int64_t n, int64_t& begin, int64_t& end) {
  if (end < 0) end = n;
  SFB_CHECK_DATA(begin >= 0 && begin <= end && end <= n, "{}: rows [{}, {}) outside the file's {} rows", path, begin,
                 end, n);
}

// Appends `n` bytes in blocks, growing the buffer only as the data arrives: a header that claims
// more than the file holds costs at most one block beyond what is there, never the claimed size.
void read_progressively(GzFile& f, int64_t n, const std::string& path, const char* what,
                        std::vector<unsigned char>& buf) {
  constexpr int64_t kBlock = int64_t{16} << 20;
  const size_t start = buf.size();
  while (static_cast<int64_t>(buf.size() - start) < n) {
    const size_t have = buf.size();
    const auto want = static_cast<size_t>(std::min(kBlock, n - static_cast<int64_t>(have - start)));
    buf.resize(have + want);
    const size_t got = f.read_some(buf.data() + have, want);
    SFB_CHECK_DATA(got == want, "{}: file is truncated: {} bytes of {} expected, the file holds {}", path, n, what,
                   have - start + got);
  }
}

// Runs of consecutive rows: (first row, count).
using Runs = std::vector<std::pair<int64_t, int64_t>>;

Runs runs_of(const std::string& path, int64_t n, const RowList& rows) {
  Runs runs;
  for (size_t i = 0; i < rows.size(); ++i) {
    SFB_CHECK_DATA(rows[i] >= 0 && rows[i] < n && (i == 0 || rows[i] > rows[i - 1]),
                   "{}: row {} requested but the file has {} rows", path, rows[i], n);
    if (!runs.empty() && runs.back().first + runs.back().second == rows[i])
      ++runs.back().second;
    else
      runs.emplace_back(rows[i], 1);
  }
  return runs;
}

// The items (`item` bytes each, after the header) of the runs, in order: each run is read in one
// piece, the gaps between them skipped; the rest of the file is read too, so a gzip stream's
// trailer is checked. Memory grows only as the data arrives.
std::vector<unsigned char> read_items(GzFile& f, const std::string& path, int64_t item, const Runs& runs,
                                      const char* what) {
  std::vector<unsigned char> buf;
  int64_t at = 0;
  for (const auto& [first, count] : runs) {
    f.skip((first - at) * item, "rows of other ranks");
    read_progressively(f, count * item, path, what, buf);
    at = first + count;
  }
  f.verify_to_end();
  return buf;
}

Matrix to_pixels(const std::vector<unsigned char>& buf, int64_t row) {
  Matrix out(static_cast<int64_t>(buf.size()) / row, row);
  float* dst = out.data();
  for (size_t i = 0; i < buf.size(); ++i) dst[i] = static_cast<float>(buf[i]) / 255.0f;
  return out;
}

int64_t image_size(const IdxHeader& h, const std::string& path) {
  SFB_CHECK_DATA(h.dims.size() >= 2, "{}: images need >= 2 dimensions (magic 0x{:08x}); is this a labels file?", path,
                 h.magic);
  int64_t row = 1;
  for (size_t i = 1; i < h.dims.size(); ++i) row *= h.dims[i];  // bounded by read_header
  SFB_CHECK_DATA(row > 0, "{}: images of {} pixels", path, row);
  return row;
}

// The header of a labels file: one dimension.
IdxHeader labels_header(GzFile& f, const std::string& path) {
  const IdxHeader h = read_header(f, path);
  SFB_CHECK_DATA(h.dims.size() == 1, "{}: labels need 1 dimension, found {}; is this an images file?", path,
                 h.dims.size());
  return h;
}

// Labels, one byte each.
std::vector<int32_t> read_labels(GzFile& f, const std::string& path, const Runs& runs) {
  const auto buf = read_items(f, path, 1, runs, "the labels");
  return {buf.begin(), buf.end()};
}

}  // namespace

IdxHeader read_idx_header(const std::string& path) {
  GzFile f(path);
  return read_header(f, path);
}

Matrix read_idx_images(const std::string& path, const RowList& rows) {
  GzFile f(path);
  const IdxHeader h = read_header(f, path);
  const int64_t row = image_size(h, path);
  return to_pixels(read_items(f, path, row, runs_of(path, h.dims[0], rows), "the image pixels"), row);
}

Matrix read_idx_images(const std::string& path, int64_t begin, int64_t end) {
  GzFile f(path);
  const IdxHeader h = read_header(f, path);
  const int64_t row = image_size(h, path);
  resolve_range(path, h.dims[0], begin, end);
  return to_pixels(read_items(f, path, row, {{begin, end - begin}}, "the image pixels"), row);
}

std::vector<int32_t> read_idx_labels(const std::string& path, const RowList& rows) {
  GzFile f(path);
  const IdxHeader h = labels_header(f, path);
  return read_labels(f, path, runs_of(path, h.dims[0], rows));
}

std::vector<int32_t> read_idx_labels(const std::string& path, int64_t begin, int64_t end) {
  GzFile f(path);
  const IdxHeader h = labels_header(f, path);
  resolve_range(path, h.dims[0], begin, end);
  return read_labels(f, path, {{begin, end - begin}});
}

}  // namespace sfb::io
