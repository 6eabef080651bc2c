#pragma once
// What liblinear users read after a prediction, over labelled rows: accuracy, log-loss, each
// class's precision, recall and F1, their macro mean, and the confusion matrix. Fed one row at a
// time (its true class and the predicted probabilities), so a file of any length streams through.
// Single-threaded.
#include <cstdint>
#include <string>
#include <vector>

namespace sfb {

class ClassReport {
 public:
  explicit ClassReport(int64_t classes);
  // One row: its true class (-1: a label the model does not know, counted wrong and left out of the
  // log-loss and the matrix) and its `classes` probabilities. The prediction is the most probable
  // class (the lowest on a tie, as liblinear's argmax).
  void add(int32_t truth, const float* probabilities);
  int64_t rows() const { return rows_; }
  int64_t unknown_rows() const { return unknown_; }
  double accuracy() const;
  // Mean of -ln p(true class) over the rows of known classes, p clipped to [1e-15, 1].
  double log_loss() const;
  double precision(int64_t j) const;  // 0 when class j was never predicted
  double recall(int64_t j) const;     // 0 when class j never occurs
  double f1(int64_t j) const;         // 0 when precision + recall is 0
  double macro_f1() const;            // the mean F1 over every class
  int64_t count(int64_t truth, int64_t predicted) const { return confusion_[truth * classes_ + predicted]; }
  // The confusion matrix as CSV: a header "true\\predicted,<label>..." and one row per true class,
  // classes named by `labels` (the file's labels; empty: 0..J-1).
  std::string confusion_csv(const std::vector<int64_t>& labels) const;

 private:
  int64_t classes_;
  int64_t rows_ = 0, correct_ = 0, unknown_ = 0;
  double log_loss_sum_ = 0;
  std::vector<int64_t> confusion_;  // classes x classes, row = true class
  int64_t predicted_as(int64_t j) const;
  int64_t actually(int64_t j) const;
};

}  // namespace sfb
