// Hostile files: each class of bad input the readers and the output handling met gets a clear
// DataError or InvalidArgument naming the file, never a crash, a hang, a huge allocation or a
// silently wrong data set (issue 18's items 5 to 8, 11 and 13).
#include <sys/resource.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "sfb/core/error.h"
#include "sfb/core/files.h"
#include "sfb/io/checkpoint.h"
#include "sfb/io/idx_reader.h"
#include "sfb/io/libsvm_reader.h"
#include "sfb/io/load_data.h"
#include "sfb/io/model_file.h"
#include "testing/files.h"

// GCC defines __SANITIZE_*__; clang answers __has_feature.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SFB_UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define SFB_UNDER_SANITIZER 1
#endif
#endif
#ifndef SFB_UNDER_SANITIZER
#define SFB_UNDER_SANITIZER 0
#endif

namespace sfb::io {
namespace {

using testing::be32;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::TempDir;
using testing::write_gz;
using testing::write_raw;

std::string data_error(const std::function<void()>& fn) { return testing::error_of<DataError>(fn); }
std::string arg_error(const std::function<void()>& fn) { return testing::error_of<InvalidArgument>(fn); }

std::string idx_header(std::vector<uint32_t> dims) {
  std::string h = be32(0x800 | static_cast<uint32_t>(dims.size()));
  for (uint32_t d : dims) h += be32(d);
  return h;
}

// RLIMIT_AS lowered for a scope: an allocation of the claimed size would fail there.
class AddressSpaceLimit {
 public:
  explicit AddressSpaceLimit(rlim_t bytes) {
    getrlimit(RLIMIT_AS, &old_);
    rlimit lim = old_;
    lim.rlim_cur = bytes;
    setrlimit(RLIMIT_AS, &lim);
  }
  ~AddressSpaceLimit() { setrlimit(RLIMIT_AS, &old_); }

