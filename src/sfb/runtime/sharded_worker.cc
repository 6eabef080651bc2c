// The sharded scheme's engine (sharded_worker.h).
#include "sfb/runtime/sharded_worker.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "sfb/comm/bytes_allgather.h"
#include "sfb/comm/channel.h"
#include "sfb/comm/setup_collectives.h"
#include "sfb/core/bytes.h"
#include "sfb/core/error.h"
#include "sfb/core/files.h"
#include "sfb/core/gemm.h"
#include "sfb/core/hash.h"
#include "sfb/core/timer.h"
#include "sfb/io/checkpoint.h"
#include "sfb/io/sampler.h"
#include "sfb/runtime/model_prox.h"
#include "sfb/runtime/signals.h"
#include "sfb/runtime/stop_rule.h"

namespace sfb::runtime {

RowBlock row_block(int64_t J, int P, int r) {
  const int64_t b = J * r / P, e = J * (r + 1) / P;
  return {b, e - b};
}

std::string sharded_refusal(const Config& cfg, api::Model& model) {
  const std::string who = fmt::format("comm.scheme = \"sharded\" with model \"{}\"{}", model.name(),
                                      cfg.model.plugin.empty() ? "" : " (plugin " + cfg.model.plugin + ")");
  if (cfg.sfb.staleness != 0)
    return fmt::format(
        "{}: sfb.staleness = {}: the sharded scheme is BSP only (a softmax normaliser from another clock is not a "
        "gradient); set sfb.staleness = 0",
        who, cfg.sfb.consistency_name());
  if (!model.row_sharded()) return fmt::format("{}: {}", who, model.why_not_row_sharded());
  if (model.update_rule() != api::UpdateRule::kGradientStep)
    return who + ": its updates are applied as written, not as a gradient step; the sharded scheme takes steps";
  if (model.has_prox())
    return who + ": its prox() acts on the whole W, which no rank holds here (a shrinkage by prox_scale() shards)";
  return "";
}

namespace {

constexpr int32_t kFlagSignal = 1, kFlagTime = 2;

// One rank's samples of one clock on the wire: i32 stop flags, u8 sparse, i64 n, then n int32
// labels and the rows (dense: n x D floats; CSR: n + 1 int32 offsets, then the column indices and
// the values).
Bytes encode_samples(const api::MiniBatch& b, int32_t flags, int64_t D) {
  const int64_t n = b.size();
  ByteWriter w;
  w.put<int32_t>(flags);
  w.put<uint8_t>(b.sparse ? 1 : 0);
  w.put<int64_t>(n);
  w.put_array(b.labels.data(), b.labels.size());
  if (!b.sparse) {
    w.put_array(b.x.data(), static_cast<size_t>(n * D));
    return w.take();
  }
  const auto nnz = static_cast<size_t>(b.x_csr.nonZeros());
  SFB_ENFORCE(b.x_csr.isCompressed(), "sharded samples: CSR rows not compressed");
  w.put_array(b.x_csr.outerIndexPtr(), static_cast<size_t>(n + 1));
  w.put_array(b.x_csr.innerIndexPtr(), nnz);
  w.put_array(b.x_csr.valuePtr(), nnz);
  return w.take();
}

api::MiniBatch decode_sparse(ByteReader& r, int64_t n, int64_t D) {
  std::vector<int32_t> outer(static_cast<size_t>(n + 1));
  r.get_array(outer.data(), outer.size(), "row offsets");
  const int64_t nnz = outer.back();
  if (outer[0] != 0 || nnz < 0 || static_cast<uint64_t>(nnz) * 8 > r.remaining())
    r.fail(fmt::format("{}: {} non-zeros do not fit the message", r.what(), nnz));
  for (int64_t i = 0; i < n; ++i)
    if (outer[static_cast<size_t>(i + 1)] < outer[static_cast<size_t>(i)])
      r.fail(fmt::format("{}: row offsets decrease at row {}", r.what(), i));
  api::MiniBatch b;
  b.sparse = true;
  b.x_csr.resize(n, D);
  b.x_csr.resizeNonZeros(nnz);
  std::copy(outer.begin(), outer.end(), b.x_csr.outerIndexPtr());
  r.get_array(b.x_csr.innerIndexPtr(), static_cast<size_t>(nnz), "column indices");
  r.get_array(b.x_csr.valuePtr(), static_cast<size_t>(nnz), "values");
  for (int64_t e = 0; e < nnz; ++e)
    if (b.x_csr.innerIndexPtr()[e] < 0 || b.x_csr.innerIndexPtr()[e] >= D)
      r.fail(fmt::format("{}: column {} outside 0..{}", r.what(), b.x_csr.innerIndexPtr()[e], D - 1));
  return b;
}

api::MiniBatch decode_samples(const Bytes& bytes, int64_t D, int32_t& flags, const std::string& what) {
  ByteReader r(bytes, what, ByteReader::Source::kMessage);
  flags = r.get<int32_t>("flags");
  const bool sparse = r.get<uint8_t>("sparse") != 0;
  const auto n = r.get<int64_t>("samples");
  if (n < 0 || static_cast<uint64_t>(n) * 4 > r.remaining())
    r.fail(fmt::format("{}: {} samples do not fit the message", what, n));
  std::vector<int32_t> labels(static_cast<size_t>(n));
  r.get_array(labels.data(), labels.size(), "labels");
  api::MiniBatch b;
  if (sparse) {
    b = decode_sparse(r, n, D);
  } else {
    if (static_cast<uint64_t>(n) * static_cast<uint64_t>(D) * 4 != r.remaining())
      r.fail(fmt::format("{}: {} bytes for {} dense rows of {} floats", what, r.remaining(), n, D));
    b.x.resize(n, D);
    r.get_array(b.x.data(), static_cast<size_t>(n * D), "rows");
  }
  r.expect_end();
  b.labels = std::move(labels);
  return b;
}

// The stop flags of an encoded samples message (its first field).
int32_t own_flags(const Bytes& bytes) {
  int32_t f = 0;
  if (bytes.size() >= sizeof f) std::memcpy(&f, bytes.data(), sizeof f);
  return f;
}

// acc <- acc (+) x for `n` samples of statistics `red` (width floats each), the merge every rank
// performs in rank order.
void merge_stats(const std::vector<api::Reduce>& red, int64_t width, float* acc, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i, acc += width, x += width) {
    int64_t o = 0;
    for (api::Reduce r : red) {
      if (r == api::Reduce::kSum) {
        acc[o] += x[o];
        o += 1;
        continue;
      }
      if (r == api::Reduce::kMaxIndex) {
        if (x[o] > acc[o] || (x[o] == acc[o] && api::max_index_of(x[o + 1]) < api::max_index_of(acc[o + 1])))
          acc[o] = x[o], acc[o + 1] = x[o + 1];
      } else if (x[o] != -std::numeric_limits<float>::infinity()) {  // a block without rows adds nothing
        const float m = std::max(acc[o], x[o]);
        acc[o + 1] = acc[o + 1] * std::exp(acc[o] - m) + x[o + 1] * std::exp(x[o] - m);
        acc[o] = m;
      }
      o += 2;
    }
  }
}

// Rows [b, e) of `s`.
api::MiniBatch slice(const api::MiniBatch& s, int64_t b, int64_t e) {
  api::MiniBatch out;
  out.sparse = s.sparse;
  out.labels.assign(s.labels.begin() + b, s.labels.begin() + e);
  if (s.sparse)
    out.x_csr = s.x_csr.middleRows(b, e - b);
  else
    out.x = s.x.middleRows(b, e - b);
  return out;
}

}  // namespace

