// sfb-gradcheck: checks that a model's sufficient factors are the gradient of its loss, by finite
// differences on a few samples of the config's data (sfb/models/gradcheck.h). The first thing to run
// on a new plugin (docs/plugins.md):
//
//   sfb-gradcheck --config job.toml [--set key=value] [--samples 8] [--directions 6]
//
// Exit codes: 0 every direction agrees within --tolerance, 1 some do not, 2 bad input (config,
// data, plugin, or a model whose SFs are not a gradient).
#include <cstdio>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli_exit.h"

#include "sfb/core/config.h"
#include "sfb/core/error.h"
#include "sfb/core/memory.h"
#include "sfb/io/load_data.h"
#include "sfb/models/gradcheck.h"
#include "sfb/models/registry.h"

namespace {

int check(const std::string& config, const std::vector<std::string>& overrides,
          const sfb::models::GradcheckOptions& opt) {
  const sfb::Config cfg = sfb::load_config(config, overrides);
  SFB_CHECK(cfg.job.mode == sfb::JobMode::kSfb, "{}: sfb-gradcheck checks the matrix models of job.mode = \"sfb\"",
            config);
  // Estimated before allocating, naming the keys (as sfbd does), rather than failing inside.
  sfb::io::data_memory(cfg.data, 0, 1, false).check(sfb::available_memory_bytes(1), "loading the data");
  const auto data = sfb::io::load_data(cfg.data, cfg.job.seed, 0, 1, false);
  auto model = sfb::models::make_model(cfg, data.train, data.total_train, 0, 1);
  sfb::MemoryEstimate w;
  // W, the perturbed copies and the gradient the check builds: a few J x D matrices.
  w.add("W and the check's copies of it", "the model's J x D (data.*, model.*)",
        4.0 * 4 * static_cast<double>(model->rows()) * static_cast<double>(model->cols()));
  w.check(sfb::available_memory_bytes(1), "checking this model");
  const auto r = sfb::models::gradcheck(*model, data.train, opt);
  fmt::print("model {} ({} x {}, {}), {} {} rows of {}; loss {:.8g}, |G| {:.6g} (regulariser {:.6g})\n", model->name(),
             model->rows(), model->cols(), sfb::layout_name(model->layout()), r.samples,
             data.train.sparse ? "sparse" : "dense", data.train.name, r.loss, r.gradient_norm, r.regulariser_norm);
  fmt::print("{:>9}  {:>16}  {:>16}  {:>10}  {:>8}\n", "direction", "finite diff", "from the SFs", "rel. error",
             "step");
  for (size_t k = 0; k < r.directions.size(); ++k) {
    const auto& d = r.directions[k];
    fmt::print("{:>9}  {:>16.9g}  {:>16.9g}  {:>10.2e}  {:>8.1e}{}\n", k, d.finite_difference, d.from_sf, d.error,
               d.step, d.error > opt.tolerance ? "  <- FAILS" : "");
  }
  if (r.scale_error >= 0)
    fmt::print("W given as 0.5 * stored: the SFs' gradient differs by {:.2e}{}\n", r.scale_error,
               r.scale_error > opt.tolerance
                   ? "  <- FAILS: compute_sf must read W through W(j, d), W.row(j) or W.matrix(), which apply "
                     "W.scale; W.stored alone is not W (docs/plugins.md)"
                   : "");
  fmt::print("{}: worst relative error {:.2e} (tolerance {:.0e})\n", r.passed ? "PASS" : "FAIL",
             std::max(r.worst_error, r.scale_error), opt.tolerance);
  return r.passed ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sfb-gradcheck: are a model's sufficient factors the gradient of its loss? (finite differences)"};
  std::string config;
  std::vector<std::string> overrides;
  sfb::models::GradcheckOptions opt;
  app.add_option("--config,-c", config, "TOML job configuration (data and model)")->required();
  app.add_option("--set", overrides, "Override a config key (repeatable)");
  app.add_option("--samples", opt.samples, "Rows in the checked batch")
      ->capture_default_str()
      ->check(sfb_tools::Integer<int64_t>(1, 1 << 20));
  app.add_option("--directions", opt.directions, "Random directions checked")
      ->capture_default_str()
      ->check(sfb_tools::Integer<int64_t>(1, 10000));
  app.add_option("--steps", opt.steps, "Finite-difference steps tried (times max(1, |W|)); the best agreement counts")
      ->capture_default_str()
      ->check(sfb_tools::Finite(1e-8, 1.0));
  app.add_option("--tolerance", opt.tolerance, "Largest relative error that passes")
      ->capture_default_str()
      ->check(sfb_tools::Finite(0, 1e6));
  app.add_option("--seed", opt.seed, "Seed of W's perturbation, the rows and the directions")
      ->capture_default_str()
      ->check(sfb_tools::Seed());
  if (const auto code = sfb_tools::parse_args(app, argc, argv)) return *code;
  try {
    return check(config, overrides, opt);
  } catch (const sfb::Error& e) {
    fmt::print(stderr, "sfb-gradcheck: error: {}\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr,
               "sfb-gradcheck: error: {}: out of memory loading the data or building the model's W (the config's "
               "model is too large for this machine; check it with a smaller data.max_train_samples or model)\n",
               config);
    return 2;
  }
}
