#pragma once
// Checksums: FNV-1a 64 for config fingerprints and replica comparison, CRC-32 (zlib) for files.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "sfb/core/row_blocks.h"
#include "sfb/core/tensor.h"

namespace sfb {

uint64_t fnv1a64(std::span<const std::byte> data, uint64_t seed = 0xcbf29ce484222325ULL);
uint64_t fnv1a64(std::string_view s);
uint32_t crc32(std::span<const std::byte> data, uint32_t running = 0);
// Bitwise fingerprint of a matrix (shape and every float's bits).
uint64_t matrix_checksum(const Matrix& m);
// The same fingerprint of a matrix streamed in file order (row_blocks.h): no copy of it.
uint64_t matrix_checksum(const RowSource& m);

}  // namespace sfb
