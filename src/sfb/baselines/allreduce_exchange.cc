#include "sfb/baselines/allreduce_exchange.h"

#include <cstring>

#include <fmt/format.h>

#include "sfb/baselines/dense_update.h"
#include "sfb/core/error.h"

namespace sfb::baselines {
namespace {

// A chunk message: clock, step, chunk index, then the floats.
struct ChunkHeader {
  int64_t clock;
  int32_t step;
  int32_t chunk;
};

}  // namespace

void ring_allreduce(comm::Transport& t, int workers, std::span<float> data, int64_t clock,
                    const std::function<comm::Message()>& recv_left) {
  const int P = workers;
  const int r = t.rank();
  if (P == 1) return;
  const auto n = static_cast<int64_t>(data.size());
  auto begin = [&](int c) { return n * c / P; };
  auto end = [&](int c) { return n * (c + 1) / P; };
  const int right = (r + 1) % P, left = (r + P - 1) % P;
  comm::Bytes msg;
  auto send_chunk = [&](int step, int c) {
    const ChunkHeader h{clock, step, c};
    const auto count = static_cast<size_t>(end(c) - begin(c));
    msg.resize(sizeof(h) + count * sizeof(float));
    std::memcpy(msg.data(), &h, sizeof(h));
    if (count > 0) std::memcpy(msg.data() + sizeof(h), data.data() + begin(c), count * sizeof(float));
    t.send(right, comm::kTagReduce, msg);
  };
  auto recv_chunk = [&](int step, int c) {
    comm::Message m = recv_left();
    const auto count = static_cast<size_t>(end(c) - begin(c));
    ChunkHeader h{};
    if (m.src != left || m.data.size() != sizeof(h) + count * sizeof(float))
      throw CommError(fmt::format("rank {}: all-reduce chunk from rank {} with {} bytes, expected {} bytes from rank {}",
                                  r, m.src, m.data.size(), sizeof(h) + count * sizeof(float), left));
    std::memcpy(&h, m.data.data(), sizeof(h));
    if (h.clock != clock || h.step != step || h.chunk != c)
      throw CommError(fmt::format("rank {}: all-reduce chunk (clock {}, step {}, chunk {}) from rank {}, expected "
                                  "(clock {}, step {}, chunk {})",
                                  r, h.clock, h.step, h.chunk, m.src, clock, step, c));
    return m;
  };
  // Reduce-scatter: after P - 1 steps rank r holds the full sum of chunk (r + 1) mod P.
  for (int s = 0; s < P - 1; ++s) {
    const int send_c = ((r - s) % P + P) % P;
    const int recv_c = ((r - s - 1) % P + P) % P;
    send_chunk(s, send_c);
    comm::Message m = recv_chunk(s, recv_c);
    const float* in = reinterpret_cast<const float*>(m.data.data() + sizeof(ChunkHeader));
    float* out = data.data() + begin(recv_c);
    for (int64_t i = 0; i < end(recv_c) - begin(recv_c); ++i) out[i] += in[i];
  }
  // All-gather: pass the reduced chunks around the ring.
  for (int s = 0; s < P - 1; ++s) {
    const int send_c = ((r + 1 - s) % P + P) % P;
    const int recv_c = ((r - s) % P + P) % P;
    send_chunk(P - 1 + s, send_c);
    comm::Message m = recv_chunk(P - 1 + s, recv_c);
    const auto count = static_cast<size_t>(end(recv_c) - begin(recv_c));
    if (count > 0) std::memcpy(data.data() + begin(recv_c), m.data.data() + sizeof(ChunkHeader), count * sizeof(float));
  }
}

AllreduceExchange::~AllreduceExchange() {
  abort();
}

void AllreduceExchange::start(const runtime::ExchangeHost& host) {
  host_ = host;
  rank_ = host.transport->rank();
  P_ = host.workers;
  own_.set_capacity(1 << 16);
  chunks_.set_capacity(1 << 16);
  thread_ = std::thread([this] {
    try {
      loop();
    } catch (const tbb::user_abort&) {
    } catch (...) {
      host_.fail(std::current_exception());
    }
  });
}

void AllreduceExchange::on_message(comm::Message&& m) {
  chunks_.push(std::make_shared<comm::Message>(std::move(m)));
}

comm::Message AllreduceExchange::next_chunk() {
  std::shared_ptr<comm::Message> m;
  chunks_.pop(m);
  if (!m) throw tbb::user_abort();
  return std::move(*m);
}

void AllreduceExchange::loop() {
  for (;;) {
    SfBatchPtr b;
    own_.pop(b);
    if (!b) return;  // finish()
    auto sum = std::make_shared<Matrix>();
    dense_update(*b, *sum);
    baselines::ring_allreduce(*host_.transport, P_, std::span<float>(sum->data(), static_cast<size_t>(sum->size())), b->clock,
                   [this] { return next_chunk(); });
    auto item = std::make_shared<SfBatch>();
    item->kind = SfBatch::Kind::kDenseSum;
    item->sender = rank_;
    item->clock = b->clock;
    item->count = b->count;
    item->J = b->J;
    item->D = b->D;
    item->dense = std::move(sum);
    host_.deliver(std::move(item));
  }
}

void AllreduceExchange::finish() {
  if (!thread_.joinable()) return;
  own_.push(nullptr);
  thread_.join();
}

void AllreduceExchange::abort() {
  // abort() wakes the thread if it waits now; the null items stop it if it pops later.
  own_.abort();
  chunks_.abort();
  own_.try_push(nullptr);
  chunks_.try_push(nullptr);
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

}  // namespace sfb::baselines
