// The worker's communication thread: sends this rank's batches (or hands them to a baseline's
// exchange), receives peers' batches into the in-queue, feeds control messages and local stop
// reasons to the stop protocol (stop_protocol.h), and reports a peer that stays silent.
#include <algorithm>
#include <cstring>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "sfb/comm/sf_codec.h"
#include "sfb/core/error.h"
#include "sfb/runtime/control_codec.h"
#include "sfb/runtime/signals.h"
#include "sfb/runtime/worker_state.h"

namespace sfb::runtime {

void Worker::State::start_exchange() {
  ExchangeHost host;
  host.transport = &t;
  host.workers = P;
  host.J = J;
  host.D = D;
  host.layout = weights.layout();
  host.start_clock = start_clock;
  // The update thread has not started to write it (it waits for batches).
  host.initial_W = &weights.stored_unlocked();
  host.deliver = [this](DenseUpdatePtr item) { in_q.push({nullptr, std::move(item)}); };
  host.fail = [this](std::exception_ptr e) { threads.fail(e); };
  exchange->start(host);
}

namespace {

// An empty batch of b's sender and clock: under a rotating topology it tells a peer that is not
// among this clock's receivers that the clock passed (clock accounting, staleness, BSP order).
SfBatch clock_marker(const SfBatch& b) {
  SfBatch m;
  m.sender = b.sender;
  m.clock = b.clock;
  m.J = b.J;
  m.D = b.D;
  m.sparse_v = b.sparse_v;
  if (m.sparse_v) m.v_row_ptr.assign(1, 0);
  m.u.resize(0, b.J);
  if (!m.sparse_v) m.v.resize(0, b.D);
  return m;
}

}  // namespace

// Own batches: a baseline's exchange takes them; SFB serialises each once and sends the same
// buffer to every out-neighbour.
bool Worker::State::send_own_batches() {
  bool progress = false;
  SfBatchPtr b;
  while (out_q.try_pop(b)) {
    progress = true;
    if (exchange) {
      exchange->send_own(b);
      continue;
    }
    auto buf = std::make_shared<const comm::Bytes>(comm::encode_sf_batch(*b));
    std::shared_ptr<const comm::Bytes> marker;  // rotating topology: the clock, without factors
    for (int q : topo.out[static_cast<size_t>(rank)]) {
      if (!topo.sends_data(rank, q, b->clock)) {
        if (!marker) marker = std::make_shared<const comm::Bytes>(comm::encode_sf_batch(clock_marker(*b)));
        t.send_shared(q, comm::kTagSf, marker);
        continue;
      }
      t.send_shared(q, comm::kTagSf, buf);
      pairs_sent_to[static_cast<size_t>(q)] += b->count;
      v_nonzeros_sent += static_cast<int64_t>(b->v_index.size());
    }
  }
  return progress;
}

void Worker::State::receive_sf(comm::Message&& m) {
  const auto& in = topo.in[static_cast<size_t>(rank)];
  if (exchange || std::find(in.begin(), in.end(), m.src) == in.end())
    throw CommError(fmt::format("rank {}: SF batch from rank {}, which is not an in-neighbour", rank, m.src));
  auto batch = std::make_shared<const SfBatch>(comm::decode_sf_batch(m.data, {m.src, J, D}));
  pairs_received += batch->count;
  gate->received(m.src, batch->clock);
  in_q.push({std::move(batch), nullptr});
}

// Everything that has arrived: SF batches, the exchange's messages, control messages.
bool Worker::State::receive_messages() {
  bool progress = false;
  while (auto m = t.try_recv()) {
    progress = true;
    if (exchange && exchange->handles(m->tag)) {
      exchange->on_message(std::move(*m));
    } else if (m->tag == comm::kTagSf) {
      receive_sf(std::move(*m));
    } else if (m->tag == comm::kTagReconcile && reconcile_ch) {
      reconcile_ch->push(std::move(*m));
    } else if (m->tag == comm::kTagControl) {
      auto c = decode_control(m->data, m->src);
      if (c.type != ControlType::kDrift) {
        stop->handle(c, m->src);
        continue;
      }
      std::vector<double> sketch(c.payload.size());
      std::memcpy(sketch.data(), c.payload.data(), sketch.size() * sizeof(double));
      on_drift_sketch(c.value, m->src, std::move(sketch));
    } else {
      throw CommError(fmt::format("rank {}: message with unexpected tag {} from rank {}", rank, m->tag, m->src));
    }
  }
  return progress;
}

// The update thread's sketches: rank 0 collects its own, the others send theirs to rank 0.
bool Worker::State::send_drift_sketches() {
  std::vector<std::pair<int64_t, std::vector<double>>> out;
  {
    std::lock_guard lock(drift_mu);
    out.swap(drift_out);
  }
  for (auto& [clock, s] : out) {
    if (rank == 0) {
      on_drift_sketch(clock, 0, std::move(s));
      continue;
    }
    std::vector<int64_t> words(s.size());
    std::memcpy(words.data(), s.data(), s.size() * sizeof(double));
    t.send(0, comm::kTagControl, encode_control({ControlType::kDrift, rank, clock, std::move(words)}));
  }
  return !out.empty();
}

void Worker::State::on_drift_sketch(int64_t clock, int sender, std::vector<double> sketch) {
  if (!drift)
    throw CommError(
        fmt::format("rank {}: replica-drift sketch from rank {}, but only rank 0 collects them", rank, sender));
  if (const auto d = drift->add(clock, sender, std::move(sketch)); d && monitor) monitor->set_drift(clock, *d);
}

// Reasons to stop early: a signal on this rank; on rank 0 the monitor's decision or the time limit.
void Worker::State::check_stop_reasons() {
  if (stop->stop_asked() || (rank != 0 && stop->done_sent())) return;
  if (const int sig = stop_signal(); sig != 0) {
    stop->request_stop(fmt::format("signal {}", sig), sig);
  } else if (rank == 0) {
    std::string reason = monitor ? monitor->stop_reason() : std::string();
    if (reason.empty() && cfg.stop.max_seconds > 0 && since_start.seconds() > cfg.stop.max_seconds)
      reason = "max_seconds";
    if (!reason.empty()) stop->request_stop(reason);
  }
}

// Done locally (everything computed and applied, every own batch sent): DONE to rank 0.
bool Worker::State::report_if_done() {
  if (stop->done_sent() || !gate->done() || !out_q.empty()) return false;
  stop->local_done(collect_stats());
  return true;
}

// Waiting on peers for the end of the job or a stop reply: give up after peer_timeout_s.
void Worker::State::check_peer_timeout(bool progress, Stopwatch& last_progress) const {
  if (progress) {
    last_progress.reset();
  } else if (stop->waiting_on_peers() && last_progress.seconds() > cfg.runtime.peer_timeout_s) {
    throw CommError(fmt::format("rank {}: no {} for {} s (runtime.peer_timeout_s)", rank, stop->waiting_for(),
                                cfg.runtime.peer_timeout_s));
  }
}

void Worker::State::comm_loop() {
  StopProtocolIo io;
  io.send = [this](int dst, ControlType type, int64_t value, std::vector<int64_t> payload) {
    t.send(dst, comm::kTagControl, encode_control({type, rank, value, std::move(payload)}));
  };
  io.pause = [this] { return gate->pause(); };
  io.resume = [this](int64_t at) { gate->resume(at); };
  stop = std::make_unique<StopProtocol>(rank, P, cfg.stop.max_clocks, std::move(io));
  if (exchange) start_exchange();
  Stopwatch last_progress;
  Backoff backoff;
  while (!aborted()) {
    bool progress = send_own_batches();
    progress = send_drift_sketches() || progress;
    progress = receive_messages() || progress;
    check_stop_reasons();
    progress = report_if_done() || progress;
    if (stop->try_finish()) break;
    check_peer_timeout(progress, last_progress);
    if (progress)
      backoff.reset();
    else
      backoff.idle();
  }
  // After a failure nothing more is owed to the peers (the job is being aborted), and a flush
  // could wait on a peer that is stopped: only a finished job flushes, within the peer timeout.
  if (aborted()) return;
  if (exchange) exchange->finish();
  t.flush();
}

}  // namespace sfb::runtime