struct ShardedWorker::State {
  State(const Config& c, comm::Transport& tr, const io::Dataset& tn, const io::Dataset& obj, const io::Dataset* ts,
        api::Model& m, WorkerStart st)
      : cfg(c),
        t(tr),
        train(tn),
        objective_rows(obj),
        test(ts),
        model(m),
        rs(*m.row_sharded()),
        start(std::move(st)),
        P(tr.size()),
        rank(tr.rank()),
        J(m.rows()),
        D(m.cols()),
        K(c.optimizer.minibatch),
        layout(m.layout()),
        blk(row_block(m.rows(), tr.size(), tr.rank())),
        red(rs.statistics()),
        width(api::statistics_width(red)),
        rows_ch(tr, comm::kTagShardRows),
        stats_ch(tr, comm::kTagShardStats),
        w_ch(tr, comm::kTagShardW),
        rows_ag(rows_ch),
        stats_ag(stats_ch),
        w_stash(w_ch),
        rule(c.stop) {}

  const Config& cfg;
  comm::Transport& t;
  const io::Dataset& train;
  const io::Dataset& objective_rows;
  const io::Dataset* test;
  api::Model& model;
  api::RowSharded& rs;
  const WorkerStart start;
  const int P, rank;
  const int64_t J, D, K;
  const Layout layout;
  const RowBlock blk;
  const std::vector<api::Reduce> red;
  const int64_t width;
  comm::TransportChannel rows_ch, stats_ch, w_ch;
  comm::BytesAllgather rows_ag, stats_ag;
  comm::SourceStash w_stash;
  int64_t stats_calls = 0;

