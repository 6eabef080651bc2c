#pragma once
// The dense all-reduce baseline (what Horovod and PyTorch DDP do): every clock each worker forms
// its dense update dW_p = U^T V and the workers sum them with the all-reduce of comm.collectives
// (comm/allreduce.h: sfb's pipelined rank-order all-reduce, 2 (P-1) / P * J * D floats sent per
// worker, or Open MPI's MPI_Allreduce), so every replica applies the same sum. Bytes on the network
// per clock: 2 (P - 1) J D floats.
//
// Bucketed like DDP: the update is formed in row blocks of a thirty-second of W (1 - 32 MiB), and
// each block is all-reduced as soon as it is formed while the next one is computed, then handed to
// the update thread, which adds it to W (sums per element are in rank order whatever the blocks, so
// replicas stay bitwise identical). The blocks come from a pool of kDenseAllreduceBlocksInFlight buffers: memory is
// bounded by them, never a W-sized update, however far the GEMM runs ahead.
//
// Threads: the worker's communication thread hands over own batches and the all-reduce's messages
// that arrive (kTagReduce) through a QueueChannel; a GEMM thread of this class forms the blocks, a
// reduce thread all-reduces them, clock after clock, and delivers each as a kSum DenseUpdate (the
// clock's last one marked) to the update thread.
#include <functional>
#include <span>
#include <thread>

#include "sfb/comm/allreduce.h"
#include "sfb/comm/channel.h"
#include "sfb/comm/transport.h"
#include "sfb/core/bounded_queue.h"
#include "sfb/core/buffer_pool.h"
#include "sfb/core/collective_cost.h"
#include "sfb/runtime/exchange.h"

namespace sfb::baselines {

class AllreduceExchange final : public runtime::Exchange {
 public:
  // `engine`: the all-reduce (null: sfb's rank-order all-reduce).
  explicit AllreduceExchange(comm::AllreduceFactory engine = {}) : engine_(std::move(engine)) {}
  ~AllreduceExchange() override;
  std::string name() const override { return "allreduce"; }
  void start(const runtime::ExchangeHost& host) override;
  void send_own(const SfBatchPtr& batch) override { own_.push(batch); }
  bool handles(comm::Tag tag) const override { return tag == comm::kTagReduce; }
  void on_message(comm::Message&& m) override;
  void finish() override;
  void abort() override;

 private:
  struct Block {
    int64_t clock = 0;
    std::shared_ptr<Matrix> sum;  // from pool_
    int64_t index = 0, count = 0, row_begin = 0;
  };
  void gemm_loop();
  void reduce_loop();
  void run_thread(std::thread& th, void (AllreduceExchange::*body)());

  comm::AllreduceFactory engine_;
  runtime::ExchangeHost host_;
  int rank_ = 0, P_ = 1;
  BoundedQueue<SfBatchPtr> own_;
  BoundedQueue<std::shared_ptr<Block>> blocks_;  // formed, to all-reduce; null stops the reduce thread
  BufferPool pool_{kDenseAllreduceBlocksInFlight};
  std::unique_ptr<comm::QueueChannel> channel_;
  std::unique_ptr<comm::Allreduce> allreduce_;
  std::thread gemm_thread_, reduce_thread_;
};

}  // namespace sfb::baselines
