#include "sfb/models/shaped_model.h"

#include "sfb/core/error.h"

namespace sfb::models {

Layout model_layout(const api::ModelContext& ctx, std::string_view model, bool feature_major_ok) {
  const std::string l = ctx.param_string("layout", "auto");
  if (l == "row-major") return Layout::kRowMajor;
  if (l == "feature-major") {
    SFB_CHECK(feature_major_ok,
              "model.layout = \"feature-major\": model \"{}\" keeps W row-major (its v is dense or it reads W by "
              "rows); use model.layout = \"auto\" or \"row-major\"",
              model);
    return Layout::kFeatureMajor;
  }
  SFB_CHECK(l == "auto", "model.layout must be \"auto\", \"row-major\" or \"feature-major\", got \"{}\"", l);
  return feature_major_ok && ctx.train().sparse ? Layout::kFeatureMajor : Layout::kRowMajor;
}

const Matrix& row_major_only(const api::Weights& W, std::string_view model) {
  SFB_ENFORCE(W.row_major(), "model \"{}\" reads W row-major, but was handed {} W", model, layout_name(W.layout));
  return W.stored;
}

}  // namespace sfb::models