  Matrix block;  // rows [blk.row0, + blk.rows) of W, stored in the model's layout, times `scale`
  float scale = 1.0f;
  api::MiniBatch eval_obj, eval_acc;  // the evaluation samples, prepared once
  StopRule rule;
  std::vector<EvalRecord> evals;
  JsonlWriter metrics;  // rank 0
  double continued_s = 0;
  Stopwatch since_start;
  double compute_s = 0, update_s = 0, wait_s = 0;
  int64_t samples_sent = 0, nonzeros_sent = 0;  // to every peer, summed
  // The clock whose samples this rank has sent and not yet gathered (-1: none), and its own.
  struct Pending {
    int64_t clock = -1;
    api::MiniBatch own;
    Bytes bytes;
  } pending;
  comm::PeerCounters at_start;
  std::optional<StopReason> stop_reason;
  std::string stop_detail;
  int64_t clock = 0;
  int64_t checkpoints = 0;  // checkpoints whose rows were gathered (written or not)

  api::Weights weights() const { return {block, scale, layout}; }
  // Evaluation samples a statistics all-gather: their outputs on the block within 16 MiB.
  int64_t eval_chunk() const {
    return std::clamp<int64_t>((int64_t{4} << 20) / std::max<int64_t>(blk.rows, 1), 16, 4096);
  }

  void init_block();
  void load_rows();
  void receive_rows();
  std::vector<float> reduce(std::vector<float> mine, int64_t samples, int64_t extra);
  void apply(const api::MiniBatch& v, const Matrix& u, float alpha, double eta);
  void send_samples(int64_t c, io::EpochSampler& sampler, std::vector<int64_t>& rows);
  void step(int64_t c, io::EpochSampler& sampler, std::vector<int64_t>& rows, std::vector<int32_t>& flags);
  void statistics_of(const std::vector<api::MiniBatch>& sets, std::vector<Matrix>& out, std::vector<float>& reduced);
  std::pair<double, int64_t> eval_sum(const api::MiniBatch& s, bool correct);
  EvalRecord evaluate(int64_t c);
  void record(const EvalRecord& r);
  void maybe_checkpoint(int64_t c, bool final);
  void serve_rows();
  void fetch_rows(int64_t row0, int64_t rows, float* out);
  void file_order(const std::function<void(const RowSource&)>& use);
  bool all_finite();
  std::vector<RankStats> gather_stats(const RankStats& self);
  WorkerResult result();
};

// ---- Start: W's rows from init_block or from a file, routed to their owners -------------------

void ShardedWorker::State::init_block() {
  block = Matrix::Zero(sfb::stored_rows(layout, blk.rows, D), sfb::stored_cols(layout, blk.rows, D));
  if (start.load) {
    load_rows();
    return;
  }
  Rng init_rng = make_rng(cfg.job.seed, 0x1417);  // the Worker's init stream
  rs.init_block(MatrixMap(block.data(), block.rows(), block.cols()), blk.row0, init_rng);
}

// Rank 0 reads the file (start.load) and sends each block of rows to its owner, one message in
// flight per owner (the owner acknowledges it): no rank ever holds more than a block beyond its rows.
void ShardedWorker::State::load_rows() {
  const RowSink mine = [this, own = row_sink(block, layout)](int64_t r0, int64_t n, const float* data) {
    own(r0 - blk.row0, n, data);
  };
  if (rank != 0) {
    receive_rows();
    return;
  }
  start.load([&](int64_t r0, int64_t n, const float* data) {
    for (int q = 0; q < P; ++q) {
      const RowBlock b = row_block(J, P, q);
      const int64_t a = std::max(r0, b.row0), e = std::min(r0 + n, b.row0 + b.rows);
      if (a >= e) continue;
      const float* rows = data + (a - r0) * D;
      if (q == 0) {
        mine(a, e - a, rows);
        continue;
      }
      ByteWriter w;
      w.put<int64_t>(a);
      w.put<int64_t>(e - a);
      w.put_array(rows, static_cast<size_t>((e - a) * D));
      w_ch.send(q, std::make_shared<const Bytes>(w.take()));
      w_stash.next_from(q);  // its acknowledgement
    }
  });
  for (int q = 1; q < P; ++q) w_ch.send(q, std::make_shared<const Bytes>(Bytes(16, std::byte{0xff})));  // done
}

