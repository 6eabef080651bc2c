#pragma once
// The model file: a documented little-endian binary format (docs/formats.md).
//
//   offset  size  field
//   0       8     magic "SFBMODEL"
//   8       4     u32 format version (1)
//   12      4     u32 dtype (1 = float32)
//   16      8     i64 rows (J)
//   24      8     i64 cols (D)
//   32      4     u32 CRC-32 (zlib) of the data bytes
//   36      4     u32 reserved, 0
//   40      4*J*D float32 data, row-major
//
// Written to a temporary file, fsynced and renamed, so a crash never leaves a half-written model.
// Written and read as a stream of row blocks (core/row_blocks.h): W is never held twice.
#include <functional>
#include <string>

#include "sfb/core/files.h"
#include "sfb/core/row_blocks.h"
#include "sfb/core/tensor.h"

namespace sfb::io {

inline constexpr char kModelMagic[8] = {'S', 'F', 'B', 'M', 'O', 'D', 'E', 'L'};
inline constexpr uint32_t kModelVersion = 1;
inline constexpr size_t kModelHeaderBytes = 40;

void write_model(const std::string& path, const Matrix& w);
void write_model(const std::string& path, const RowSource& w);
// Throws DataError naming the file and the field that is wrong (magic, version, size, checksum).
Matrix read_model(const std::string& path);
// Reads the header, calls open(rows, cols) (which may refuse the shape by throwing, and returns where
// the rows go), streams W into it, then checks the CRC: on a mismatch it throws DataError, and what
// the sink received must be discarded.
// `seal` as read_checkpoint's: filled by a first read, checked by the next.
void read_model(const std::string& path, const std::function<RowSink(int64_t rows, int64_t cols)>& open,
                FileSeal* seal = nullptr);

}  // namespace sfb::io
