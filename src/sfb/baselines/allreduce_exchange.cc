#include "sfb/baselines/allreduce_exchange.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "sfb/baselines/dense_update.h"
#include "sfb/core/error.h"
#include "sfb/core/row_blocks.h"
#include "sfb/core/timer.h"

namespace sfb::baselines {
AllreduceExchange::~AllreduceExchange() { abort(); }

void AllreduceExchange::run_thread(std::thread& th, void (AllreduceExchange::*body)()) {
  th = std::thread([this, body] {
    try {
      (this->*body)();
    } catch (const tbb::user_abort&) {
    } catch (const comm::QueueChannel::Closed&) {
    } catch (...) {
      host_.fail(std::current_exception());
    }
  });
}

void AllreduceExchange::start(const runtime::ExchangeHost& host) {
  host_ = host;
  rank_ = host.transport->rank();
  P_ = host.workers;
  own_.set_capacity(1 << 16);
  blocks_.set_capacity(1 << 16);
  channel_ = std::make_unique<comm::QueueChannel>(*host.transport, comm::kTagReduce);
  allreduce_ = engine_ ? engine_(*channel_, P_) : comm::make_rank_order_allreduce(*channel_, P_);
  run_thread(reduce_thread_, &AllreduceExchange::reduce_loop);
  run_thread(gemm_thread_, &AllreduceExchange::gemm_loop);
}

void AllreduceExchange::on_message(comm::Message&& m) { channel_->push(std::move(m)); }

// Forms each clock's update block by block and hands every block to the reduce thread at once.
void AllreduceExchange::gemm_loop() {
  // Blocks of the stored matrix's rows (the workers' layout).
  const int64_t C = host_.cols();
  const std::vector<std::pair<int64_t, int64_t>> cuts = dense_allreduce_cuts(host_.rows(), C);
  const auto count = static_cast<int64_t>(cuts.size());
  for (;;) {
    SfBatchPtr b;
    own_.pop(b);
    if (!b) {
      blocks_.push(nullptr);
      return;  // finish()
    }
    for (int64_t k = 0; k < count; ++k) {
      const auto [r0, n] = cuts[static_cast<size_t>(k)];
      auto sum = pool_.acquire(n, C);
      if (!sum) return;  // aborted
      dense_update_rows(*b, host_.layout, r0, n, *sum);
      blocks_.push(std::make_shared<Block>(Block{b->clock, std::move(sum), k, count, r0}));
    }
  }
}

// All-reduces the blocks in order and hands each to the update thread.
void AllreduceExchange::reduce_loop() {
  for (;;) {
    std::shared_ptr<Block> blk;
    blocks_.pop(blk);
    if (!blk) return;
    Matrix& sum = *blk->sum;
    Stopwatch sw;
    allreduce_->run(std::span<float>(sum.data(), static_cast<size_t>(sum.size())), blk->clock * 65536 + blk->index);
    spdlog::debug("all-reduce of clock {} block {}/{}: {:.1f} ms", blk->clock, blk->index + 1, blk->count,
                  sw.seconds() * 1e3);
    auto item = std::make_shared<runtime::DenseUpdate>();
    item->kind = runtime::DenseUpdate::Kind::kSum;
    item->clock = blk->clock;
    item->row_begin = blk->row_begin;
    item->rows = sum.rows();
    item->block = std::move(blk->sum);
    item->last = blk->index + 1 == blk->count;
    host_.deliver(std::move(item));
  }
}

void AllreduceExchange::finish() {
  if (!gemm_thread_.joinable()) return;
  own_.push(nullptr);
  gemm_thread_.join();
  reduce_thread_.join();
}

void AllreduceExchange::abort() {
  // abort() wakes the threads if they wait now; the null items stop them if they pop later.
  own_.abort();
  blocks_.abort();
  pool_.abort();
  own_.try_push(nullptr);
  blocks_.try_push(nullptr);
  if (channel_) channel_->close();
  for (std::thread* th : {&gemm_thread_, &reduce_thread_})
    if (th->joinable() && th->get_id() != std::this_thread::get_id()) th->join();
}

}  // namespace sfb::baselines
