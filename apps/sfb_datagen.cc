// sfb-datagen: writes the synthetic classification data set (the same rows sfbd generates for
// data.format = "synthetic") as a libsvm text file, so other tools (liblinear, ...) can train on
// exactly the same data.
//
//   sfb-datagen --samples 10000 --features 1000 --classes 20 --density 0.05 --out train.svm
#include <cstdio>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli_exit.h"

#include "sfb/core/error.h"
#include "sfb/core/files.h"
#include "sfb/io/synthetic.h"

int main(int argc, char** argv) {
  CLI::App app{"sfb-datagen: synthetic multiclass data as libsvm text"};
  sfb::io::SyntheticSpec spec;
  std::string out;
  bool test = false;
  spec.samples = 10000;
  app.add_option("--samples", spec.samples, "Rows")->check(CLI::PositiveNumber);
  app.add_option("--features", spec.features, "Features D (without bias)")->required()->check(CLI::PositiveNumber);
  app.add_option("--classes", spec.classes, "Classes J")->required()->check(CLI::Range(2, 1 << 30));
  app.add_option("--density", spec.density, "Fraction of non-zero features")->check(CLI::Range(1e-9, 1.0));
  app.add_option("--noise", spec.noise, "Fraction of random labels")->check(CLI::Range(0.0, 1.0));
  app.add_option("--separation", spec.separation, "Prototype distance in noise std-devs (data.synthetic_separation)");
  app.add_option("--seed", spec.seed, "Seed (job.seed in sfbd)");
  app.add_flag("--test", test, "Write the test rows (stream 1) instead of the training rows");
  app.add_option("--out", out, "Output libsvm file")->required();
  if (const auto code = sfb_tools::parse_args(app, argc, argv)) return *code;
  spec.stream = test ? 1 : 0;
  try {
    const sfb::io::Dataset d = sfb::io::make_synthetic(spec);
    std::string text;
    for (int64_t i = 0; i < d.n; ++i) {
      text += std::to_string(d.labels[static_cast<size_t>(i)]);
      if (d.sparse) {
        for (sfb::io::SparseRows::InnerIterator it(d.csr, i); it; ++it)
          text += fmt::format(" {}:{:.7g}", it.col() + 1, it.value());
      } else {
        for (int64_t j = 0; j < d.dim; ++j) text += fmt::format(" {}:{:.7g}", j + 1, d.dense(i, j));
      }
      text += '\n';
    }
    sfb::write_file_atomic(out, text);
    fmt::print("{}: {} rows, {} features, {} classes\n", out, d.n, d.dim, d.classes);
  } catch (const sfb::Error& e) {
    fmt::print(stderr, "sfb-datagen: error: {}\n", e.what());
    return 2;
  }
  return 0;
}
