// The worker's SF-compute thread (compute_thread.h).
#include "sfb/runtime/compute_thread.h"

#include <fmt/format.h>

#include "sfb/api/batch_sf_writer.h"
#include "sfb/api/minibatch.h"
#include "sfb/core/error.h"
#include "sfb/io/sampler.h"

namespace sfb::runtime {

void ComputeThread::run() {
  io::EpochSampler sampler(s_.train_rows, s_.cfg.job.seed, static_cast<uint64_t>(s_.rank));
  // The minibatches are a function of (seed, rank, clock): a resumed run draws what an
  // uninterrupted one would have drawn from here on.
  sampler.skip(s_.start_clock * s_.K);
  api::MiniBatch batch;
  std::vector<int64_t> rows;
  // commit() runs inside compute_sf, under the shared lock on W: the batch is queued only after
  // the lock is released, or a full in-queue would block us while the update thread waits for W.
  SfBatchPtr committed;
  api::BatchSfWriter writer(s_.J, s_.D, [&committed](SfBatchPtr b) { committed = std::move(b); });
  const bool gradient = s_.model.update_rule() == api::UpdateRule::kGradientStep;
  const bool sparse_v = s_.model.sparse_v();
  double waited_s = 0;
  const auto allowed = [&](int64_t c) {
    const bool go = s_.gate->wait_for_clock(c, s_.cfg.runtime.peer_timeout_s, &waited_s);
    s_.wait_ns = to_ns(waited_s);
    return go;
  };
  for (int64_t c = s_.start_clock; allowed(c); ++c) {
    if (s_.hooks.on_clock_start) s_.hooks.on_clock_start(c);
    Stopwatch sw;
    sampler.next(s_.K, rows);
    api::gather(s_.train, rows, batch);
    batch.clock = c;
    writer.begin(s_.rank, c, s_.K, gradient ? -s_.step(c) / static_cast<float>(s_.K) : 1.0f, sparse_v);
    try {
      const auto w = s_.weights.read();
      s_.model.compute_sf(w.weights(), batch, writer);
    } catch (const InvalidArgument& e) {
      // A contract error of the writer (write_u / write_v / commit) names the plugin and the call.
      throw InvalidArgument(fmt::format("model \"{}\"{}: compute_sf() at clock {}: {}", s_.model.name(),
                                        s_.cfg.model.plugin.empty() ? "" : " (plugin " + s_.cfg.model.plugin + ")", c,
                                        e.what()));
    }
    SFB_CHECK(writer.committed() && committed, "model \"{}\" returned from compute_sf without commit() at clock {}",
              s_.model.name(), c);
    s_.gate->own_committed();
    // SFB applies its own batch like everyone's; a baseline gets it back inside the exchanged update.
    if (!s_.exchange) s_.in_q.push({committed, nullptr});
    s_.out_q.push(std::move(committed));
    s_.t.wake();  // the communication thread sends it
    s_.compute_ns += to_ns(sw.seconds());
    if (s_.hooks.on_clock_committed) s_.hooks.on_clock_committed(c);
  }
  s_.in_q.push({});
  s_.t.wake();  // compute is done: the communication thread may report it
}

}  // namespace sfb::runtime
