#include "sfb/io/load_data.h"

#include <algorithm>
#include <filesystem>

#include "sfb/core/error.h"
#include "sfb/io/idx_reader.h"
#include "sfb/io/libsvm_reader.h"
#include "sfb/io/partition.h"
#include "sfb/io/synthetic.h"

namespace sfb::io {
namespace {

int64_t cap(int64_t n, int64_t max) { return max > 0 ? std::min(n, max) : n; }

Dataset load_idx(const std::string& images, const std::string& labels, int64_t classes, const RowList& rows) {
  Dataset d;
  d.name = images;
  d.dense = read_idx_images(images, rows);
  d.labels = read_idx_labels(labels, rows);
  d.n = d.dense.rows();
  d.dim = d.dense.cols();
  d.classes = classes;
  return d;
}

// The rows of this rank's partition and of the objective's sample (empty unless asked for).
struct Selection {
  RowList train;
  RowList sample;
};

Selection select(const DataConfig& data, uint64_t seed, int64_t n, const LoadRequest& req) {
  const uint64_t s = partition_seed(seed);
  Selection sel;
  sel.train = partition_rows(n, req.rank, req.size, data.partition, s);
  if (req.eval_sample > 0) sel.sample = sample_rows(n, req.eval_sample, s);
  return sel;
}

void load_idx_data(const DataConfig& data, uint64_t seed, const LoadRequest& req, LoadedData& out) {
  const int64_t n_images = read_idx_header(data.train_images).dims.at(0);
  const int64_t n_labels = read_idx_header(data.train_labels).dims.at(0);
  SFB_CHECK_DATA(n_images > 0, "{}: the IDX file holds 0 images", data.train_images);
  SFB_CHECK_DATA(n_images == n_labels, "{} has {} images but {} has {} labels", data.train_images, n_images,
                 data.train_labels, n_labels);
  int64_t classes = data.classes;
  if (classes == 0) {
    // Labels are small: every rank reads all of them, so all agree on J.
    const auto all = read_idx_labels(data.train_labels);
    classes = *std::max_element(all.begin(), all.end()) + 1;
    SFB_CHECK_DATA(classes >= 2, "{}: every label is 0; need at least 2 classes (or set data.classes)",
                   data.train_labels);
  }
  out.total_train = cap(n_images, data.max_train_samples);
  const Selection sel = select(data, seed, out.total_train, req);
  out.train = load_idx(data.train_images, data.train_labels, classes, sel.train);
  if (!sel.sample.empty()) out.eval_sample = load_idx(data.train_images, data.train_labels, classes, sel.sample);
  if (!req.want_test || data.test_images.empty()) return;
  const int64_t n_test = cap(read_idx_header(data.test_images).dims.at(0), data.max_test_samples);
  out.test = load_idx(data.test_images, data.test_labels, classes, range_rows({0, n_test}));
  SFB_CHECK_DATA(out.test.dim == out.train.dim, "{}: test images have {} pixels, training images {}", data.test_images,
                 out.test.dim, out.train.dim);
}

// data.features and data.classes when set (checked against the file, so that every rank finds the
// same first error, naming its line); else what the pass over data.train finds, as liblinear reads
// it: the largest index, and the distinct labels mapped to 0..J-1 in ascending order.
LibsvmOptions libsvm_options(const DataConfig& data, int64_t& rows, std::vector<int64_t>& labels) {
  LibsvmOptions opt;
  opt.features = data.features;
  opt.classes = data.classes;
  opt.label_offset = data.label_offset;
  const LibsvmSummary sum = scan_libsvm(data.train);
  rows = sum.rows;
  const std::string& f = data.train;
  if (opt.features == 0) {
    SFB_CHECK_DATA(sum.rows == 0 || sum.max_index > 0, "{}: none of its {} rows has a feature", f, sum.rows);
    opt.features = sum.max_index;
  }
  SFB_CHECK_DATA(sum.max_index <= opt.features,
                 "{}:{}: feature index {} (the file's largest) is above data.features = {}; leave data.features "
                 "unset (0) to take it from the file",
                 f, sum.max_index_line, sum.max_index, opt.features);
  if (opt.classes == 0) {
    SFB_CHECK_DATA(sum.rows == 0 || sum.labels.size() >= 2,
                   "{}: every one of its {} rows has label {}: a classifier needs 2 classes or more", f, sum.rows,
                   sum.labels.empty() ? 0 : sum.labels.front());
    opt.classes = static_cast<int64_t>(sum.labels.size());
    opt.label_map = sum.labels;
  }
  for (size_t i : {size_t{0}, sum.labels.size() - 1}) {
    if (!opt.label_map.empty() || sum.labels.empty()) break;
    const int64_t l = sum.labels[i];
    SFB_CHECK_DATA(l - data.label_offset >= 0 && l - data.label_offset < opt.classes,
                   "{}:{}: label {} minus data.label_offset {} is outside [0, {}) (the file's labels are {} distinct "
                   "from {} to {}); leave data.classes unset (0) to map any labels to classes as liblinear does",
                   f, sum.label_lines[i], l, data.label_offset, opt.classes, sum.labels.size(), sum.labels.front(),
                   sum.labels.back());
  }
  labels = opt.label_map;
  if (labels.empty())
    for (int64_t j = 0; j < opt.classes; ++j) labels.push_back(data.label_offset + j);
  return opt;
}

void load_libsvm_data(const DataConfig& data, uint64_t seed, const LoadRequest& req, LoadedData& out) {
  SFB_CHECK(!data.train.empty(),
            "data.format = \"libsvm\" needs data.train to train (sfbd --evaluate MODEL and --predict MODEL work "
            "without it)");
  int64_t rows = 0;
  LibsvmOptions opt = libsvm_options(data, rows, out.labels);
  out.total_train = cap(rows, data.max_train_samples);
  SFB_CHECK_DATA(out.total_train > 0, "{}: no data rows (the file is empty or holds only comments)", data.train);
  const Selection sel = select(data, seed, out.total_train, req);
  out.train = read_libsvm(data.train, opt, sel.train);
  if (!sel.sample.empty()) out.eval_sample = read_libsvm(data.train, opt, sel.sample);
  // Indices the training file does not have are skipped in the test file, as liblinear-predict does.
  opt.skip_extra_features = data.features == 0;
  if (req.want_test && !data.test.empty())
    out.test = read_libsvm(data.test, opt, 0, cap(count_libsvm_rows(data.test), data.max_test_samples));
}

void load_synthetic_data(const DataConfig& data, uint64_t seed, const LoadRequest& req, LoadedData& out) {
  SyntheticSpec spec{
      data.synthetic_samples,   data.features, data.classes, data.synthetic_density, data.synthetic_noise, seed, 0,
      data.synthetic_separation};
  out.total_train = cap(spec.samples, data.max_train_samples);
  const Selection sel = select(data, seed, out.total_train, req);
  out.train = make_synthetic(spec, sel.train);
  if (!sel.sample.empty()) out.eval_sample = make_synthetic(spec, sel.sample);
  if (!req.want_test || data.synthetic_test_samples <= 0) return;
  spec.samples = cap(data.synthetic_test_samples, data.max_test_samples);
  spec.stream = 1;
  out.test = make_synthetic(spec);
}

}  // namespace

MemoryEstimate data_memory(const DataConfig& data, const LoadRequest& req) {
  const int rank = req.rank, size = req.size;
  const bool want_test = req.want_test;
  MemoryEstimate e;
  auto rows = [&](int64_t n, int64_t max) {
    return static_cast<double>(partition_range(cap(n, max), rank, size).size());
  };
  const double bias = data.bias ? 1.0 : 0.0;
  if (data.format == sfb::DataFormat::kIdx) {
    const auto h = read_idx_header(data.train_images).dims;
    double row = 1;
    for (size_t i = 1; i < h.size(); ++i) row *= static_cast<double>(h[i]);
    // The pixels as bytes while reading, then as floats.
    e.add("this rank's training images", "data.train_images", rows(h.at(0), data.max_train_samples) * (row + bias) * 5);
    if (req.eval_sample > 0)
      e.add("the objective's sample of the training images", "eval.train_sample",
            static_cast<double>(std::min(cap(h.at(0), data.max_train_samples), req.eval_sample)) * (row + bias) * 5);
    if (want_test && !data.test_images.empty())
      e.add("the test images", "data.test_images",
            static_cast<double>(cap(read_idx_header(data.test_images).dims.at(0), data.max_test_samples)) *
                (row + bias) * 5);
  } else if (data.format == sfb::DataFormat::kSynthetic) {
    const double d = static_cast<double>(data.features) + bias;
    // Dense rows as floats; sparse ones as (index, value) pairs.
    const double per_row = data.synthetic_density >= 1.0 ? 4.0 * d : 8.0 * (data.synthetic_density * d + bias + 1);
    e.add("this rank's synthetic rows", "data.synthetic_samples, data.features, data.synthetic_density",
          rows(data.synthetic_samples, data.max_train_samples) * per_row);
    if (req.eval_sample > 0)
      e.add("the objective's sample of the synthetic rows", "eval.train_sample",
            static_cast<double>(std::min(cap(data.synthetic_samples, data.max_train_samples), req.eval_sample)) *
                per_row);
    if (want_test)
      e.add("the synthetic test rows", "data.synthetic_test_samples, data.features",
            static_cast<double>(cap(data.synthetic_test_samples, data.max_test_samples)) * per_row);
  } else {
    // A libsvm entry "i:v " takes at least 4 bytes of text and 8 bytes in memory.
    std::error_code ec;
    const auto text = static_cast<double>(std::filesystem::file_size(data.train, ec));
    if (!ec) e.add("this rank's share of the libsvm rows", "data.train", 2.0 * text / size);
  }
  return e;
}

MemoryEstimate data_memory(const DataConfig& data, int rank, int size, bool want_test) {
  return data_memory(data, LoadRequest{rank, size, want_test, 0});
}

LoadedData load_data(const DataConfig& data, uint64_t seed, const LoadRequest& req) {
  LoadedData out;
  if (data.format == sfb::DataFormat::kIdx)
    load_idx_data(data, seed, req, out);
  else if (data.format == sfb::DataFormat::kLibsvm)
    load_libsvm_data(data, seed, req, out);
  else
    load_synthetic_data(data, seed, req, out);
  SFB_CHECK_DATA(out.train.n > 0, "{}: rank {} of {} got an empty partition ({} training rows in all); use fewer ranks",
                 out.train.name, req.rank, req.size, out.total_train);
  for (Dataset* d : {&out.train, &out.test, &out.eval_sample}) {
    if (d->n == 0) continue;
    if (data.bias) d->add_bias();
    d->validate();
  }
  if (out.eval_sample.n > 0) out.eval_sample.name += " (objective sample)";
  return out;
}

LoadedData load_data(const DataConfig& data, uint64_t seed, int rank, int size, bool want_test) {
  return load_data(data, seed, LoadRequest{rank, size, want_test, 0});
}

}  // namespace sfb::io