void ShardedWorker::State::receive_rows() {
  const RowSink own = row_sink(block, layout);
  int64_t got = 0;
  for (;;) {
    comm::Message m = w_stash.next_from(0);
    ByteReader r(m.data, fmt::format("rank {}: W's rows from rank 0", rank), ByteReader::Source::kMessage);
    const auto r0 = r.get<int64_t>("first row");
    const auto n = r.get<int64_t>("rows");
    if (r0 == -1 && n == -1) break;
    if (r0 < blk.row0 || n < 1 || r0 + n > blk.row0 + blk.rows || r.remaining() != static_cast<size_t>(n * D) * 4)
      r.fail(fmt::format("{}: rows {}..{} are not this rank's ({}..{})", r.what(), r0, r0 + n - 1, blk.row0,
                         blk.row0 + blk.rows - 1));
    std::vector<float> rows(static_cast<size_t>(n * D));
    r.get_array(rows.data(), rows.size(), "values");
    own(r0 - blk.row0, n, rows.data());
    got += n;
    w_ch.send(0, std::make_shared<const Bytes>(Bytes(1)));
  }
  SFB_CHECK_DATA(got == blk.rows, "rank {}: W's start had {} of this rank's {} rows", rank, got, blk.rows);
}

// ---- One clock --------------------------------------------------------------------------------

// `mine`: this rank's statistics of `samples` samples (width floats each), then `extra` floats to
// sum. Every rank's, merged in rank order: the same bits everywhere.
std::vector<float> ShardedWorker::State::reduce(std::vector<float> mine, int64_t samples, int64_t extra) {
  Stopwatch sw;
  const auto* p = reinterpret_cast<const std::byte*>(mine.data());
  auto all = stats_ag.run(Bytes(p, p + mine.size() * sizeof(float)), stats_calls++);
  wait_s += sw.seconds();
  std::vector<float> acc(mine.size());
  for (int q = 0; q < P; ++q) {
    const Bytes& b = all[static_cast<size_t>(q)];
    if (b.size() != mine.size() * sizeof(float))
      throw CommError(fmt::format("rank {}: rank {} sent {} bytes of statistics, expected {}", rank, q, b.size(),
                                  mine.size() * sizeof(float)));
    const auto* x = reinterpret_cast<const float*>(b.data());
    if (q == 0) {
      std::copy(x, x + mine.size(), acc.begin());
      continue;
    }
    merge_stats(red, width, acc.data(), x, samples);
    for (int64_t e = 0; e < extra; ++e) acc[static_cast<size_t>(samples * width + e)] += x[samples * width + e];
  }
  return acc;
}

// Every set's outputs on the block and the reduced statistics of all their samples, in order.
void ShardedWorker::State::statistics_of(const std::vector<api::MiniBatch>& sets, std::vector<Matrix>& out,
                                         std::vector<float>& reduced) {
  Stopwatch sw;
  int64_t n = 0;
  for (const auto& s : sets) n += s.size();
  std::vector<float> mine(static_cast<size_t>(n * width));
  out.resize(sets.size());
  int64_t at = 0;
  for (size_t p = 0; p < sets.size(); ++p) {
    rs.partial_statistics(weights(), blk.row0, sets[p], out[p], mine.data() + at * width);
    at += sets[p].size();
  }
  compute_s += sw.seconds();
  reduced = reduce(std::move(mine), n, 0);
}

// The block += alpha u^T v (W = scale * stored: the stored rows take alpha / scale), then the
// model's shrinkage for step eta.
void ShardedWorker::State::apply(const api::MiniBatch& v, const Matrix& u, float alpha, double eta) {
  const float a = alpha / scale;
  const int64_t n = v.size(), rows = blk.rows;
  if (n > 0 && rows > 0 && !v.sparse) {
    gemm_uv(layout, rows, D, n, a, u.data(), v.x.data(), 1.0f, block.data(), 0, block.rows());
  } else if (n > 0 && rows > 0) {
    const auto* outer = v.x_csr.outerIndexPtr();
    const auto* inner = v.x_csr.innerIndexPtr();
    const auto* value = v.x_csr.valuePtr();
    if (layout == Layout::kFeatureMajor) {  // a non-zero v_d adds to the block's stored row d
      for (int64_t i = 0; i < n; ++i)
        for (auto e = outer[i]; e < outer[i + 1]; ++e) block.row(inner[e]) += (a * value[e]) * u.row(i);
    } else {  // row by row of the block: each stays in cache while the samples' non-zeros pass
      for (int64_t j = 0; j < rows; ++j) {
        float* w = block.data() + j * D;
        for (int64_t i = 0; i < n; ++i) {
          const float c = a * u(i, j);
          for (auto e = outer[i]; e < outer[i + 1]; ++e) w[inner[e]] += c * value[e];
        }
      }
    }
  }
  scale *= static_cast<float>(model.prox_scale(eta));
  if (scale < 1e-3f || scale > 1e3f) {
    block *= scale;
    scale = 1.0f;
  }
}

