#include "sfb/core/hash.h"

#include <zlib.h>

#include <algorithm>
#include <climits>

namespace sfb {

uint64_t fnv1a64(std::span<const std::byte> data, uint64_t seed) {
  uint64_t h = seed;
  for (std::byte b : data) {
    h ^= static_cast<uint64_t>(b);
    h *= 0x100000001b3ULL;
  }
  return h;
}

uint64_t fnv1a64(std::string_view s) { return fnv1a64(std::as_bytes(std::span(s.data(), s.size()))); }

uint32_t crc32(std::span<const std::byte> data, uint32_t running) {
  uLong crc = running;
  const auto* p = reinterpret_cast<const Bytef*>(data.data());
  size_t left = data.size();
  // zlib takes uInt lengths: feed at most 1 GiB at a time.
  while (left > 0) {
    const size_t n = std::min<size_t>(left, size_t{1} << 30);
    crc = ::crc32(crc, p, static_cast<uInt>(n));
    p += n;
    left -= n;
  }
  return static_cast<uint32_t>(crc);
}

namespace {
// The fingerprint's start: the shape, before the floats' bytes.
uint64_t shape_hash(int64_t rows, int64_t cols) {
  const int64_t shape[2] = {rows, cols};
  return fnv1a64(std::as_bytes(std::span(shape)));
}
}  // namespace

// A row-major matrix is already in file order: hashed where it lies (sparse coding fingerprints B at
// every evaluation), not copied block by block.
uint64_t matrix_checksum(const Matrix& m) {
  return fnv1a64(std::as_bytes(std::span(m.data(), static_cast<size_t>(m.size()))), shape_hash(m.rows(), m.cols()));
}

uint64_t matrix_checksum(const RowSource& m) {
  uint64_t h = shape_hash(m.rows, m.cols);
  for_each_row_block(m, [&h, cols = m.cols](int64_t, int64_t n, const float* data) {
    h = fnv1a64(std::as_bytes(std::span(data, static_cast<size_t>(n * cols))), h);
  });
  return h;
}

}  // namespace sfb
