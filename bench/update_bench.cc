// The SFB update path against this machine's ceilings, measured in the same run:
//   * SGEMM peak: OpenBLAS's float GEMM on square 4096 matrices (the library picks its kernels for
//     this CPU at run time; OPENBLAS_CORETYPE forces a family, scripts/bench.sh runs with and
//     without it);
//   * STREAM triad bandwidth: a[i] = b[i] + s * c[i] over 3 x 64 MiB;
// and the dense update is judged against the SGEMM peak (GFLOP/s = 2 J D P K / s), the sparse
// update against the bandwidth roofline for the bytes it must touch (read + write each touched
// cache line of W once, plus U and the sparse V), serialisation against the triad bandwidth,
// and the SF computation and the 4-rank in-process run in samples/s and clocks/s.
//
// Threads: Eigen and OpenMP use OMP_NUM_THREADS (scripts/bench.sh sets 1 unless told).
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <new>
#include <random>
#include <thread>
#include <vector>

#include "sfb/api/batch_sf_writer.h"
#include "sfb/comm/sf_codec.h"
#include "sfb/core/gathered_sum.h"
#include "sfb/core/gemm.h"
#include "sfb/core/tensor.h"
#include "sfb/io/load_data.h"
#include "sfb/io/synthetic.h"
#include "sfb/models/mlr.h"
#include "sfb/models/registry.h"
#include "sfb/runtime/update_applier.h"
#include "sfb/runtime/worker.h"