// Samples clock c's minibatch and sends its samples to every other rank (with this rank's stop
// flags): called for clock c + 1 before clock c computes, so the rows travel while it does.
void ShardedWorker::State::send_samples(int64_t c, io::EpochSampler& sampler, std::vector<int64_t>& rows) {
  Stopwatch sw;
  const int sig = stop_signal();
  int32_t flags = sig != 0 ? (sig << 8) | kFlagSignal : 0;
  if (rank == 0 && cfg.stop.max_seconds > 0 && since_start.seconds() > cfg.stop.max_seconds) flags |= kFlagTime;
  api::MiniBatch batch;
  sampler.next(K, rows);
  api::gather(train, rows, batch);
  batch.clock = c;
  api::MiniBatch own = rs.shard_samples(batch);
  SFB_CHECK((own.sparse ? own.x_csr.cols() : own.x.cols()) == D &&
                static_cast<int64_t>(own.labels.size()) == (own.sparse ? own.x_csr.rows() : own.x.rows()),
            "model \"{}\": shard_samples() at clock {} gave {} labels and rows of {} columns, W has {} columns",
            model.name(), c, own.labels.size(), own.sparse ? own.x_csr.cols() : own.x.cols(), D);
  Bytes bytes = encode_samples(own, flags, D);
  rows_ag.start(bytes, c);
  samples_sent += own.size() * (P - 1);
  if (own.sparse) nonzeros_sent += own.x_csr.nonZeros() * (P - 1);
  pending = {c, std::move(own), std::move(bytes)};
  compute_s += sw.seconds();
}

// Clock c: the samples every rank sent for it (clock c + 1's go out meanwhile), their statistics,
// the block's update. `flags` gets every rank's stop flags of clock c.
void ShardedWorker::State::step(int64_t c, io::EpochSampler& sampler, std::vector<int64_t>& rows,
                                std::vector<int32_t>& flags) {
  if (pending.clock != c) send_samples(c, sampler, rows);
  Stopwatch sw;
  auto all = rows_ag.finish(std::move(pending.bytes), c);
  wait_s += sw.seconds();
  api::MiniBatch own = std::move(pending.own);
  pending.clock = -1;
  if (c + 1 < cfg.stop.max_clocks) send_samples(c + 1, sampler, rows);
  std::vector<api::MiniBatch> sets(static_cast<size_t>(P));
  flags.assign(static_cast<size_t>(P), 0);
  for (int q = 0; q < P; ++q) {
    const std::string what = fmt::format("rank {}'s samples of clock {}", q, c);
    sets[static_cast<size_t>(q)] =
        q == rank ? std::move(own)
                  : decode_samples(all[static_cast<size_t>(q)], D, flags[static_cast<size_t>(q)], what);
  }
  flags[static_cast<size_t>(rank)] = own_flags(all[static_cast<size_t>(rank)]);
  std::vector<Matrix> out;
  std::vector<float> reduced;
  statistics_of(sets, out, reduced);
  sw = Stopwatch();
  const float eta = clock_step(cfg, c);  // as the SFB engine's compute and update threads take it
  int64_t at = 0;
  for (int q = 0; q < P; ++q) {
    const auto& s = sets[static_cast<size_t>(q)];
    rs.block_factors(blk.row0, s, reduced.data() + at * width, out[static_cast<size_t>(q)]);
    apply(s, out[static_cast<size_t>(q)], -eta / static_cast<float>(K), eta);
    at += s.size();
  }
  update_s += sw.seconds();
}

// ---- Evaluation -------------------------------------------------------------------------------

