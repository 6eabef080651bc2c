#pragma once
// What every built-in model has and answers the same way: its name, the shape of W (J x D), its
// layout and whether v is sparse, all fixed when the model is created from its context.
#include <string>
#include <string_view>

#include "sfb/api/model.h"

namespace sfb::models {

class ShapedModel : public api::Model {
 public:
  std::string name() const final { return name_; }
  int64_t rows() const final { return rows_; }
  int64_t cols() const final { return cols_; }
  bool sparse_v() const final { return sparse_v_; }
  Layout layout() const final { return layout_; }
  bool reads_sparse_rows() const final { return true; }  // every built-in model reads CSR rows

 protected:
  ShapedModel(std::string name, int64_t rows, int64_t cols, bool sparse_v, Layout layout = Layout::kRowMajor)
      : name_(std::move(name)), rows_(rows), cols_(cols), sparse_v_(sparse_v), layout_(layout) {}

 private:
  std::string name_;
  int64_t rows_, cols_;
  bool sparse_v_;
  Layout layout_;
};

// model.layout of a built-in model: "auto" (feature-major on sparse data, row-major on dense),
// "row-major" or "feature-major". A model that reads only row-major W (feature_major_ok false)
// refuses "feature-major" naming itself.
Layout model_layout(const api::ModelContext& ctx, std::string_view model, bool feature_major_ok);

// W in row-major order for code that reads only that (dml, sparse coding): refuses another layout.
const Matrix& row_major_only(const api::Weights& W, std::string_view model);

}  // namespace sfb::models
