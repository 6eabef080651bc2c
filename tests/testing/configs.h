#pragma once
// The job every in-process training test starts from: synthetic data, one thread per rank, and
// no files written (no metrics, model, summary or output directory).
#include <cstdint>

#include "sfb/core/config.h"

namespace sfb::testing {

inline Config quiet_synthetic(int64_t features, int64_t classes, int64_t samples, int64_t test_samples) {
  Config c;
  c.data_format = "synthetic";
  c.features = features;
  c.classes = classes;
  c.synthetic_samples = samples;
  c.synthetic_test_samples = test_samples;
  c.threads = 1;
  c.metrics_file = "";
  c.model_file = "";
  c.summary_file = "";
  c.out_dir = "";
  return c;
}

}  // namespace sfb::testing
