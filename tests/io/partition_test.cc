// data.partition and the objective's sample (io/partition.h): the shuffled partition is a
// permutation cut into P pieces, the same on every rank and for every P; the readers keep exactly
// the listed rows; a file sorted by label gives every rank every class.
#include <algorithm>
#include <fstream>
#include <numeric>
#include <set>

#include <gtest/gtest.h>

#include "sfb/core/error.h"
#include "sfb/io/idx_reader.h"
#include "sfb/io/libsvm_reader.h"
#include "sfb/io/load_data.h"
#include "sfb/io/partition.h"
#include "sfb/io/synthetic.h"
#include "sfb/models/mlr.h"
#include "testing/files.h"

namespace sfb::io {
namespace {

TEST(RowPermutation, IsAPermutationForEverySize) {
  for (int64_t n : {0, 1, 2, 3, 5, 17, 64, 1000, 4097}) {
    const RowPermutation pi(n, 7);
    std::vector<char> seen(static_cast<size_t>(n), 0);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = pi(i);
      ASSERT_GE(v, 0);
      ASSERT_LT(v, n);
      ASSERT_FALSE(seen[static_cast<size_t>(v)]) << "n " << n << " value " << v << " twice";
      seen[static_cast<size_t>(v)] = 1;
    }
  }
}

TEST(RowPermutation, DependsOnTheSeedAndShuffles) {
  const RowPermutation a(1000, 1), b(1000, 1), c(1000, 2);
  int same = 0, fixed = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    EXPECT_EQ(a(i), b(i));
    same += a(i) == c(i) ? 1 : 0;
    fixed += a(i) == i ? 1 : 0;
  }
  EXPECT_LT(same, 20);   // another seed, another permutation
  EXPECT_LT(fixed, 20);  // not the identity
}

TEST(Partition, EveryRowOnExactlyOneRankForEveryP) {
  for (const Partition mode : {Partition::kShuffled, Partition::kContiguous}) {
    for (int P = 1; P <= 8; ++P) {
      const int64_t n = 1003;
      std::vector<int> owner(static_cast<size_t>(n), -1);
      for (int r = 0; r < P; ++r) {
        const RowList rows = partition_rows(n, r, P, mode, 42);
        EXPECT_EQ(static_cast<int64_t>(rows.size()), partition_range(n, r, P).size()) << name(mode) << " P " << P;
        EXPECT_TRUE(std::is_sorted(rows.begin(), rows.end()));
        EXPECT_EQ(rows, partition_rows(n, r, P, mode, 42)) << "not reproducible";
        for (int64_t v : rows) {
          ASSERT_EQ(owner[static_cast<size_t>(v)], -1) << name(mode) << " P " << P << " row " << v << " on two ranks";
          owner[static_cast<size_t>(v)] = r;
        }
      }
      EXPECT_EQ(std::count(owner.begin(), owner.end(), -1), 0) << name(mode) << " P " << P << ": a row on no rank";
    }
  }
}

TEST(Partition, OneShuffleCutIntoPPieces) {
  // Resumed on another P the job keeps its permutation: rank 0 of 2 holds ranks 0 and 1 of 4.
  const int64_t n = 1000;
  RowList half = partition_rows(n, 0, 4, Partition::kShuffled, 9);
  const RowList second = partition_rows(n, 1, 4, Partition::kShuffled, 9);
  half.insert(half.end(), second.begin(), second.end());
  std::sort(half.begin(), half.end());
  EXPECT_EQ(half, partition_rows(n, 0, 2, Partition::kShuffled, 9));
  EXPECT_NE(partition_rows(n, 0, 2, Partition::kShuffled, 9), partition_rows(n, 0, 2, Partition::kContiguous, 9));
}

TEST(Partition, ASortedFileGivesEveryRankEveryClass) {
  // 10 classes of 600 rows each, in label order, on 8 ranks: about 75 rows of each class per rank.
  const int64_t n = 6000;
  for (int r = 0; r < 8; ++r) {
    std::vector<int> count(10, 0);
    for (int64_t v : partition_rows(n, r, 8, Partition::kShuffled, 42)) ++count[static_cast<size_t>(v / 600)];
    for (int c = 0; c < 10; ++c) {
      EXPECT_GT(count[static_cast<size_t>(c)], 40) << "rank " << r << " class " << c;
      EXPECT_LT(count[static_cast<size_t>(c)], 110) << "rank " << r << " class " << c;
    }
    std::set<int64_t> classes;
    for (int64_t v : partition_rows(n, r, 8, Partition::kContiguous, 42)) classes.insert(v / 600);
    EXPECT_LE(classes.size(), 2u) << "contiguous keeps the file's order";
  }
}

TEST(Partition, TheObjectiveSampleIsThePermutationsHead) {
  const int64_t n = 5000;
  const RowList s = sample_rows(n, 400, 3);
  EXPECT_EQ(s.size(), 400u);
  EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
  // Within rank 0's shuffled partition while it is larger than the sample, for any P.
  for (int P : {1, 2, 4, 8}) {
    const RowList r0 = partition_rows(n, 0, P, Partition::kShuffled, 3);
    EXPECT_TRUE(std::includes(r0.begin(), r0.end(), s.begin(), s.end())) << "P " << P;
  }
  EXPECT_EQ(sample_rows(n, 1 << 20, 3).size(), static_cast<size_t>(n));
  EXPECT_GT(s.back(), n / 2) << "spread over the file, not its first rows";
}

