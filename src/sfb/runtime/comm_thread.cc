// The worker's communication thread: sends this rank's batches (or hands them to a baseline's
// exchange), receives peers' batches into the in-queue, feeds control messages and local stop
// reasons to the stop protocol (stop_protocol.h), and reports a peer that stays silent.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "sfb/comm/sf_codec.h"
#include "sfb/core/error.h"
#include "sfb/core/timer.h"
#include "sfb/runtime/comm_thread.h"
#include "sfb/runtime/control_codec.h"
#include "sfb/runtime/signals.h"

namespace sfb::runtime {

CommThread::CommThread(WorkerState& s) : s_(s) {
  pairs_sent_to_.assign(static_cast<size_t>(s.P), 0);
  if (s.rank == 0) drift_ = std::make_unique<DriftCollector>(s.P);
}

void CommThread::start_exchange() {
  ExchangeHost host;
  host.transport = &s_.t;
  host.workers = s_.P;
  host.J = s_.J;
  host.D = s_.D;
  host.layout = s_.weights.layout();
  host.start_clock = s_.start_clock;
  // The update thread has not started to write it (it waits for batches).
  host.initial_W = &s_.weights.stored_unlocked();
  host.deliver = [this](DenseUpdatePtr item) { s_.in_q.push({nullptr, std::move(item)}); };
  host.fail = [this](std::exception_ptr e) { s_.threads.fail(e); };
  s_.exchange->start(host);
}

namespace {

// The longest an idle communication thread blocks on the network: what it waits on besides
// messages (own batches, drift sketches, the end of compute and update) wakes it through the
// transport (Transport::wake), so this bounds only what nothing wakes it for: a signal, the time
// limit, rank 0's monitor deciding to stop, the peer timeout. Polling instead (a sleep of up to
// 200 us and a read of every socket per round) took about half of a 1/8-core host's budget while
// idle: measured with the sys time of FMS's ranks on budgeted netns hosts (docs/compare-log.md).
constexpr auto kIdleWait = std::chrono::milliseconds(5);

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
bool CommThread::send_own_batches() {
  bool progress = false;
  SfBatchPtr b;
  while (s_.out_q.try_pop(b)) {
    progress = true;
    if (s_.exchange) {
      s_.exchange->send_own(b);
      continue;
    }
    auto buf = std::make_shared<const comm::Bytes>(comm::encode_sf_batch(*b));
    std::shared_ptr<const comm::Bytes> marker;  // rotating topology: the clock, without factors
    for (int q : s_.topo.out[static_cast<size_t>(s_.rank)]) {
      if (!s_.topo.sends_data(s_.rank, q, b->clock)) {
        if (!marker) marker = std::make_shared<const comm::Bytes>(comm::encode_sf_batch(clock_marker(*b)));
        s_.t.send_shared(q, comm::kTagSf, marker);
        continue;
      }
      s_.t.send_shared(q, comm::kTagSf, buf);
      pairs_sent_to_[static_cast<size_t>(q)] += b->count;
      v_nonzeros_sent_ += static_cast<int64_t>(b->v_index.size());
    }
  }
  return progress;
}

void CommThread::receive_sf(comm::Message&& m) {
  const auto& in = s_.topo.in[static_cast<size_t>(s_.rank)];
  if (s_.exchange || std::find(in.begin(), in.end(), m.src) == in.end())
    throw CommError(fmt::format("rank {}: SF batch from rank {}, which is not an in-neighbour", s_.rank, m.src));
  auto batch = std::make_shared<const SfBatch>(comm::decode_sf_batch(m.data, {m.src, s_.J, s_.D}));
  pairs_received_ += batch->count;
  s_.gate->received(m.src, batch->clock);
  s_.in_q.push({std::move(batch), nullptr});
}

// Everything that has arrived: SF batches, the exchange's messages, control messages.
bool CommThread::receive_messages() {
  bool progress = false;
  while (auto m = s_.t.try_recv()) {
    progress = true;
    if (s_.exchange && s_.exchange->handles(m->tag)) {
      s_.exchange->on_message(std::move(*m));
    } else if (m->tag == comm::kTagSf) {
      receive_sf(std::move(*m));
    } else if (m->tag == comm::kTagReconcile && s_.reconcile_ch) {
      s_.reconcile_ch->push(std::move(*m));
    } else if (m->tag == comm::kTagControl) {
      auto c = decode_control(m->data, m->src);
      if (c.type != ControlType::kDrift) {
        stop_->handle(c, m->src);
        continue;
      }
      std::vector<double> sketch(c.payload.size());
      std::memcpy(sketch.data(), c.payload.data(), sketch.size() * sizeof(double));
      on_drift_sketch(c.value, m->src, std::move(sketch));
    } else {
      throw CommError(fmt::format("rank {}: message with unexpected tag {} from rank {}", s_.rank, m->tag, m->src));
    }
  }
  return progress;
}

// The update thread's sketches: rank 0 collects its own, the others send theirs to rank 0.
bool CommThread::send_drift_sketches() {
  std::vector<std::pair<int64_t, std::vector<double>>> out;
  {
    std::lock_guard lock(s_.drift_mu);
    out.swap(s_.drift_out);
  }
  for (auto& [clock, s] : out) {
    if (s_.rank == 0) {
      on_drift_sketch(clock, 0, std::move(s));
      continue;
    }
    std::vector<int64_t> words(s.size());
    std::memcpy(words.data(), s.data(), s.size() * sizeof(double));
    s_.t.send(0, comm::kTagControl, encode_control({ControlType::kDrift, s_.rank, clock, std::move(words)}));
  }
  return !out.empty();
}

void CommThread::on_drift_sketch(int64_t clock, int sender, std::vector<double> sketch) {
  if (!drift_)
    throw CommError(
        fmt::format("rank {}: replica-drift sketch from rank {}, but only rank 0 collects them", s_.rank, sender));
  if (const auto d = drift_->add(clock, sender, std::move(sketch)); d && s_.monitor) s_.monitor->set_drift(clock, *d);
}

// Reasons to stop early: a signal on this rank; on rank 0 the monitor's decision or the time limit.
void CommThread::check_stop_reasons() {
  if (stop_->stop_asked() || (s_.rank != 0 && stop_->done_sent())) return;
  if (const int sig = stop_signal(); sig != 0) {
    stop_->request_stop(StopReason::kSignal, fmt::format("rank {} received signal {}", s_.rank, sig), sig);
  } else if (s_.rank == 0) {
    std::optional<StopReason> reason = s_.monitor ? s_.monitor->stop_reason() : std::nullopt;
    if (!reason && s_.cfg.stop.max_seconds > 0 && s_.since_start.seconds() > s_.cfg.stop.max_seconds)
      reason = StopReason::kMaxSeconds;
    if (reason) stop_->request_stop(*reason);
  }
}

// Done locally (everything computed and applied, every own batch sent): DONE to rank 0.
bool CommThread::report_if_done() {
  if (stop_->done_sent() || !s_.gate->done() || !s_.out_q.empty()) return false;
  stop_->local_done(s_.collect_stats());
  return true;
}

// Waiting on peers for the end of the job or a stop reply: give up after peer_timeout_s.
void CommThread::check_peer_timeout(bool progress, Stopwatch& last_progress) const {
  if (progress) {
    last_progress.reset();
  } else if (stop_->waiting_on_peers() && last_progress.seconds() > s_.cfg.runtime.peer_timeout_s) {
    throw CommError(fmt::format("rank {}: no {} for {} s (runtime.peer_timeout_s)", s_.rank, stop_->waiting_for(),
                                s_.cfg.runtime.peer_timeout_s));
  }
}

void CommThread::run() {
  const double cpu0 = cpu_seconds(false);
  loop();
  cpu_s_ = cpu_seconds(false) - cpu0;
}

void CommThread::loop() {
  StopProtocolIo io;
  io.send = [this](int dst, ControlType type, int64_t value, std::vector<int64_t> payload) {
    s_.t.send(dst, comm::kTagControl, encode_control({type, s_.rank, value, std::move(payload)}));
  };
  io.pause = [this] { return s_.gate->pause(); };
  io.resume = [this](int64_t at) { s_.gate->resume(at); };
  stop_ = std::make_unique<StopProtocol>(s_.rank, s_.P, s_.cfg.stop.max_clocks, std::move(io));
  if (s_.exchange) start_exchange();
  Stopwatch last_progress;
  Backoff backoff;
  while (!s_.aborted()) {
    bool progress = send_own_batches();
    progress = send_drift_sketches() || progress;
    progress = receive_messages() || progress;
    check_stop_reasons();
    progress = report_if_done() || progress;
    if (stop_->try_finish()) break;
    check_peer_timeout(progress, last_progress);
    if (progress)
      backoff.reset();
    else if (!s_.t.wait_for_message(SteadyClock::now() + kIdleWait)) {
      polled_ = true;
      backoff.idle();  // a transport that cannot wait (MPI's, the latency emulation's): poll
    }
  }
  // After a failure nothing more is owed to the peers (the job is being aborted), and a flush
  // could wait on a peer that is stopped: only a finished job flushes, within the peer timeout.
  if (s_.aborted()) return;
  if (s_.exchange) s_.exchange->finish();
  s_.t.flush();
}

}  // namespace sfb::runtime