// Every heap allocation of the process is counted, to measure allocations per clock. new and
// delete are replaced as a pair (malloc/free), which GCC cannot see across inlined callers.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
std::atomic<int64_t> g_allocations{0};
void* operator new(size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace {

using sfb::Matrix;
using sfb::SfBatch;

int threads() { return Eigen::nbThreads(); }

// Measured again for every row that reports against it, right after the row's own timing: on a
// shared machine the ceiling moves, and a ratio means something only between neighbours in time.
double sgemm_peak_gflops() {
  return [] {
    const int n = 4096;
    Matrix a = Matrix::Random(n, n), b = Matrix::Random(n, n), c = Matrix::Zero(n, n);
    double best = 0;
    for (int rep = 0; rep < 3; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      sfb::gemm(sfb::Op::kNone, a, sfb::Op::kNone, b, c, 1.0f, 1.0f);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::max(best, 2.0 * n * n * n / s / 1e9);
    }
    benchmark::DoNotOptimize(c.data());
    return best;
  }();
}

double stream_triad_gbs() {
  return [] {
    const size_t n = size_t{16} << 20;  // 64 MiB per array
    std::vector<float> a(n, 0.0f), b(n, 1.0f), c(n, 2.0f);
    double best = 0;
    for (int rep = 0; rep < 8; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      const float s = 0.5f + static_cast<float>(rep);
#pragma omp parallel for schedule(static)
      for (size_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
      const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::max(best, 3.0 * 4 * n / sec / 1e9);
    }
    benchmark::DoNotOptimize(a.data());
    return best;
  }();
}

SfBatch dense_batch(int pk, int J, int D) {
  SfBatch b;
  b.count = pk;
  b.J = J;
  b.D = D;
  b.u = Matrix::Random(pk, J) * 1e-3f;
  b.v = Matrix::Random(pk, D);
  return b;
}

SfBatch sparse_batch(int pk, int J, int D, double density, uint64_t seed) {
  SfBatch b;
  b.count = pk;
  b.J = J;
  b.D = D;
  b.sparse_v = true;
  b.u = Matrix::Random(pk, J) * 1e-3f;
  std::mt19937_64 rng(seed);
  const int nnz = std::max(1, static_cast<int>(density * D));
  b.v_row_ptr.push_back(0);
  std::vector<int32_t> cols(static_cast<size_t>(D));
  for (int i = 0; i < D; ++i) cols[static_cast<size_t>(i)] = i;
  for (int i = 0; i < pk; ++i) {
    std::shuffle(cols.begin(), cols.end(), rng);
    std::vector<int32_t> pick(cols.begin(), cols.begin() + nnz);
    std::sort(pick.begin(), pick.end());
    for (int32_t c : pick) {
      b.v_index.push_back(c);
      b.v_value.push_back(static_cast<float>(rng() % 1000) / 1000.0f);
    }
    b.v_row_ptr.push_back(static_cast<int64_t>(b.v_index.size()));
  }
  return b;
}

// The bytes a sparse update must move: read and write every touched 64-byte line of W once, plus U
// and the sparse V. Row-major: every row, the lines of its touched columns. Feature-major: the
// stored rows of the touched columns, whole.
double sparse_touched_bytes(const SfBatch& b, sfb::Layout layout) {
  double w_bytes = 0;
  if (layout == sfb::Layout::kRowMajor) {
    std::vector<char> line(static_cast<size_t>((b.D + 15) / 16), 0);
    for (int32_t c : b.v_index) line[static_cast<size_t>(c / 16)] = 1;
    double lines = 0;
    for (char l : line) lines += l;
    w_bytes = 2.0 * 64.0 * lines * b.J;  // read and write
  } else {
    std::vector<char> used(static_cast<size_t>(b.D), 0);
    for (int32_t c : b.v_index) used[static_cast<size_t>(c)] = 1;
    double cols = 0;
    for (char u : used) cols += u;
    w_bytes = 2.0 * 64.0 * cols * static_cast<double>((b.J + 15) / 16);
  }
  const double sf_bytes = 4.0 * b.count * b.J + 8.0 * static_cast<double>(b.v_index.size());
  return w_bytes + sf_bytes;
}

// `bytes` per iteration as a rate, the triad measured right after, and their ratio.
void report_roofline(benchmark::State& st, double bytes) {
  const double triad = stream_triad_gbs();
  st.counters["GB/s_roofline_bytes"] = benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["stream_GB/s"] = triad;
  st.counters["pct_of_roofline"] =
      benchmark::Counter(100.0 * bytes / 1e9 / triad, benchmark::Counter::kIsIterationInvariantRate);
}

sfb::Layout layout_arg(int64_t v) { return v ? sfb::Layout::kFeatureMajor : sfb::Layout::kRowMajor; }

// merged = 1: all batches of the clock in one UpdateApplier call (one sweep over W, what the
// worker does); 0: one call per batch.
void apply_all(sfb::runtime::UpdateApplier& applier, Matrix& W, const std::vector<SfBatch>& batches, bool merged) {
  if (!merged) {
    for (const auto& b : batches) applier.apply(W, b);
    return;
  }
  std::vector<const SfBatch*> ptrs;
  for (const auto& b : batches) ptrs.push_back(&b);
  applier.apply(W, ptrs);
}

// Dense update: one clock's P*K pairs as batches of K (the engine's unit).
void BM_DenseUpdate(benchmark::State& st) {
  const int J = static_cast<int>(st.range(0)), D = static_cast<int>(st.range(1)), pk = static_cast<int>(st.range(2));
  const int k = static_cast<int>(st.range(3));
  const bool merged = st.range(4) != 0;
  const sfb::Layout layout = layout_arg(st.range(5));
  Matrix W = Matrix::Zero(sfb::stored_rows(layout, J, D), sfb::stored_cols(layout, J, D));
  sfb::runtime::UpdateApplier applier(threads(), layout);
  std::vector<SfBatch> batches;
  for (int i = 0; i < pk / k; ++i) batches.push_back(dense_batch(k, J, D));
  for (auto _ : st) {
    apply_all(applier, W, batches, merged);
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * J * D * pk, peak = sgemm_peak_gflops();
  st.counters["GFLOP/s"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["peak_GFLOP/s"] = peak;
  st.counters["pct_of_peak"] =
      benchmark::Counter(100.0 * flops / 1e9 / peak, benchmark::Counter::kIsIterationInvariantRate);
}
// feature_major: W stored D x J, the update W^T += V^T U (the transposes folded into the GEMM).
BENCHMARK(BM_DenseUpdate)
    ->ArgNames({"J", "D", "PK", "K", "merged", "feature_major"})
    ->Args({4096, 4096, 256, 256, 1, 0})
    ->Args({4096, 4096, 256, 256, 1, 1})
    ->Args({4096, 4096, 256, 32, 0, 0})
    ->Args({4096, 4096, 256, 32, 1, 0})
    ->Args({4096, 4096, 256, 32, 1, 1})
    ->Args({1024, 1024, 256, 32, 0, 0})
    ->Args({1024, 1024, 256, 32, 1, 0})
    ->Args({10, 785, 128, 32, 0, 0})
    ->Args({10, 785, 128, 32, 1, 0})
    ->MinTime(1.0)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_SparseUpdate(benchmark::State& st) {
  const int J = static_cast<int>(st.range(0)), D = static_cast<int>(st.range(1)), pk = static_cast<int>(st.range(2));
  const double density = static_cast<double>(st.range(3)) / 1000.0;
  const int k = static_cast<int>(st.range(4));
  const bool merged = st.range(5) != 0;
  const sfb::Layout layout = layout_arg(st.range(6));
  Matrix W = Matrix::Zero(sfb::stored_rows(layout, J, D), sfb::stored_cols(layout, J, D));
  sfb::runtime::UpdateApplier applier(threads(), layout);
  std::vector<SfBatch> batches;
  double bytes = 0;
  for (int i = 0; i < pk / k; ++i) batches.push_back(sparse_batch(k, J, D, density, 7 + i));
  {
    SfBatch all = sparse_batch(pk, J, D, density, 99);  // same statistics, for the roofline
    bytes = sparse_touched_bytes(all, layout);
  }
  for (auto _ : st) {
    apply_all(applier, W, batches, merged);
    benchmark::ClobberMemory();
  }
  report_roofline(st, bytes);
  st.SetLabel(std::string(sfb::simd_name(sfb::active_simd())));
}
// feature_major 1: W stored D x J, each touched column one contiguous axpy pass (the layout the
// sparse models use); 0: row-major with the tiled sweep (sparse codes of a dense model).
BENCHMARK(BM_SparseUpdate)
    ->ArgNames({"J", "D", "PK", "density_permille", "K", "merged", "feature_major"})
    ->Args({4096, 4096, 256, 10, 256, 1, 1})
    ->Args({4096, 4096, 256, 10, 256, 1, 0})
    ->Args({4096, 4096, 256, 10, 32, 0, 1})
    ->Args({4096, 4096, 256, 10, 32, 1, 1})
    ->Args({4096, 4096, 256, 10, 32, 1, 0})
    ->Args({1024, 65536, 256, 1, 32, 0, 1})
    ->Args({1024, 65536, 256, 1, 32, 1, 1})
    ->Args({1024, 65536, 256, 1, 32, 1, 0})
    ->MinTime(1.0)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The memory ceiling of the feature-major sweep's access pattern, measured the same way: the stored
// rows of W that a clock's batches touch (the same statistics as BM_SparseUpdate) are each read and
// written once (y += 1), without U, the regrouping or the kernel. BM_SparseUpdate feature_major:1
// over this row's time says how much of the sweep is above that floor.
void BM_TouchedRowsStream(benchmark::State& st) {
  const int J = static_cast<int>(st.range(0)), D = static_cast<int>(st.range(1)), pk = static_cast<int>(st.range(2));
  const double density = static_cast<double>(st.range(3)) / 1000.0;
  Matrix W = Matrix::Zero(D, J);
  const SfBatch all = sparse_batch(pk, J, D, density, 99);
  std::vector<char> used(static_cast<size_t>(D), 0);
  for (int32_t c : all.v_index) used[static_cast<size_t>(c)] = 1;
  std::vector<int32_t> cols;
  for (int c = 0; c < D; ++c)
    if (used[static_cast<size_t>(c)]) cols.push_back(c);
  const double bytes = sparse_touched_bytes(all, sfb::Layout::kFeatureMajor);
  for (auto _ : st) {
    for (int32_t c : cols) {
      float* y = W.data() + int64_t{c} * J;
      for (int j = 0; j < J; ++j) y[j] += 1.0f;
    }
    benchmark::ClobberMemory();
  }
  report_roofline(st, bytes);
}
BENCHMARK(BM_TouchedRowsStream)
    ->ArgNames({"J", "D", "PK", "density_permille"})
    ->Args({4096, 4096, 256, 10})
    ->Args({1024, 65536, 256, 1})
    ->MinTime(1.0)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_Serialise(benchmark::State& st) {
  const SfBatch b =
      dense_batch(static_cast<int>(st.range(0)), static_cast<int>(st.range(1)), static_cast<int>(st.range(2)));
  int64_t bytes = 0;
  for (auto _ : st) {
    auto out = sfb::comm::encode_sf_batch(b);
    bytes = static_cast<int64_t>(out.size());
    benchmark::DoNotOptimize(out.data());
  }
  st.SetBytesProcessed(bytes * st.iterations());
  st.counters["stream_GB/s"] = stream_triad_gbs();
}
BENCHMARK(BM_Serialise)->ArgNames({"K", "J", "D"})->Args({32, 10, 785})->Args({64, 4096, 4096})->UseRealTime();

void BM_Deserialise(benchmark::State& st) {
  const SfBatch b =
      dense_batch(static_cast<int>(st.range(0)), static_cast<int>(st.range(1)), static_cast<int>(st.range(2)));
  const auto bytes = sfb::comm::encode_sf_batch(b);
  for (auto _ : st) {
    auto out = sfb::comm::decode_sf_batch(bytes, {-1, b.J, b.D});
    benchmark::DoNotOptimize(out.u.data());
  }
  st.SetBytesProcessed(static_cast<int64_t>(bytes.size()) * st.iterations());
  st.counters["stream_GB/s"] = stream_triad_gbs();
}
BENCHMARK(BM_Deserialise)->ArgNames({"K", "J", "D"})->Args({32, 10, 785})->Args({64, 4096, 4096})->UseRealTime();

// MLR's SF computation for a minibatch (matrix form: softmax over a K x J block); sparse rows
// (density < 1000 permille) read W in the model's layout: row by row row-major, or as the sum of
// each non-zero's stored row feature-major.
void BM_MlrComputeSf(benchmark::State& st) {
  const int K = static_cast<int>(st.range(0)), J = static_cast<int>(st.range(1)), D = static_cast<int>(st.range(2));
  const double density = static_cast<double>(st.range(3)) / 1000.0;
  const sfb::Layout layout = layout_arg(st.range(4));
  sfb::io::Dataset data = sfb::io::make_synthetic({K, D, J, density, 0.0, 1, 0});
  std::vector<int64_t> rows(static_cast<size_t>(K));
  for (int i = 0; i < K; ++i) rows[static_cast<size_t>(i)] = i;
  sfb::api::MiniBatch mb;
  sfb::api::gather(data, rows, mb);
  const Matrix W = sfb::from_row_major(Matrix::Random(J, D) * 0.01f, layout);
  sfb::models::Mlr model(J, D, data.sparse, layout);
  sfb::SfBatchPtr keep;
  sfb::api::BatchSfWriter writer(J, D, [&keep](sfb::SfBatchPtr b) { keep = std::move(b); });
  for (auto _ : st) {
    writer.begin(0, 0, K, -0.1f, data.sparse);
    model.compute_sf(sfb::api::Weights{W, 1.0f, layout}, mb, writer);
    benchmark::DoNotOptimize(keep.get());
  }
  st.counters["samples/s"] = benchmark::Counter(K, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_MlrComputeSf)
    ->ArgNames({"K", "J", "D", "density_permille", "feature_major"})
    ->Args({32, 10, 785, 1000, 0})
    ->Args({64, 4096, 4096, 1000, 0})
    ->Args({64, 4096, 4096, 10, 0})
    ->Args({64, 4096, 4096, 10, 1})
    ->UseRealTime();

// End to end: 4 ranks as threads over the in-process transport, BSP, dense MLR. Also reports the
// steady-state heap allocations per clock and rank: the difference between a run of 2N and one of
// N clocks, divided by N clocks and 4 ranks (start-up allocations cancel).
int64_t run_4_ranks(sfb::Config cfg, int64_t clocks) {
  cfg.stop.max_clocks = clocks;
  auto group = sfb::comm::make_inproc_group(4);
  std::vector<sfb::io::LoadedData> data;
  for (int r = 0; r < 4; ++r) data.push_back(sfb::io::load_data(cfg.data, cfg.job.seed, r, 4, false));
  const int64_t before = g_allocations.load();
  std::vector<std::thread> ts;
  for (int r = 0; r < 4; ++r) {
    ts.emplace_back([&, r] {
      const auto& d = data[static_cast<size_t>(r)];
      auto m = sfb::models::make_model(cfg, d.train, d.total_train, r, 4);
      sfb::runtime::Worker w(cfg, *group[static_cast<size_t>(r)], d.train, nullptr, *m);
      w.run();
    });
  }
  for (auto& t : ts) t.join();
  return g_allocations.load() - before;
}

void BM_EndToEnd4Ranks(benchmark::State& st) {
  sfb::Config cfg;
  cfg.data.format = sfb::DataFormat::kSynthetic;
  cfg.data.features = static_cast<int64_t>(st.range(1)) - 1;
  cfg.data.classes = st.range(0);
  cfg.data.synthetic_samples = 4096;
  cfg.data.synthetic_test_samples = 0;
  cfg.optimizer.minibatch = st.range(2);
  cfg.eval.every = 1000000;
  cfg.runtime.threads = 1;
  cfg.output.log_level = "warn";
  cfg.output.metrics = cfg.output.model = cfg.output.summary = "";
  constexpr int64_t kClocks = 200;
  for (auto _ : st) run_4_ranks(cfg, kClocks);
  st.counters["clocks/s"] =
      benchmark::Counter(static_cast<double>(kClocks), benchmark::Counter::kIsIterationInvariantRate);
  const int64_t a1 = run_4_ranks(cfg, kClocks), a2 = run_4_ranks(cfg, 2 * kClocks);
  st.counters["allocs/clock/rank"] = static_cast<double>(a2 - a1) / kClocks / 4;
}
BENCHMARK(BM_EndToEnd4Ranks)
    ->ArgNames({"J", "D", "K"})
    ->Args({10, 785, 32})
    ->Args({256, 1024, 32})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);

}  // namespace

BENCHMARK_MAIN();
