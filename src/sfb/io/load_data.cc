#include "sfb/io/load_data.h"

#include <algorithm>

#include "sfb/core/error.h"
#include "sfb/io/idx_reader.h"
#include "sfb/io/libsvm_reader.h"
#include "sfb/io/synthetic.h"

namespace sfb::io {
namespace {

int64_t cap(int64_t n, int64_t max) { return max > 0 ? std::min(n, max) : n; }

Dataset load_idx(const std::string& images, const std::string& labels, int64_t classes, Range r) {
  Dataset d;
  d.name = images;
  d.dense = read_idx_images(images, r.begin, r.end);
  d.labels = read_idx_labels(labels, r.begin, r.end);
  d.n = d.dense.rows();
  d.dim = d.dense.cols();
  d.classes = classes;
  return d;
}

}  // namespace

LoadedData load_data(const DataConfig& data, uint64_t seed, int rank, int size, bool want_test) {
  LoadedData out;
  const bool has_test = data.format == "synthetic" ? data.synthetic_test_samples > 0
                        : data.format == "idx"     ? !data.test_images.empty()
                                                   : !data.test.empty();
  if (data.format == "idx") {
    const int64_t n_images = read_idx_header(data.train_images).dims.at(0);
    const int64_t n_labels = read_idx_header(data.train_labels).dims.at(0);
    SFB_CHECK_DATA(n_images == n_labels, "{} has {} images but {} has {} labels", data.train_images, n_images,
                   data.train_labels, n_labels);
    int64_t classes = data.classes;
    if (classes == 0) {
      // Labels are small: every rank reads all of them, so all agree on J.
      const auto all = read_idx_labels(data.train_labels);
      classes = all.empty() ? 0 : *std::max_element(all.begin(), all.end()) + 1;
      SFB_CHECK_DATA(classes >= 2, "{}: need at least 2 classes, found {}", data.train_labels, classes);
    }
    out.total_train = cap(n_images, data.max_train_samples);
    out.train = load_idx(data.train_images, data.train_labels, classes, partition_range(out.total_train, rank, size));
    if (want_test && has_test) {
      const int64_t n_test = cap(read_idx_header(data.test_images).dims.at(0), data.max_test_samples);
      out.test = load_idx(data.test_images, data.test_labels, classes, {0, n_test});
      SFB_CHECK_DATA(out.test.dim == out.train.dim, "{}: test images have {} pixels, training images {}",
                     data.test_images, out.test.dim, out.train.dim);
    }
  } else if (data.format == "libsvm") {
    const LibsvmOptions opt{data.features, data.classes, data.label_offset};
    out.total_train = cap(count_libsvm_rows(data.train), data.max_train_samples);
    const Range r = partition_range(out.total_train, rank, size);
    out.train = read_libsvm(data.train, opt, r.begin, r.end);
    if (want_test && has_test)
      out.test = read_libsvm(data.test, opt, 0, cap(count_libsvm_rows(data.test), data.max_test_samples));
  } else {
    SyntheticSpec spec{
        data.synthetic_samples,   data.features, data.classes, data.synthetic_density, data.synthetic_noise, seed, 0,
        data.synthetic_separation};
    out.total_train = cap(spec.samples, data.max_train_samples);
    const Range r = partition_range(out.total_train, rank, size);
    out.train = make_synthetic(spec, r.begin, r.end);
    if (want_test && has_test) {
      spec.samples = cap(data.synthetic_test_samples, data.max_test_samples);
      spec.stream = 1;
      out.test = make_synthetic(spec);
    }
  }
  SFB_CHECK_DATA(out.train.n > 0, "{}: rank {} of {} got an empty partition ({} training rows in all); use fewer ranks",
                 out.train.name, rank, size, out.total_train);
  if (data.bias) {
    out.train.add_bias();
    if (out.test.n > 0) out.test.add_bias();
  }
  out.train.validate();
  if (out.test.n > 0) out.test.validate();
  return out;
}

}  // namespace sfb::io
