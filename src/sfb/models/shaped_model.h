#pragma once
// What every built-in model has and answers the same way: its name, the shape of W (J x D) and
// whether v is sparse, all fixed when the model is created from its context.
#include <string>

#include "sfb/api/model.h"

namespace sfb::models {

class ShapedModel : public api::Model {
 public:
  std::string name() const final { return name_; }
  int64_t rows() const final { return rows_; }
  int64_t cols() const final { return cols_; }
  bool sparse_v() const final { return sparse_v_; }
  bool reads_sparse_rows() const final { return true; }  // every built-in model reads CSR rows

 protected:
  ShapedModel(std::string name, int64_t rows, int64_t cols, bool sparse_v)
      : name_(std::move(name)), rows_(rows), cols_(cols), sparse_v_(sparse_v) {}

 private:
  std::string name_;
  int64_t rows_, cols_;
  bool sparse_v_;
};

}  // namespace sfb::models
