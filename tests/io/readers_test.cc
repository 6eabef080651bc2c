#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sfb/core/error.h"
#include "sfb/io/idx_reader.h"
#include "sfb/io/libsvm_reader.h"
#include "sfb/io/load_data.h"
#include "sfb/io/sampler.h"
#include "sfb/io/synthetic.h"
#include "testing/files.h"

namespace sfb::io {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

using testing::be32;
using testing::TempDir;
using testing::write_gz;
using testing::write_raw;

// n images of rows x cols, pixel (i, k) = (i * 7 + k) % 256; labels i % 10.
std::pair<std::string, std::string> idx_bytes(uint32_t n, uint32_t rows, uint32_t cols) {
  std::string img = be32(0x803) + be32(n) + be32(rows) + be32(cols);
  for (uint32_t i = 0; i < n; ++i)
    for (uint32_t k = 0; k < rows * cols; ++k) img.push_back(static_cast<char>((i * 7 + k) % 256));
  std::string lab = be32(0x801) + be32(n);
  for (uint32_t i = 0; i < n; ++i) lab.push_back(static_cast<char>(i % 10));
  return {img, lab};
}

std::string data_error(const std::function<void()>& fn) { return testing::error_of<DataError>(fn); }

TEST(Idx, ReadsPartitionsOfGzAndRawFiles) {
  TempDir dir;
  auto [img, lab] = idx_bytes(7, 2, 3);
  write_gz(dir.file("img.gz"), img);
  write_raw(dir.file("img"), img);
  write_gz(dir.file("lab.gz"), lab);
  EXPECT_EQ(read_idx_header(dir.file("img.gz")).dims, (std::vector<int64_t>{7, 2, 3}));
  const Matrix all = read_idx_images(dir.file("img.gz"));
  ASSERT_EQ(all.rows(), 7);
  ASSERT_EQ(all.cols(), 6);
  EXPECT_FLOAT_EQ(all(3, 4), ((3 * 7 + 4) % 256) / 255.0f);
  EXPECT_EQ(read_idx_images(dir.file("img"), 2, 5), all.middleRows(2, 3));
  EXPECT_EQ(read_idx_labels(dir.file("lab.gz"), 5, 7), (std::vector<int32_t>{5, 6}));
}

TEST(Idx, TruncatedWrongMagicAndSwappedFilesAreRefused) {
  TempDir dir;
  auto [img, lab] = idx_bytes(5, 2, 2);
  write_gz(dir.file("trunc.gz"), img.substr(0, img.size() - 3));
  EXPECT_THAT(data_error([&] { read_idx_images(dir.file("trunc.gz")); }), HasSubstr("trunc.gz: file is truncated"));
  write_raw(dir.file("magic"), "\x01\x02\x08\x03" + img.substr(4));
  EXPECT_THAT(data_error([&] { read_idx_images(dir.file("magic")); }), HasSubstr("magic: not an IDX file"));
  write_raw(dir.file("lab"), lab);
  EXPECT_THAT(data_error([&] { read_idx_images(dir.file("lab")); }), HasSubstr("is this a labels file"));
  EXPECT_THAT(data_error([&] { read_idx_labels(dir.file("missing")); }), HasSubstr("missing: cannot open"));
}

TEST(Idx, FashionMnistIsReadable) {
  const std::string dir = SFB_FASHION_DIR;
  ASSERT_TRUE(fs::exists(dir + "/t10k-labels-idx1-ubyte.gz"))
      << "dataset-fashion-mnist is not installed: scripts/install-deps.sh installs it";
  EXPECT_EQ(read_idx_header(dir + "/train-images-idx3-ubyte.gz").dims, (std::vector<int64_t>{60000, 28, 28}));
  const auto labels = read_idx_labels(dir + "/t10k-labels-idx1-ubyte.gz");
  ASSERT_EQ(labels.size(), 10000u);
  EXPECT_EQ(*std::max_element(labels.begin(), labels.end()), 9);
  const Matrix x = read_idx_images(dir + "/t10k-images-idx3-ubyte.gz", 0, 10);
  EXPECT_GE(x.minCoeff(), 0.0f);
  EXPECT_LE(x.maxCoeff(), 1.0f);
  EXPECT_GT(x.maxCoeff(), 0.5f);
}

TEST(Libsvm, ParsesSparseRowsAndPartitions) {
  TempDir dir;
  write_raw(dir.file("d.svm"), "1 1:0.5 3:2\n# comment\n\n2 2:-1 # trailing\n1 4:1e-1\n");
  const LibsvmOptions opt{4, 2, 1};
  EXPECT_EQ(count_libsvm_rows(dir.file("d.svm")), 3);
  const Dataset d = read_libsvm(dir.file("d.svm"), opt);
  ASSERT_EQ(d.n, 3);
  EXPECT_TRUE(d.sparse);
  EXPECT_EQ(d.labels, (std::vector<int32_t>{0, 1, 0}));
  EXPECT_FLOAT_EQ(d.csr.coeff(0, 2), 2.0f);
  EXPECT_FLOAT_EQ(d.csr.coeff(1, 1), -1.0f);
  EXPECT_FLOAT_EQ(d.csr.coeff(2, 3), 0.1f);
  EXPECT_EQ(d.csr.nonZeros(), 4);
  const Dataset part = read_libsvm(dir.file("d.svm"), opt, 1, 3);
  ASSERT_EQ(part.n, 2);
  EXPECT_FLOAT_EQ(part.csr.coeff(0, 1), -1.0f);
}

TEST(Libsvm, BadTokensNameFileAndLine) {
  TempDir dir;
  const LibsvmOptions opt{4, 2, 0};
  auto err = [&](const std::string& content) {
    write_raw(dir.file("bad.svm"), "0 1:1\n" + content + "\n");
    return data_error([&] { read_libsvm(dir.file("bad.svm"), opt); });
  };
  EXPECT_THAT(err("x 1:1"), HasSubstr("bad.svm:2: label 'x' is not an integer"));
  EXPECT_THAT(err("5 1:1"), HasSubstr("bad.svm:2: label 5 minus data.label_offset 0 is outside [0, 2)"));
  EXPECT_THAT(err("1 9:1"), HasSubstr("bad.svm:2: feature index 9 is outside [1, 4]"));
  EXPECT_THAT(err("1 0:1"), HasSubstr("feature index 0 is outside"));
  EXPECT_THAT(err("1 3:1 2:1"), HasSubstr("bad.svm:2: feature index 2 does not increase"));
  EXPECT_THAT(err("1 3:abc"), HasSubstr("bad.svm:2: value 'abc' of feature 3 is not a number"));
  EXPECT_THAT(err("1 3"), HasSubstr("bad.svm:2: token '3' is not index:value"));
  EXPECT_THAT(err("1 2:nan"), HasSubstr("is not a finite number"));
  // Regression (fuzz_libsvm under UBSan): a label beyond int64 was cast before the range check.
  EXPECT_THAT(err("17777777777777777777777777777777777 1:1"),
              HasSubstr("bad.svm:2: label 17777777777777777777777777777777777"));
}

// data.features and data.classes unset: one pass over the file finds them as liblinear does (the
// largest index; any integer labels, mapped to 0..J-1 in ascending order), on every rank alike.
TEST(Libsvm, FeaturesAndClassesFromTheFile) {
  TempDir dir;
  write_raw(dir.file("t.svm"), "+7 2:1 5:2\n-3 1:1\n# c\n42 3:1\n7 9:1\n");
  write_raw(dir.file("test.svm"), "42 1:1 12:5\n-3 9:2\n");
  const LibsvmSummary sum = scan_libsvm(dir.file("t.svm"));
  EXPECT_EQ(sum.rows, 4);
  EXPECT_EQ(sum.max_index, 9);
  EXPECT_EQ(sum.labels, (std::vector<int64_t>{-3, 7, 42}));
  DataConfig cfg;
  cfg.format = DataFormat::kLibsvm;
  cfg.bias = false;
  cfg.train = dir.file("t.svm");
  cfg.test = dir.file("test.svm");
  for (int p : {1, 2, 3}) {
    for (int r = 0; r < p; ++r) {
      const LoadedData d = load_data(cfg, 1, r, p, true);
      EXPECT_EQ(d.labels, (std::vector<int64_t>{-3, 7, 42}));
      EXPECT_EQ(d.train.dim, 9);
      EXPECT_EQ(d.train.classes, 3);
      EXPECT_EQ(d.total_train, 4);
    }
  }
  cfg.partition = Partition::kContiguous;
  const LoadedData d = load_data(cfg, 1, 0, 1, true);
  EXPECT_EQ(d.train.labels, (std::vector<int32_t>{1, 0, 2, 1}));
  // The test file's index 12 is beyond the training file's 9: skipped, as liblinear-predict does.
  EXPECT_EQ(d.test.labels, (std::vector<int32_t>{2, 0}));
  EXPECT_EQ(d.test.csr.nonZeros(), 2);
  // With data.classes set the labels are data.label_offset + j, as before.
  cfg.classes = 50;
  cfg.label_offset = -3;
  EXPECT_EQ(load_data(cfg, 1, 0, 1, false).labels.at(45), 42);
}

TEST(Libsvm, ABadFileIsNamedByLineAndWhatIsThere) {
  TempDir dir;
  DataConfig cfg;
  cfg.format = DataFormat::kLibsvm;
  cfg.train = dir.file("t.svm");
  auto err = [&](const std::string& content) {
    write_raw(cfg.train, content);
    return data_error([&] { load_data(cfg, 1, 0, 1, false); });
  };
  EXPECT_THAT(err("1 1:1\n2 1:1\n0.5 2:1\n"), HasSubstr("t.svm:3: label '0.5' is not an integer"));
  EXPECT_THAT(err("1 1:1\n1 2:1\n"), HasSubstr("every one of its 2 rows has label 1"));
  EXPECT_THAT(err("1 1:1\n2 4:1 3:1\n"), HasSubstr("t.svm:2: feature index 3 does not increase (after 4)"));
  // A test label the training file does not have.
  write_raw(dir.file("test.svm"), "1 1:1\n5 1:1\n");
  cfg.test = dir.file("test.svm");
  write_raw(cfg.train, "1 1:1\n2 1:1\n");
  EXPECT_THAT(data_error([&] { load_data(cfg, 1, 0, 1, true); }),
              HasSubstr("test.svm:2: label 5 is not one of the 2 labels the model knows (1 .. 2)"));
}

TEST(Partition, CoversEveryRowOnce) {
  for (int64_t n : {0, 1, 7, 60000}) {
    for (int p : {1, 2, 3, 4, 7}) {
      int64_t next = 0;
      for (int r = 0; r < p; ++r) {
        const Range range = partition_range(n, r, p);
        EXPECT_EQ(range.begin, next);
        EXPECT_LE(range.size(), n / p + 1);
        next = range.end;
      }
      EXPECT_EQ(next, n);
    }
  }
}

TEST(Synthetic, PartitionsEqualTheWholeDenseAndSparse) {
  for (double density : {1.0, 0.1}) {
    SyntheticSpec spec{50, 40, 4, density, 0.1, 7, 0};
    const Dataset all = make_synthetic(spec);
    const Dataset part = make_synthetic(spec, 20, 35);
    ASSERT_EQ(part.n, 15);
    EXPECT_EQ(part.sparse, density < 1.0);
    for (int64_t i = 0; i < 15; ++i) {
      EXPECT_EQ(part.labels[i], all.labels[20 + i]);
      if (density < 1.0) {
        EXPECT_EQ(Matrix(part.csr.row(i)), Matrix(all.csr.row(20 + i)));
        EXPECT_EQ(part.csr.row(i).nonZeros(), 4);
      } else {
        EXPECT_EQ(part.dense.row(i), all.dense.row(20 + i));
      }
    }
  }
}

TEST(Synthetic, ClassesAreLearnableSignal) {
  // The nearest class prototype (estimated from the data) must beat chance by far.
  SyntheticSpec spec{2000, 30, 5, 1.0, 0.0, 3, 0};
  const Dataset d = make_synthetic(spec);
  Matrix means = Matrix::Zero(5, 30);
  std::vector<int> counts(5, 0);
  for (int64_t i = 0; i < d.n; ++i) {
    means.row(d.labels[i]) += d.dense.row(i);
    ++counts[d.labels[i]];
  }
  for (int c = 0; c < 5; ++c) means.row(c) /= std::max(1, counts[c]);
  int correct = 0;
  for (int64_t i = 0; i < d.n; ++i) {
    Eigen::Index best;
    (means.rowwise() - d.dense.row(i)).rowwise().squaredNorm().minCoeff(&best);
    correct += best == d.labels[i];
  }
  EXPECT_GT(correct, 0.8 * d.n);
}

TEST(Sampler, EpochIsAPermutationAndDeterministic) {
  EpochSampler a(10, 1, 2), b(10, 1, 2), c(10, 1, 3);
  std::vector<int64_t> x, y, z;
  a.next(10, x);
  b.next(10, y);
  c.next(10, z);
  EXPECT_EQ(x, y);
  EXPECT_NE(x, z);
  std::sort(x.begin(), x.end());
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(x[i], i);
  a.next(15, x);  // crosses into the third epoch
  EXPECT_EQ(a.epoch(), 2);
}

TEST(LoadData, EmptyPartitionIsAClearError) {
  Config cfg;
  cfg.data.format = sfb::DataFormat::kSynthetic;
  cfg.data.features = 5;
  cfg.data.classes = 2;
  cfg.data.synthetic_samples = 2;
  EXPECT_THAT(data_error([&] { load_data(cfg.data, cfg.job.seed, 0, 3, false); }),
              HasSubstr("rank 0 of 3 got an empty partition"));
  const LoadedData ok = load_data(cfg.data, cfg.job.seed, 1, 2, true);
  EXPECT_EQ(ok.train.n, 1);
  EXPECT_EQ(ok.train.dim, 6);  // bias feature
  EXPECT_EQ(ok.test.n, cfg.data.synthetic_test_samples);
}

}  // namespace
}  // namespace sfb::io
