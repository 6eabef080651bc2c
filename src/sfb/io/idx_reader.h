#pragma once
// Reader of the IDX format (MNIST, Fashion-MNIST), plain or gzipped: images (magic 0x00000803,
// uint8 pixels scaled to [0, 1]) and labels (magic 0x00000801). Only the rows asked for are kept
// (a range, or a list: io/partition.h) so each rank holds its own partition. Truncated files, wrong magics and
// mismatched counts throw DataError naming the file.
#include <cstdint>
#include <string>
#include <vector>

#include "sfb/core/tensor.h"
#include "sfb/io/partition.h"

namespace sfb::io {

struct IdxHeader {
  uint32_t magic = 0;
  std::vector<int64_t> dims;
};

// Number of items (first dimension) of an IDX file, reading only its header.
IdxHeader read_idx_header(const std::string& path);
// Images [begin, end) as rows of pixels / 255; end = -1 means all.
Matrix read_idx_images(const std::string& path, int64_t begin = 0, int64_t end = -1);
std::vector<int32_t> read_idx_labels(const std::string& path, int64_t begin = 0, int64_t end = -1);
// The listed rows (ascending), in that order.
Matrix read_idx_images(const std::string& path, const RowList& rows);
std::vector<int32_t> read_idx_labels(const std::string& path, const RowList& rows);

}  // namespace sfb::io
