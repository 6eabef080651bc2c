#pragma once
// The model file: a documented little-endian binary format (docs/formats.md).
//
// Version 2 (written since issue 67):
//   offset  size  field
//   0       8     magic "SFBMODEL"
//   8       4     u32 format version (2)
//   12      4     u32 dtype (1 = float32)
//   16      8     i64 rows (J)
//   24      8     i64 cols (D)
//   32      4     u32 CRC-32 (zlib) of the label bytes and the data bytes, in that order
//   36      4     u32 flags: bit 0 = the last column is data.bias's constant 1 feature
//   40      8     i64 L, the number of labels (0: none, the classes are 0..J-1)
//   48      8*L   i64 the file's label of each class 0..L-1, ascending (liblinear's label map)
//   48+8L   4*J*D float32 data, row-major
// Version 1 (still read): the same first 32 bytes, a reserved u32 (0) at 36, the data at 40, its
// CRC of the data alone; no labels, no flags.
//
// Written to a temporary file, fsynced and renamed, so a crash never leaves a half-written model.
// Written and read as a stream of row blocks (core/row_blocks.h): W is never held twice.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sfb/core/files.h"
#include "sfb/core/row_blocks.h"
#include "sfb/core/tensor.h"

namespace sfb::io {

inline constexpr char kModelMagic[8] = {'S', 'F', 'B', 'M', 'O', 'D', 'E', 'L'};
inline constexpr uint32_t kModelVersion = 2;
inline constexpr size_t kModelHeaderBytes = 48;    // version 2, before the labels
inline constexpr size_t kModelV1HeaderBytes = 40;  // version 1
inline constexpr int64_t kMaxModelLabels = int64_t{1} << 31;

// What a model file says besides W.
struct ModelMeta {
  uint32_t version = kModelVersion;  // as read (1 or 2); written files are always kModelVersion
  int64_t rows = 0, cols = 0;
  std::vector<int64_t> labels;  // empty: the classes are 0..J-1
  bool bias = false;            // the last column is data.bias's constant feature
};

void write_model(const std::string& path, const Matrix& w, const ModelMeta& meta = {});
void write_model(const std::string& path, const RowSource& w, const ModelMeta& meta = {});
// Throws DataError naming the file and the field that is wrong (magic, version, size, labels,
// checksum). `meta`, when given, receives the header and the labels.
Matrix read_model(const std::string& path, ModelMeta* meta = nullptr);
// Reads the header, calls open(rows, cols) (which may refuse the shape by throwing, and returns where
// the rows go), streams W into it, then checks the CRC: on a mismatch it throws DataError, and what
// the sink received must be discarded.
// `seal` as read_checkpoint's: filled by a first read, checked by the next (FileChanged).
void read_model(const std::string& path, const std::function<RowSink(int64_t rows, int64_t cols)>& open,
                ModelMeta* meta = nullptr, FileSeal* seal = nullptr);
// The header and labels only (W is not read, its CRC not checked).
ModelMeta read_model_meta(const std::string& path);

}  // namespace sfb::io
