#pragma once
// Reader of libsvm text files ("label idx:value idx:value ...", indices 1-based and increasing).
// Rows stay sparse (CSR); only the rows asked for (a range, or a list: io/partition.h) are parsed, so each rank holds
// its own partition. Every malformed token throws DataError with "<file>:<line>: ...".
#include <cstdint>
#include <istream>
#include <string>

#include "sfb/io/dataset.h"
#include "sfb/io/partition.h"

namespace sfb::io {

struct LibsvmOptions {
  int64_t features = 0;      // indices must be in [1, features]
  int64_t classes = 0;       // labels (after offset) must be in [0, classes)
  int64_t label_offset = 0;  // subtracted from each label
};

// Number of data rows (non-blank lines that are not comments).
int64_t count_libsvm_rows(const std::string& path);
// Rows [begin, end) of the data rows; end = -1 means all.
Dataset read_libsvm(const std::string& path, const LibsvmOptions& opt, int64_t begin = 0, int64_t end = -1);
// The same from a stream; `name` stands for the file in messages.
Dataset parse_libsvm(std::istream& in, const std::string& name, const LibsvmOptions& opt, int64_t begin = 0,
                     int64_t end = -1);
// The listed data rows (ascending), in that order; the other lines are not parsed.
Dataset read_libsvm(const std::string& path, const LibsvmOptions& opt, const RowList& rows);
Dataset parse_libsvm(std::istream& in, const std::string& name, const LibsvmOptions& opt, const RowList& rows);

}  // namespace sfb::io
