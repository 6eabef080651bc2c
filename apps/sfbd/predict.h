#pragma once
// Predictions with a classifier's model file (mlr, l2mlr: W's rows are the classes' scores, the
// probabilities their softmax), as liblinear-predict makes them: each row's label in the training
// file's own labels (the model file's label map), on request the class probabilities after a
// "labels ..." header line (liblinear-predict -b 1's format), and the per-class report.
#include <cstdio>
#include <string>
#include <vector>

#include "sfb/core/class_report.h"
#include "sfb/core/json.h"
#include "sfb/core/tensor.h"
#include "sfb/io/dataset.h"
#include "sfb/io/model_file.h"

namespace sfbd {

// A classifier's model file, read whole (row-major W) with its label map (0..J-1 for files of
// format version 1, which have none). Throws DataError naming the file.
struct Classifier {
  sfb::Matrix W;
  sfb::io::ModelMeta meta;
  std::vector<int64_t> labels;  // the file's label of each class
  int64_t features() const { return W.cols() - (meta.bias ? 1 : 0); }
};
Classifier read_classifier(const std::string& path);

// Scores the rows of `d` (as loaded for training: with or without data.bias's column), writing each
// row's prediction to `out` when given.
sfb::ClassReport score_rows(const Classifier& c, const sfb::io::Dataset& d, std::FILE* out, bool probabilities);

// Scores every row of the libsvm file `data` (at most max_rows when > 0): labels the model does not
// know count wrong, indices beyond the model's features are skipped (both as liblinear-predict
// does). Writes each row's prediction to `out` when given. Throws DataError naming the file.
sfb::ClassReport score_libsvm(const Classifier& c, const std::string& data, int64_t max_rows, std::FILE* out,
                              bool probabilities);

// accuracy, log_loss, macro_f1, per_class (label, precision, recall, f1, support), unknown_rows.
sfb::Json class_report_json(const sfb::ClassReport& r, const std::vector<int64_t>& labels);

// sfbd --predict MODEL --data FILE --out PRED [--probabilities]: rank 0 writes PRED and prints
// liblinear-predict's "Accuracy = ..." line and the log-loss; the exit code (2: bad input).
int predict(const std::string& model, const std::string& data, const std::string& out, bool probabilities, int rank);

}  // namespace sfbd
