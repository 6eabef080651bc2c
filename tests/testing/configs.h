#pragma once
// The job every in-process training test starts from: synthetic data, one thread per rank, and
// no files written (no metrics, model, summary or output directory).
#include <cstdint>
#include <string>

#include "sfb/core/config.h"

namespace sfb::testing {

inline Config quiet_synthetic(int64_t features, int64_t classes, int64_t samples, int64_t test_samples) {
  Config c;
  c.data.format = sfb::DataFormat::kSynthetic;
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

// `c` with K = minibatch, optimizer.lr = lr, an evaluation every `eval_every` clocks on
// `eval_sample` training rows.
inline Config with_schedule(Config c, int64_t minibatch, double lr, int64_t eval_every, int64_t eval_sample) {
  c.optimizer.minibatch = minibatch;
  c.optimizer.lr = lr;
  c.eval.every = eval_every;
  c.eval.train_sample = eval_sample;
  return c;
}

// A small CNN job on 1 x 8 x 8 inputs (MG-WFBP mode), writing no files.
inline Config quiet_cnn(const std::string& layers, int64_t minibatch, int64_t iterations) {
  Config c;
  c.job.mode = sfb::JobMode::kMgwfbp;
  c.cnn.input = "1x8x8";
  c.cnn.layers = layers;
  c.optimizer.minibatch = minibatch;
  c.stop.max_clocks = iterations;
  c.eval.every = 1000;
  c.output.metrics = c.output.summary = c.output.dir = "";
  c.mgwfbp.profile_iters = 2;
  return c;
}

}  // namespace sfb::testing
