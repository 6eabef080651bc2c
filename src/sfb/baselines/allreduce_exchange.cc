#include "sfb/baselines/allreduce_exchange.h"

#include <fmt/format.h>

#include "sfb/baselines/dense_update.h"
#include "sfb/comm/ring_allreduce.h"
#include "sfb/core/error.h"

namespace sfb::baselines {
AllreduceExchange::~AllreduceExchange() { abort(); }

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

void AllreduceExchange::on_message(comm::Message&& m) { chunks_.push(std::make_shared<comm::Message>(std::move(m))); }

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
    comm::ring_allreduce(*host_.transport, P_, std::span<float>(sum->data(), static_cast<size_t>(sum->size())),
                         b->clock, [this] { return next_chunk(); });
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
