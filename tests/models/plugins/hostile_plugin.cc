// A plugin that misbehaves on purpose, chosen by [model.params] fault = "...": the plugin boundary
// (models/guarded_model.h) must turn each misdeed into a clear sfb error.
//   config_error   its constructor rejects a parameter with sfb::api::ConfigError
//   throw_int      compute_sf throws 42 (not a std::exception)
//   throw_std      compute_sf throws std::runtime_error
//   nan_init       init() writes NaN into W
//   bad_scale      prox_scale() returns 0
//   nan_from_25    an MLR whose SFs are NaN from clock 25 on (a run that diverges mid-way)
//   short_v        write_v with one float too few (a contract error of the writer)
#include <cmath>
#include <span>
#include <stdexcept>
#include <string>

#include <sfb/api/plugin.h>

namespace {

class Hostile : public sfb::api::Model {
 public:
  explicit Hostile(const sfb::api::ModelContext& ctx)
      : J_(ctx.train().classes), D_(ctx.train().dim), fault_(ctx.param_string("fault", "")) {
    if (fault_ == "config_error") throw sfb::api::ConfigError("fault = \"config_error\" is not a setting I accept");
  }
  std::string name() const override { return "hostile"; }
  int64_t rows() const override { return J_; }
  int64_t cols() const override { return D_; }
  void init(sfb::MatrixMap W, sfb::Rng&) override {
    if (fault_ == "nan_init") W(0, 0) = std::nanf("");
  }
  void compute_sf(const sfb::api::Weights& W, const sfb::api::MiniBatch& batch, sfb::api::SfWriter& out) override {
    if (fault_ == "throw_int") throw 42;
    if (fault_ == "throw_std") throw std::runtime_error("out of ideas");
    // Softmax regression's u = p - e_y (dense data), or NaN once the run should diverge.
    sfb::Matrix p = (batch.x * W.stored.transpose()) * W.scale;
    for (int64_t i = 0; i < p.rows(); ++i) {
      p.row(i) = (p.row(i).array() - p.row(i).maxCoeff()).exp();
      p.row(i) /= p.row(i).sum();
      p(i, batch.labels[static_cast<size_t>(i)]) -= 1.0f;
    }
    if (fault_ == "nan_from_25" && batch.clock >= 25) p.setConstant(std::nanf(""));
    if (fault_ == "short_v") {
      const sfb::Matrix x = batch.x;
      out.write_v(0, std::span<const float>(x.data(), static_cast<size_t>(x.cols() - 1)));
    }
    out.write_u_block(p);
    out.write_v_block(batch.x);
    out.commit();
  }
  double prox_scale(double) const override { return fault_ == "bad_scale" ? 0.0 : 1.0; }
  double objective(const sfb::api::Weights& W, const sfb::io::Dataset&, int64_t) const override {
    return W.stored.allFinite() ? 1.0 : std::nan("");
  }
  double accuracy(const sfb::api::Weights&, const sfb::io::Dataset&) const override { return -1.0; }

 private:
  int64_t J_, D_;
  std::string fault_;
};

}  // namespace

SFB_DEFINE_PLUGIN(Hostile)
