#pragma once
// The job every in-process training test starts from: synthetic data, one thread per rank, and
// no files written (no metrics, model, summary or output directory).
#include <cstdint>

#include "sfb/core/config.h"

namespace sfb::testing {

inline Config quiet_synthetic(int64_t features, int64_t classes, int64_t samples, int64_t test_samples) {
  Config c;
  c.data.format = "synthetic";
  c.data.features = features;
  c.data.classes = classes;
  c.data.synthetic_samples = samples;
  c.data.synthetic_test_samples = test_samples;
  c.runtime.threads = 1;
  c.output.metrics = "";
  c.output.model = "";
  c.output.summary = "";
  c.output.dir = "";
  return c;
}

}  // namespace sfb::testing
