#include "sfb/io/idx_reader.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "sfb/core/error.h"

namespace sfb::io {
namespace {

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
  // Reads exactly n bytes or throws, naming what was being read.
  void read(void* dst, size_t n, const char* what) {
    auto* p = static_cast<char*>(dst);
    while (n > 0) {
      const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n, 1u << 30));
      const int got = gzread(f_, p, chunk);
      if (got < 0) {
        int err = 0;
        throw DataError(fmt::format("{}: read error in {}: {}", path_, what, gzerror(f_, &err)));
      }
      SFB_CHECK_DATA(got > 0, "{}: file is truncated while reading {} ({} bytes missing)", path_, what, n);
      p += got;
      n -= static_cast<size_t>(got);
    }
  }
  void skip(int64_t n, const char* what) {
    std::vector<char> buf(1 << 16);
    while (n > 0) {
      const size_t k = static_cast<size_t>(std::min<int64_t>(n, static_cast<int64_t>(buf.size())));
      read(buf.data(), k, what);
      n -= static_cast<int64_t>(k);
    }
  }

 private:
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
  for (int i = 0; i < ndims; ++i) {
    unsigned char d[4];
    f.read(d, 4, "the dimension sizes");
    h.dims.push_back(be32(d));
  }
  return h;
}

void resolve_range(const std::string& path, int64_t n, int64_t& begin, int64_t& end) {
  if (end < 0) end = n;
  SFB_CHECK_DATA(begin >= 0 && begin <= end && end <= n, "{}: rows [{}, {}) outside the file's {} rows", path, begin,
                 end, n);
}

}  // namespace

IdxHeader read_idx_header(const std::string& path) {
  GzFile f(path);
  return read_header(f, path);
}

Matrix read_idx_images(const std::string& path, int64_t begin, int64_t end) {
  GzFile f(path);
  const IdxHeader h = read_header(f, path);
  SFB_CHECK_DATA(h.dims.size() >= 2, "{}: images need >= 2 dimensions (magic 0x{:08x}); is this a labels file?", path,
                 h.magic);
  int64_t row = 1;
  for (size_t i = 1; i < h.dims.size(); ++i) row *= h.dims[i];
  resolve_range(path, h.dims[0], begin, end);
  f.skip(begin * row, "images before this rank's partition");
  std::vector<unsigned char> buf(static_cast<size_t>((end - begin) * row));
  f.read(buf.data(), buf.size(), "image pixels");
  Matrix out(end - begin, row);
  float* dst = out.data();
  for (size_t i = 0; i < buf.size(); ++i) dst[i] = static_cast<float>(buf[i]) / 255.0f;
  return out;
}

std::vector<int32_t> read_idx_labels(const std::string& path, int64_t begin, int64_t end) {
  GzFile f(path);
  const IdxHeader h = read_header(f, path);
  SFB_CHECK_DATA(h.dims.size() == 1, "{}: labels need 1 dimension, found {}; is this an images file?", path,
                 h.dims.size());
  resolve_range(path, h.dims[0], begin, end);
  f.skip(begin, "labels before this rank's partition");
  std::vector<unsigned char> buf(static_cast<size_t>(end - begin));
  f.read(buf.data(), buf.size(), "labels");
  return {buf.begin(), buf.end()};
}

}  // namespace sfb::io