TEST(Partition, ReadersKeepExactlyTheListedRows) {
  testing::TempDir dir;
  // IDX: 50 images of 2 x 3 pixels, labels i % 10.
  std::string img = testing::be32(0x803) + testing::be32(50) + testing::be32(2) + testing::be32(3);
  std::string lab = testing::be32(0x801) + testing::be32(50);
  for (uint32_t i = 0; i < 50; ++i) {
    for (uint32_t k = 0; k < 6; ++k) img.push_back(static_cast<char>((i * 7 + k) % 256));
    lab.push_back(static_cast<char>(i % 10));
  }
  testing::write_gz(dir.file("img.gz"), img);
  testing::write_raw(dir.file("lab"), lab);
  const RowList rows{0, 1, 2, 7, 20, 21, 49};
  const Matrix all = read_idx_images(dir.file("img.gz"));
  const Matrix some = read_idx_images(dir.file("img.gz"), rows);
  const auto labels = read_idx_labels(dir.file("lab"), rows);
  ASSERT_EQ(some.rows(), 7);
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(some.row(static_cast<int64_t>(i)), all.row(rows[i]));
    EXPECT_EQ(labels[i], rows[i] % 10);
  }
  EXPECT_THROW(read_idx_images(dir.file("img.gz"), RowList{3, 50}), DataError);
  // libsvm: comments and blank lines are not rows.
  {
    std::ofstream f(dir.file("d.svm"));
    f << "# header\n";
    for (int i = 0; i < 30; ++i) f << (i % 3) << " 1:" << i << " 3:" << (i * 0.5) << "\n" << (i == 4 ? "\n" : "");
  }
  const LibsvmOptions opt{3, 3, 0};
  const Dataset sv = read_libsvm(dir.file("d.svm"), opt, RowList{0, 4, 5, 29});
  ASSERT_EQ(sv.n, 4);
  EXPECT_EQ(sv.labels, (std::vector<int32_t>{0, 1, 2, 2}));
  EXPECT_FLOAT_EQ(sv.csr.coeff(1, 0), 4.0f);
  EXPECT_FLOAT_EQ(sv.csr.coeff(3, 2), 14.5f);
  EXPECT_THROW(read_libsvm(dir.file("d.svm"), opt, RowList{30}), DataError);
  // Synthetic rows depend on their index only.
  const SyntheticSpec spec{40, 6, 3, 1.0, 0.1, 5, 0};
  const Dataset full = make_synthetic(spec);
  const Dataset part = make_synthetic(spec, RowList{3, 17, 39});
  EXPECT_EQ(part.dense.row(1), full.dense.row(17));
  EXPECT_EQ(part.labels[2], full.labels[39]);
}

DataConfig synthetic_config(Partition partition) {
  DataConfig d;
  d.format = sfb::DataFormat::kSynthetic;
  d.features = 8;
  d.classes = 4;
  d.synthetic_samples = 997;
  d.synthetic_test_samples = 0;
  d.partition = partition;
  return d;
}

TEST(Partition, LoadDataSplitsTheRowsAndSamplesTheSameObjectiveRowsForEveryP) {
  const DataConfig d = synthetic_config(Partition::kShuffled);
  const LoadedData one = load_data(d, 42, LoadRequest{0, 1, false, 300});
  ASSERT_EQ(one.train.n, 997);
  ASSERT_EQ(one.eval_sample.n, 300);
  // The P = 4 partitions hold every row once (compared by label counts and the rows' sums).
  double sum4 = 0;
  int64_t rows4 = 0;
  for (int r = 0; r < 4; ++r) {
    const LoadedData part = load_data(d, 42, LoadRequest{r, 4, false, r == 0 ? 300 : 0});
    rows4 += part.train.n;
    sum4 += static_cast<double>(part.train.dense.sum());
    if (r == 0) {
      // The same objective rows, so the same objective of the same model, as on one rank.
      EXPECT_EQ(part.eval_sample.dense, one.eval_sample.dense);
      EXPECT_EQ(part.eval_sample.labels, one.eval_sample.labels);
      Matrix W = Matrix::Random(4, 9);
      const models::Mlr mlr(4, 9, false);
      EXPECT_EQ(mlr.objective(W, part.eval_sample, 0), mlr.objective(W, one.eval_sample, 0));
      EXPECT_NE(mlr.objective(W, part.train, 300), mlr.objective(W, part.eval_sample, 0));
    }
  }
  EXPECT_EQ(rows4, 997);
  EXPECT_NEAR(sum4, static_cast<double>(one.train.dense.sum()), 1e-2 * std::abs(sum4) + 1e-2);
  // The contiguous partition samples the same objective rows too.
  const LoadedData c = load_data(synthetic_config(Partition::kContiguous), 42, LoadRequest{0, 4, false, 300});
  EXPECT_EQ(c.eval_sample.labels, one.eval_sample.labels);
}

}  // namespace
}  // namespace sfb::io
