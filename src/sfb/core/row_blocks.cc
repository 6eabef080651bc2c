#include "sfb/core/row_blocks.h"

#include <algorithm>
#include <cstring>
#include <span>

#include "sfb/core/files.h"
#include "sfb/core/hash.h"

namespace sfb {

RowSource row_source(const Matrix& W) { return row_source(W, Layout::kRowMajor, 1.0f); }

RowSource row_source(const Matrix& stored, Layout l, float scale) {
  RowSource s;
  s.rows = l == Layout::kRowMajor ? stored.rows() : stored.cols();
  s.cols = l == Layout::kRowMajor ? stored.cols() : stored.rows();
  s.read = [&stored, l, scale, cols = s.cols](int64_t r0, int64_t n, float* out) {
    MatrixMap block(out, n, cols);
    if (l == Layout::kRowMajor) {
      if (scale == 1.0f)
        std::memcpy(out, stored.data() + r0 * cols, static_cast<size_t>(n * cols) * sizeof(float));
      else
        block = scale * stored.middleRows(r0, n);
    } else if (scale == 1.0f) {
      block = stored.middleCols(r0, n).transpose();
    } else {
      block = scale * stored.middleCols(r0, n).transpose();
    }
  };
  return s;
}

RowSink row_sink(Matrix& stored, Layout l) {
  return [&stored, l](int64_t r0, int64_t n, const float* data) {
    if (l == Layout::kRowMajor) {
      std::memcpy(stored.data() + r0 * stored.cols(), data, static_cast<size_t>(n * stored.cols()) * sizeof(float));
    } else {
      stored.middleCols(r0, n) = ConstMatrixMap(data, n, stored.rows()).transpose();
    }
  };
}

void for_each_row_block(const RowSource& src, const RowSink& fn, int64_t block_bytes) {
  if (src.rows == 0) return;
  const int64_t per = std::min(src.rows, rows_per_block(src.cols, block_bytes));
  std::vector<float> buf(static_cast<size_t>(per * src.cols));
  for (int64_t r0 = 0; r0 < src.rows; r0 += per) {
    const int64_t n = std::min(per, src.rows - r0);
    src.read(r0, n, buf.data());
    fn(r0, n, buf.data());
  }
}

uint32_t write_row_blocks(AtomicFileWriter& out, const RowSource& src, uint32_t crc) {
  for_each_row_block(src, [&](int64_t, int64_t n, const float* data) {
    const auto bytes = std::as_bytes(std::span(data, static_cast<size_t>(n * src.cols)));
    crc = crc32(bytes, crc);
    out.write(bytes);
  });
  return crc;
}

uint32_t read_row_blocks(FileReader& in, int64_t rows, int64_t cols, const RowSink& fn, uint32_t crc,
                         int64_t block_bytes) {
  const RowSource file{rows, cols, [&in, cols](int64_t, int64_t n, float* out) {
                         in.read(std::as_writable_bytes(std::span(out, static_cast<size_t>(n * cols))), "W");
                       }};
  for_each_row_block(
      file,
      [&](int64_t r0, int64_t n, const float* data) {
        crc = crc32(std::as_bytes(std::span(data, static_cast<size_t>(n * cols))), crc);
        fn(r0, n, data);
      },
      block_bytes);
  return crc;
}

}  // namespace sfb
