// Byte-exact formats: every encoder's output for a fixed input is compared with the FNV-1a 64 of the
// bytes recorded when the format was fixed. These tests fail when a refactoring changes a byte on
// the wire or in a file; a deliberate format change bumps that format's version and the constant.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <numeric>

#include <gtest/gtest.h>

#include "sfb/baselines/ps_codec.h"
#include "sfb/comm/allreduce.h"
#include "sfb/comm/setup_collectives.h"
#include "sfb/comm/sf_codec.h"
#include "sfb/core/hash.h"
#include "sfb/io/checkpoint.h"
#include "sfb/io/model_file.h"
#include "sfb/runtime/control_codec.h"
#include "testing/batches.h"
#include "testing/rank_threads.h"

namespace sfb {
namespace {

uint64_t hash_of(std::span<const std::byte> b) { return fnv1a64(b); }
uint64_t hash_of(const std::string& s) { return fnv1a64(std::string_view(s)); }

Matrix ramp(int64_t rows, int64_t cols, float scale) {
  Matrix m(rows, cols);
  for (int64_t i = 0; i < m.size(); ++i) m.data()[i] = scale * static_cast<float>(i % 97) - 3.0f;
  return m;
}

TEST(WireGolden, SfBatchDense) {
  const SfBatch b = testing::dense_sf_batch(3, 123456789, ramp(4, 5, 0.25f), ramp(4, 7, -0.5f));
  EXPECT_EQ(hash_of(comm::encode_sf_batch(b)), 14203149784202780102ULL);
}

TEST(WireGolden, SfBatchSparse) {
  const SfBatch b =
      testing::sparse_sf_batch(1, 3, 100, ramp(3, 4, 1.5f), {0, 2, 2, 5}, {3, 50, 0, 1, 99}, {1, 2, 3, 4, 5});
  EXPECT_EQ(hash_of(comm::encode_sf_batch(b)), 11751390642394650473ULL);
}

TEST(WireGolden, Control) {
  runtime::ControlMsg m{runtime::ControlType::kDone, 2, -77, {1, -2, int64_t{1} << 40}};
  EXPECT_EQ(hash_of(runtime::encode_control(m)), 13273236307320431239ULL);
}

TEST(WireGolden, Checkpoint) {
  io::Checkpoint c{0x1122334455667788ULL, 42, 1000, 4, ramp(3, 5, 0.125f)};
  EXPECT_EQ(hash_of(io::encode_checkpoint(c)), 1893093953989493993ULL);
}

TEST(WireGolden, ModelFile) {
  const auto path = (std::filesystem::temp_directory_path() / "sfb_golden_model.bin").string();
  io::write_model(path, ramp(6, 2, 2.0f));
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(path);
  // Format version 2 (issue 67: flags and a label map; here none): the bytes changed on purpose.
  EXPECT_EQ(hash_of(bytes), 989574331852664231ULL);
}

TEST(WireGolden, ParameterServer) {
  const Matrix rows = ramp(2, 3, 1.0f);
  EXPECT_EQ(hash_of(baselines::encode_ps(baselines::PsType::kPush, 9, 4, 2, 3, rows.data())), 6491851255639139077ULL);
  EXPECT_EQ(hash_of(baselines::encode_ps(baselines::PsType::kBye, 11, 0, 0, 0, nullptr)), 8804061376005806500ULL);
}

// Records every message a rank sends: what the collectives put on the wire.
class Recording : public comm::Transport {
 public:
  explicit Recording(comm::Transport& inner) : inner_(inner) { init_counters(inner.size()); }
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  void barrier() override { inner_.barrier(); }
  uint64_t digest() const { return digest_; }

 protected:
  void do_send(int dst, comm::Tag tag, comm::SharedBytes data) override {
    const int32_t head[2] = {dst, tag};
    digest_ = fnv1a64(std::as_bytes(std::span(head)), digest_);
    digest_ = fnv1a64(*data, digest_);
    inner_.send_shared(dst, tag, std::move(data));
  }
  std::optional<comm::Message> poll() override { return inner_.try_recv(); }

 private:
  comm::Transport& inner_;
  uint64_t digest_ = 0xcbf29ce484222325ULL;
};

// Runs `fn` on 3 ranks over recording transports; returns each rank's digest of what it sent.
template <typename Fn>
std::vector<uint64_t> sent_digests(Fn fn) {
  std::vector<uint64_t> d(3);
  std::mutex mu;
  testing::run_ranks(3, [&](comm::Transport& inner) {
    Recording t(inner);
    fn(t);
    std::lock_guard lock(mu);
    d[static_cast<size_t>(t.rank())] = t.digest();
  });
  return d;
}

std::vector<float> data_of(int rank, size_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), static_cast<float>(rank) * 0.5f);
  return v;
}

TEST(WireGolden, Collectives) {
  const auto d = sent_digests([](comm::Transport& t) {
    comm::allgather_i64(t, 1000 + t.rank());
    const std::string text = "plan";
    comm::broadcast_bytes(t, 0, std::as_bytes(std::span(text.data(), text.size())));
  });
  EXPECT_EQ(d, (std::vector<uint64_t>{15407412525720993281ULL, 17839252464176912250ULL, 2685943710996274893ULL}));
}

TEST(WireGolden, RankOrderAllreduce) {
  const auto d = sent_digests([](comm::Transport& t) {
    auto data = data_of(t.rank(), 10);
    comm::TransportChannel ch(t, comm::kTagReduce);
    comm::RankOrderAllreduce direct(ch, 3);
    direct.set_cost({1e9, 1e-9});
    direct.run(data, 4097);
    comm::RankOrderAllreduce segmented(ch, 3, {8, 8, 16});
    segmented.set_cost({0, 1});
    segmented.run(data, 4098);
  });
  EXPECT_EQ(d, (std::vector<uint64_t>{3691010523519694570ULL, 16560855449190661805ULL, 2542445442662543974ULL}));
}

}  // namespace
}  // namespace sfb
