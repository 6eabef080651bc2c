#pragma once
// Reader of libsvm text files ("label idx:value idx:value ...", indices 1-based and increasing).
// Rows stay sparse (CSR); only the rows asked for (a range, or a list: io/partition.h) are parsed, so each rank holds
// its own partition. Every malformed token throws DataError with "<file>:<line>: ...".
#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "sfb/io/dataset.h"
#include "sfb/io/partition.h"

namespace sfb::io {

struct LibsvmOptions {
  int64_t features = 0;      // indices must be in [1, features]
  int64_t classes = 0;       // labels (after offset) must be in [0, classes)
  int64_t label_offset = 0;  // subtracted from each label
  // When not empty: the file's labels of classes 0..J-1 (ascending; J = classes). A label is its
  // index in this list, as liblinear maps any integer labels; label_offset is then unused.
  std::vector<int64_t> label_map;
  // A label outside label_map reads as class -1 instead of an error (liblinear-predict's rows of
  // labels the model never saw: counted wrong).
  bool unknown_labels = false;
  // Indices above `features` are skipped instead of refused, as liblinear-predict does with
  // features the training file did not have.
  bool skip_extra_features = false;
};

// Number of data rows (non-blank lines that are not comments).
int64_t count_libsvm_rows(const std::string& path);

// What one streamed pass over a libsvm file finds, as liblinear reads it: its data rows, its
// largest feature index and its distinct labels (ascending). Every token is checked as the
// reader checks it; a bad one throws DataError naming the line and what was found there.
struct LibsvmSummary {
  int64_t rows = 0;
  int64_t max_index = 0;
  int64_t max_index_line = 0;  // the first line with it
  std::vector<int64_t> labels;
  std::vector<int64_t> label_lines;  // the first line with each label
};
LibsvmSummary scan_libsvm(const std::string& path);
LibsvmSummary scan_libsvm(std::istream& in, const std::string& name);
// Rows [begin, end) of the data rows; end = -1 means all.
Dataset read_libsvm(const std::string& path, const LibsvmOptions& opt, int64_t begin = 0, int64_t end = -1);
// The same from a stream; `name` stands for the file in messages.
Dataset parse_libsvm(std::istream& in, const std::string& name, const LibsvmOptions& opt, int64_t begin = 0,
                     int64_t end = -1);
// The listed data rows (ascending), in that order; the other lines are not parsed.
Dataset read_libsvm(const std::string& path, const LibsvmOptions& opt, const RowList& rows);
Dataset parse_libsvm(std::istream& in, const std::string& name, const LibsvmOptions& opt, const RowList& rows);

}  // namespace sfb::io
