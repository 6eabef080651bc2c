#include "sfb/baselines/allreduce_exchange.h"

#include <fmt/format.h>

#include "sfb/baselines/dense_update.h"
#include "sfb/core/error.h"

namespace sfb::baselines {
AllreduceExchange::~AllreduceExchange() { abort(); }

void AllreduceExchange::start(const runtime::ExchangeHost& host) {
  host_ = host;
  rank_ = host.transport->rank();
  P_ = host.workers;
  own_.set_capacity(1 << 16);
  channel_ = std::make_unique<comm::QueueChannel>(*host.transport, comm::kTagReduce);
  allreduce_ = engine_ ? engine_(*channel_, P_) : comm::make_rank_order_allreduce(*channel_, P_);
  thread_ = std::thread([this] {
    try {
      loop();
    } catch (const tbb::user_abort&) {
    } catch (const comm::QueueChannel::Closed&) {
    } catch (...) {
      host_.fail(std::current_exception());
    }
  });
}

void AllreduceExchange::on_message(comm::Message&& m) { channel_->push(std::move(m)); }

void AllreduceExchange::loop() {
  for (;;) {
    SfBatchPtr b;
    own_.pop(b);
    if (!b) return;  // finish()
    auto sum = std::make_shared<Matrix>();
    dense_update(*b, *sum);
    allreduce_->run(std::span<float>(sum->data(), static_cast<size_t>(sum->size())), b->clock);
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
  // abort() wakes the thread if it waits now; the null item stops it if it pops later.
  own_.abort();
  own_.try_push(nullptr);
  if (channel_) channel_->close();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

}  // namespace sfb::baselines