// The sum of the samples' losses (or of their 1 / 0 correctness, -1 when the model has none), and
// how many there were, in chunks whose outputs stay within 16 MiB.
std::pair<double, int64_t> ShardedWorker::State::eval_sum(const api::MiniBatch& s, bool correct) {
  const int64_t chunk = eval_chunk();
  double sum = 0;
  for (int64_t b = 0; b < s.size(); b += chunk) {
    std::vector<api::MiniBatch> one{slice(s, b, std::min(s.size(), b + chunk))};
    std::vector<Matrix> out;
    std::vector<float> reduced;
    statistics_of(one, out, reduced);
    for (int64_t i = 0; i < one[0].size(); ++i) {
      const float* st = reduced.data() + i * width;
      const int32_t y = one[0].labels[static_cast<size_t>(i)];
      if (!correct) {
        sum += rs.sample_loss(st, y);
      } else {
        const int ok = rs.sample_correct(st, y);
        if (ok < 0) return {-1.0, 0};
        sum += ok;
      }
    }
  }
  return {sum, s.size()};
}

EvalRecord ShardedWorker::State::evaluate(int64_t c) {
  EvalRecord r;
  r.clock = c;
  const double s = since_start.seconds();
  r.seconds = continued_s + s;
  r.attempt_seconds = continued_s > 0 ? s : -1;
  r.samples_per_s = s > 0 ? static_cast<double>(c - start.clock) * P * K / s : 0.0;
  const auto tc = t.total_counters();
  r.bytes_sent = tc.bytes_sent - at_start.bytes_sent;
  r.bytes_received = tc.bytes_received - at_start.bytes_received;
  r.compute_s = compute_s, r.update_s = update_s, r.wait_s = wait_s;
  const auto [loss, n] = eval_sum(eval_obj, false);
  std::vector<float> reg{static_cast<float>(rs.block_regulariser(weights()))};
  const float all_reg = reduce(reg, 0, 1)[0];
  r.objective = (n > 0 ? loss / static_cast<double>(n) : 0.0) + all_reg;
  r.accuracy = -1.0;
  if (eval_acc.size() > 0) {
    const auto [right, m] = eval_sum(eval_acc, true);
    r.accuracy = m > 0 ? right / static_cast<double>(m) : -1.0;
  }
  return r;
}

void ShardedWorker::State::record(const EvalRecord& r) {
  evals.push_back(r);
  if (!stop_reason) stop_reason = rule.decide(evals);
  if (rank != 0) return;
  if (metrics.is_open()) metrics.write_or_stop(to_json(r));
  spdlog::info("clock {}: objective {:.6g}{} ({:.1f} s)", r.clock, r.objective,
               r.accuracy >= 0 ? fmt::format(", test accuracy {:.2f}%", 100 * r.accuracy) : std::string(), r.seconds);
}

// Checkpoints at checkpoint.every and at the end of a stopped run, as the monitor writes them: rank
// 0 streams W from the owners into the file (a temporary, renamed: a failure keeps the previous
// one, and training goes on); never with weights that diverged or are not finite.
void ShardedWorker::State::maybe_checkpoint(int64_t c, bool final) {
  if (cfg.checkpoint.path.empty()) return;
  const bool periodic = cfg.checkpoint.every > 0 && c % cfg.checkpoint.every == 0;
  const bool due = final ? stop_reason && !periodic : periodic;
  if (!due || c == start.clock || stop_reason == StopReason::kDiverged || !all_finite()) return;
  const std::string path = cfg.output.path(cfg.checkpoint.path);
  const io::CheckpointInfo info{cfg.model_fingerprint(), cfg.job.seed, c, P, J, D};
  ++checkpoints;
  try {
    file_order([&](const RowSource& src) { io::write_checkpoint(path, info, src); });
    if (rank == 0) spdlog::info("checkpoint at clock {} written to {}", c, path);
  } catch (const Error& e) {
    if (rank != 0) throw;
    spdlog::error("checkpoint at clock {} not written: {}; training continues", c, e.what());
  }
}

bool ShardedWorker::State::all_finite() {
  int64_t all = 1;
  for (int64_t v : comm::allgather_i64(t, block.allFinite() ? 1 : 0)) all &= v;
  return all == 1;
}

void ShardedWorker::State::file_order(const std::function<void(const RowSource&)>& use) {
  if (rank != 0) {
    serve_rows();
    return;
  }
  const auto done = [this] {
    const auto msg = std::make_shared<const Bytes>(Bytes(16, std::byte{0xff}));  // rows -1 from -1
    for (int q = 1; q < P; ++q) w_ch.send(q, msg);
  };
  try {
    use(RowSource{J, D, [this](int64_t r0, int64_t n, float* out) { fetch_rows(r0, n, out); }});
  } catch (...) {
    done();
    throw;
  }
  done();
}