 private:
  rlimit old_{};
};

TEST(HostileIdx, DimensionProductsThatOverflowAreRefusedBeforeAnyAllocation) {
  TempDir dir;
  // 100 x 2^31 x 2^31 wrapped to 0 pixels per image (signed overflow) and trained with D = 1.
  write_raw(dir.file("wrap"), idx_header({100, 1u << 31, 1u << 31}) + std::string(1000, '\1'));
  EXPECT_THAT(data_error([&] { read_idx_images(dir.file("wrap")); }), HasSubstr("describe more than 2^40 bytes"));
  // A zero dimension first once let the others multiply past int64 (UBSan: signed overflow).
  write_raw(dir.file("zero"), idx_header({0, (1u << 31) - 1, (1u << 31) - 1, (1u << 31) - 1}));
  EXPECT_THAT(data_error([&] { read_idx_images(dir.file("zero")); }), HasSubstr("describe more than 2^40 bytes"));
  // 100 x 65535^3 ended in a bare std::bad_alloc.
  write_raw(dir.file("huge"), idx_header({100, 65535, 65535, 65535}));
  EXPECT_THAT(data_error([&] { read_idx_header(dir.file("huge")); }), HasSubstr("huge: IDX dimensions"));
  // ~2000^3 = 8 GB claimed, 1 KiB present: refused from what is in the file, without allocating
  // the claim (a 1 GiB address-space limit would make that allocation fail).
  write_gz(dir.file("short.gz"), idx_header({2000, 2000, 2000}) + std::string(1024, '\7'));
  {
#if !SFB_UNDER_SANITIZER  // sanitizers reserve terabytes of shadow memory up front
    AddressSpaceLimit limit(rlim_t{1} << 34);
#endif
    EXPECT_THAT(data_error([&] { read_idx_images(dir.file("short.gz")); }),
                HasSubstr("file is truncated: 8000000000 bytes of the image pixels expected, the file holds 1024"));
  }
}

TEST(HostileIdx, RandomHeadersNeverCrashOrAllocateTheirClaim) {
  // Property: any 1..4 dimensions from values around the edges, with a few bytes of payload,
  // either read (when the payload really holds them) or throw DataError.
  TempDir dir;
  std::mt19937 rng(18);
  const uint32_t edges[] = {0, 1, 2, 3, 255, 65535, 65536, 1u << 20, (1u << 31) - 1, 1u << 31, 0xffffffffu};
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<uint32_t> dims(1 + rng() % 4);
    for (auto& d : dims) d = edges[rng() % std::size(edges)];
    write_raw(dir.file("r"), idx_header(dims) + std::string(rng() % 64, '\3'));
    try {
      if (dims.size() == 1)
        read_idx_labels(dir.file("r"));
      else
        read_idx_images(dir.file("r"));
    } catch (const DataError&) {
    }
  }
}

TEST(HostileIdx, DamagedGzipIsReportedWhereItIsNotInTheField) {
  TempDir dir;
  std::string img = idx_header({50, 20, 20});
  for (int i = 0; i < 50 * 400; ++i) img.push_back(static_cast<char>(i * 31 % 251));
  write_gz(dir.file("ok.gz"), img);
  const std::string gz = testing::read_raw(dir.file("ok.gz"));
  EXPECT_EQ(read_idx_images(dir.file("ok.gz")).rows(), 50);
  // Only the 8-byte trailer (CRC-32, length) missing: the data decompress, the stream is not whole.
  write_raw(dir.file("notrailer.gz"), gz.substr(0, gz.size() - 8));
  EXPECT_THAT(data_error([&] { read_idx_images(dir.file("notrailer.gz")); }),
              HasSubstr("notrailer.gz: the gzip stream does not end cleanly"));
  // A wrong CRC in the trailer.
  std::string crc = gz;
  crc[crc.size() - 6] ^= 0x55;
  write_raw(dir.file("crc.gz"), crc);
  EXPECT_THAT(data_error([&] { read_idx_images(dir.file("crc.gz")); }),
              HasSubstr("crc.gz: damaged gzip data near compressed byte"));
  // Garbage in the middle of the deflate data: reported as damaged gzip data, not as the magic number.
  std::string mid = gz;
  for (size_t i = mid.size() / 2; i < mid.size() / 2 + 64; ++i) mid[i] = static_cast<char>(0xff);
  write_raw(dir.file("mid.gz"), mid);
  const std::string e = data_error([&] { read_idx_images(dir.file("mid.gz")); });
  EXPECT_THAT(e, HasSubstr("mid.gz"));
  EXPECT_THAT(e, Not(HasSubstr("magic number")));
}

TEST(HostileIdx, NoImagesIsSaidAsSuch) {
  TempDir dir;
  write_raw(dir.file("img"), idx_header({0, 28, 28}));
  write_raw(dir.file("lab"), idx_header({0}));
  DataConfig d;
  d.train_images = dir.file("img");
  d.train_labels = dir.file("lab");
  EXPECT_THAT(data_error([&] { load_data(d, 1, 0, 1, false); }), HasSubstr("img: the IDX file holds 0 images"));
}

TEST(HostileLibsvm, TokensAreAcceptedAsLibsvmWritesThemAndEchoedShort) {
  TempDir dir;
  const LibsvmOptions opt{4, 2, 0};
  write_raw(dir.file("plus.svm"), "+1 1:1e-50 2:-0.5\n0 3:1\n");
  const Dataset d = read_libsvm(dir.file("plus.svm"), opt);
  EXPECT_EQ(d.labels[0], 1);
  EXPECT_EQ(d.csr.coeff(0, 0), 0.0f);  // underflows float: as good as 0
  // A 1 MB token is echoed as an excerpt with its length, binary bytes escaped.
  write_raw(dir.file("long.svm"), "1 1:" + std::string(1 << 20, '9') + "x\n");
  const std::string e = data_error([&] { read_libsvm(dir.file("long.svm"), opt); });
  EXPECT_THAT(e, HasSubstr("(1048577 bytes)"));
  EXPECT_LT(e.size(), 300u);
  write_raw(dir.file("bin.svm"), std::string("1 2:\x01\x02\0zz", 9) + "\n");
  EXPECT_THAT(data_error([&] { read_libsvm(dir.file("bin.svm"), opt); }), HasSubstr("'\\x01\\x02\\x00zz'"));
  EXPECT_THAT(data_error([&] { parse_libsvm(*std::make_unique<std::istringstream>("1 1:1e39\n"), "f", opt); }),
              HasSubstr("outside the float range"));
  // Beyond double: from_chars reports it like an underflow; it once went in as 0.
  for (const char* big : {"1 1:1e999\n", "1 1:-1e400\n"})
    EXPECT_THAT(data_error([&] { parse_libsvm(*std::make_unique<std::istringstream>(big), "f", opt); }),
                HasSubstr("is not a finite number"));
  const Dataset tiny = parse_libsvm(*std::make_unique<std::istringstream>("1 1:1e-999\n"), "f", opt);
  EXPECT_EQ(tiny.csr.coeff(0, 0), 0.0f);
}

TEST(HostileLibsvm, EmptyCommentOnlyAndDirectoryAreNamedForWhatTheyAre) {
  TempDir dir;
  DataConfig d;
  d.format = sfb::DataFormat::kLibsvm;
  d.features = 4;
  d.classes = 2;
  for (const char* content : {"", "# only a comment\n\n"}) {
    write_raw(dir.file("e.svm"), content);
    d.train = dir.file("e.svm");
    EXPECT_THAT(data_error([&] { load_data(d, 1, 0, 1, false); }), HasSubstr("no data rows"));
  }
  d.train = dir.path();
  EXPECT_THAT(data_error([&] { load_data(d, 1, 0, 1, false); }), HasSubstr("is a directory"));
}

TEST(HostileFiles, ACheckpointOrModelPathThatIsADirectoryIsNamed) {
  TempDir dir;
  EXPECT_THAT(data_error([&] { read_checkpoint(dir.path()); }), HasSubstr("cannot read checkpoint: it is a directory"));
  EXPECT_THAT(data_error([&] { read_model(dir.path()); }), HasSubstr("cannot read model file: it is a directory"));
  // A model file claiming 2^31 x 2^31 with 4 bytes of data: refused from the file's length.
  std::string m(kModelMagic, 8);
  const uint32_t v = 1, dtype = 1, crc = 0, pad = 0;
  const int64_t big = int64_t{1} << 31;
  for (const void* p : {static_cast<const void*>(&v), static_cast<const void*>(&dtype)})
    m.append(static_cast<const char*>(p), 4);
  m.append(reinterpret_cast<const char*>(&big), 8).append(reinterpret_cast<const char*>(&big), 8);
  m.append(reinterpret_cast<const char*>(&crc), 4).append(reinterpret_cast<const char*>(&pad), 4).append("abcd");
  write_raw(dir.file("m.bin"), m);
  EXPECT_THAT(data_error([&] { read_model(dir.file("m.bin")); }), HasSubstr("model data is truncated"));
}

TEST(HostileOutputs, EveryOutputPathIsProvenBeforeTraining) {
  TempDir dir;
  testing::write_raw(dir.file("plain"), "x");
  EXPECT_THAT(arg_error([&] { prepare_output_file(dir.file("plain") + "/sub/model.bin", "output.model"); }),
              HasSubstr("output.model"));
  EXPECT_THAT(arg_error([&] { prepare_output_file(dir.path(), "output.summary"); }), HasSubstr("is a directory"));
  EXPECT_THAT(arg_error([&] { prepare_output_file(dir.file(std::string(300, 'n')), "model.plugin"); }),
              HasSubstr("a path component of 300 characters"));
  // A subdirectory is created; stale temporaries of the file (a writer killed mid-write) go.
  std::filesystem::create_directories(dir.file("sub"));
  testing::write_raw(dir.file("sub/ck.bin.tmp.4242"), std::string(1000, 'x'));
  testing::write_raw(dir.file("sub/other.tmp.4242"), "keep");
  prepare_output_file(dir.file("sub/ck.bin"), "checkpoint.path");
  EXPECT_FALSE(std::filesystem::exists(dir.file("sub/ck.bin.tmp.4242")));
  EXPECT_TRUE(std::filesystem::exists(dir.file("sub/other.tmp.4242")));
  prepare_output_file(dir.file("deeper/still/model.bin"), "output.model");
  EXPECT_TRUE(std::filesystem::is_directory(dir.file("deeper/still")));
}

TEST(HostileOutputs, ASecondJobCannotClaimTheSameOutputDirectory) {
  TempDir dir;
  {
    DirectoryLock first(dir.path());
    // flock conflicts between open file descriptions, also within one process.
    EXPECT_THAT(arg_error([&] { DirectoryLock second(dir.path()); }),
                HasSubstr("is in use by another sfbd job (process " + std::to_string(::getpid())));
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file(".sfbd.lock")));
  DirectoryLock again(dir.path());  // released with the first
}

}  // namespace
}  // namespace sfb::io
