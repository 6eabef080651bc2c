// sfb-datagen: writes the synthetic classification data set (the same rows sfbd generates for
// data.format = "synthetic") as a libsvm text file, so other tools (liblinear, ...) can train on
// exactly the same data.
//
//   sfb-datagen --samples 10000 --features 1000 --classes 20 --density 0.05 --out train.svm
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <span>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli_exit.h"

#include "sfb/core/error.h"
#include "sfb/core/files.h"
#include "sfb/io/synthetic.h"

namespace {

std::string libsvm_text(const sfb::io::Dataset& d) {
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
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sfb-datagen: synthetic multiclass data as libsvm text"};
  sfb::io::SyntheticSpec spec;
  std::string out;
  bool test = false;
  spec.samples = 10000;
  // The ranges of sfbd's data.* keys for the same set.
  app.add_option("--samples", spec.samples, "Rows")->check(sfb_tools::Integer<int64_t>(1, int64_t{1} << 53));
  app.add_option("--features", spec.features, "Features D (without bias)")
      ->required()
      ->check(sfb_tools::Integer<int64_t>(1, int64_t{1} << 31));
  app.add_option("--classes", spec.classes, "Classes J")->required()->check(sfb_tools::Integer<int64_t>(2, 1 << 30));
  app.add_option("--density", spec.density, "Fraction of non-zero features")->check(sfb_tools::Finite(1e-9, 1.0));
  app.add_option("--noise", spec.noise, "Fraction of random labels")->check(sfb_tools::Finite(0.0, 1.0));
  app.add_option("--separation", spec.separation, "Prototype distance in noise std-devs (data.synthetic_separation)")
      ->check(sfb_tools::Finite(0.0, 1e6));
  app.add_option("--seed", spec.seed, "Seed (job.seed in sfbd)")->check(sfb_tools::Seed());
  app.add_flag("--test", test, "Write the test rows (stream 1) instead of the training rows");
  app.add_option("--out", out, "Output libsvm file")->required();
  if (const auto code = sfb_tools::parse_args(app, argc, argv)) return *code;
  spec.stream = test ? 1 : 0;
  try {
    const int64_t per_row =
        spec.density < 1.0 ? std::max<int64_t>(1, std::llround(spec.density * spec.features)) : spec.features;
    SFB_CHECK(per_row <= (int64_t{1} << 26),
              "--features {} x --density {} is {} non-zeros per row; sfb-datagen writes at most 2^26 per row",
              spec.features, spec.density, per_row);
    sfb::prepare_output_file(out, "--out");  // before any work: a bad path costs nothing
    // Rows are a function of (seed, row): blocks of about 4 M values give the rows of one pass.
    const int64_t block = std::max<int64_t>(1, (int64_t{1} << 22) / per_row);
    sfb::AtomicFileWriter file(out);
    int64_t rows = 0;
    for (int64_t b = 0; b < spec.samples; b += block) {
      const sfb::io::Dataset d = sfb::io::make_synthetic(spec, b, std::min(spec.samples, b + block));
      const std::string text = libsvm_text(d);
      file.write(std::as_bytes(std::span(text.data(), text.size())));
      rows += d.n;
    }
    file.commit();
    fmt::print("{}: {} rows, {} features, {} classes\n", out, rows, spec.features, spec.classes);
  } catch (const sfb::Error& e) {
    fmt::print(stderr, "sfb-datagen: error: {}\n", e.what());
    return 2;
  }
  return 0;
}