// ---- W in file order: rank 0 asks, the owners answer ----------------------------------------

void ShardedWorker::State::fetch_rows(int64_t row0, int64_t rows, float* out) {
  for (int q = 0; q < P; ++q) {
    const RowBlock b = row_block(J, P, q);
    const int64_t a = std::max(row0, b.row0), e = std::min(row0 + rows, b.row0 + b.rows);
    if (a >= e) continue;
    float* dst = out + (a - row0) * D;
    if (q == rank) {
      row_source(block, layout, scale).read(a - blk.row0, e - a, dst);
      continue;
    }
    ByteWriter w;
    w.put<int64_t>(a);
    w.put<int64_t>(e - a);
    w_ch.send(q, std::make_shared<const Bytes>(w.take()));
    const comm::Message m = w_stash.next_from(q);
    if (m.data.size() != static_cast<size_t>((e - a) * D) * sizeof(float))
      throw CommError(fmt::format("rank 0: rank {} answered rows {}..{} with {} bytes", q, a, e - 1, m.data.size()));
    std::copy_n(reinterpret_cast<const float*>(m.data.data()), (e - a) * D, dst);
  }
}

void ShardedWorker::State::serve_rows() {
  const RowSource mine = row_source(block, layout, scale);
  for (;;) {
    comm::Message m = w_stash.next_from(0);
    ByteReader r(m.data, fmt::format("rank {}: a request for W's rows", rank), ByteReader::Source::kMessage);
    const auto r0 = r.get<int64_t>("first row");
    const auto n = r.get<int64_t>("rows");
    if (r0 == -1 && n == -1) return;
    if (r0 < blk.row0 || n < 1 || r0 + n > blk.row0 + blk.rows)
      r.fail(fmt::format("{}: rows {}..{} are not this rank's", r.what(), r0, r0 + n - 1));
    auto reply = std::make_shared<Bytes>(static_cast<size_t>(n * D) * sizeof(float));
    mine.read(r0 - blk.row0, n, reinterpret_cast<float*>(reply->data()));
    w_ch.send(0, std::move(reply));
  }
}

// ---- The worker ---------------------------------------------------------------------------------

ShardedWorker::ShardedWorker(const Config& cfg, comm::Transport& t, const io::Dataset& train,
                             const io::Dataset& objective_rows, const io::Dataset* test, api::Model& model,
                             WorkerStart start)
    : s_(std::make_unique<State>(cfg, t, train, objective_rows, test, model, std::move(start))) {
  const std::string refusal = sharded_refusal(cfg, model);
  SFB_CHECK(refusal.empty(), "{}", refusal);
  SFB_CHECK(s_->J >= s_->P, "comm.scheme = \"sharded\": W has {} rows for {} ranks; every rank must own one", s_->J,
            s_->P);
  s_->init_block();
  s_->eval_obj = s_->rs.eval_samples(objective_rows, cfg.eval.train_sample, api::EvalSet::kObjective);
  if (test && test->n > 0) s_->eval_acc = s_->rs.eval_samples(*test, 0, api::EvalSet::kAccuracy);
}

ShardedWorker::~ShardedWorker() = default;

RowBlock ShardedWorker::block() const { return s_->blk; }
int64_t ShardedWorker::stats_width() const { return s_->width; }
int64_t ShardedWorker::eval_samples() const { return s_->eval_obj.size() + s_->eval_acc.size(); }
int64_t ShardedWorker::checkpoints() const { return s_->checkpoints; }
int64_t ShardedWorker::eval_chunks() const {
  const int64_t c = s_->eval_chunk();
  return (s_->eval_obj.size() + c - 1) / c + (s_->eval_acc.size() + c - 1) / c;
}

void ShardedWorker::file_order(const std::function<void(const RowSource&)>& use) { s_->file_order(use); }

bool ShardedWorker::all_finite() { return s_->all_finite(); }

double ShardedWorker::objective(const io::Dataset& data, int64_t limit) {
  auto& s = *s_;
  const auto [loss, n] = s.eval_sum(s.rs.eval_samples(data, limit, api::EvalSet::kObjective), false);
  const float reg = s.reduce({static_cast<float>(s.rs.block_regulariser(s.weights()))}, 0, 1)[0];
  return (n > 0 ? loss / static_cast<double>(n) : 0.0) + reg;
}

double ShardedWorker::accuracy(const io::Dataset& data) {
  const auto [right, m] = s_->eval_sum(s_->rs.eval_samples(data, 0, api::EvalSet::kAccuracy), true);
  return m > 0 ? right / static_cast<double>(m) : -1.0;
}

// Every rank's statistics, in rank order, on every rank (one all-gather a word).
std::vector<RankStats> ShardedWorker::State::gather_stats(const RankStats& self) {
  const auto words = pack_stats(self);
  std::vector<std::vector<int64_t>> per_rank(static_cast<size_t>(P), std::vector<int64_t>(words.size()));
  for (size_t w = 0; w < words.size(); ++w) {
    const auto all = comm::allgather_i64(t, words[w]);
    for (int q = 0; q < P; ++q) per_rank[static_cast<size_t>(q)][w] = all[static_cast<size_t>(q)];
  }
  std::vector<RankStats> out;
  for (int q = 0; q < P; ++q) out.push_back(unpack_stats(q, per_rank[static_cast<size_t>(q)]));
  return out;
}

WorkerResult ShardedWorker::State::result() {
  WorkerResult r;
  r.self.rank = rank;
  r.self.clocks = clock;
  const auto tc = t.total_counters();
  r.self.bytes_sent = tc.bytes_sent - at_start.bytes_sent;
  r.self.bytes_received = tc.bytes_received - at_start.bytes_received;
  r.self.compute_s = compute_s, r.self.update_s = update_s, r.self.wait_s = wait_s;
  r.self.pairs_applied = (clock - start.clock) * P * K;  // samples whose update reached this block
  r.self.pairs_sent = samples_sent;
  r.self.v_nonzeros_sent = nonzeros_sent;
  r.self.checksum = matrix_checksum(row_source(block, layout, scale));  // this rank's rows only
  r.all = gather_stats(r.self);
  r.evals = evals;
  r.stop_reason = stop_reason.value_or(StopReason::kMaxClocks);
  r.stop_detail = stop_detail;
  r.start_clock = start.clock;
  r.final_clock = clock;
  r.seconds = since_start.seconds();
  return r;
}

namespace {

// The reason a clock's flags stop the run, the first rank's (in rank order) that raised one, and
// its detail.
std::optional<StopReason> flag_reason(const std::vector<int32_t>& flags, std::string* detail) {
  for (size_t r = 0; r < flags.size(); ++r) {
    if (flags[r] & kFlagSignal) {
      *detail = fmt::format("rank {} received signal {}", r, flags[r] >> 8);
      return StopReason::kSignal;
    }
    if (flags[r] & kFlagTime) return StopReason::kMaxSeconds;
  }
  return std::nullopt;
}

}  // namespace

WorkerResult ShardedWorker::run() {
  auto& s = *s_;
  if (s.rank == 0 && !s.cfg.output.path(s.cfg.output.metrics).empty() && !s.cfg.output.metrics.empty()) {
    const std::string path = s.cfg.output.path(s.cfg.output.metrics);
    create_parent_directories(path);
    if (s.start.clock > 0) {
      s.metrics.open_continuing(path, s.start.clock);
      s.continued_s = s.metrics.continued_seconds();
    } else {
      s.metrics.open(path);
    }
  }
  s.at_start = s.t.total_counters();
  s.since_start = Stopwatch();
  const int64_t n = s.start.train_rows > 0 ? std::min(s.start.train_rows, s.train.n) : s.train.n;
  io::EpochSampler sampler(n, s.cfg.job.seed, static_cast<uint64_t>(s.rank));
  sampler.skip(s.start.clock * s.K);  // the minibatches are a function of (seed, rank, clock)
  std::vector<int64_t> rows;
  s.clock = s.start.clock;
  int64_t evaluated = -1;
  if (s.start.evaluate_ends) {
    s.record(s.evaluate(s.clock));
    evaluated = s.clock;
  }
  while (s.clock < s.cfg.stop.max_clocks && !s.stop_reason) {
    std::vector<int32_t> flags;
    s.step(s.clock, sampler, rows, flags);
    ++s.clock;
    if (!s.stop_reason) s.stop_reason = flag_reason(flags, &s.stop_detail);
    const bool last = s.clock == s.cfg.stop.max_clocks || s.stop_reason.has_value();
    if (s.clock % s.cfg.eval.every == 0 || (last && s.start.evaluate_ends)) {
      s.record(s.evaluate(s.clock));
      evaluated = s.clock;
    }
    s.maybe_checkpoint(s.clock, false);
  }
  if (s.start.evaluate_ends && evaluated != s.clock) s.record(s.evaluate(s.clock));
  s.maybe_checkpoint(s.clock, true);
  return s.result();
}

}  // namespace sfb::runtime
