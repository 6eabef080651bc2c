#pragma once
// The dense all-reduce baseline (what Horovod and PyTorch DDP do): every clock each worker forms
// its dense update dW_p = U^T V and the workers sum them with the all-reduce of comm.collectives
// (comm/allreduce.h: sfb's pipelined rank-order all-reduce, 2 (P-1) / P * J * D floats sent per
// worker, or Open MPI's MPI_Allreduce), so every replica applies the same sum. Bytes on the network
// per clock: 2 (P - 1) J D floats.
//
// Threads: the worker's communication thread hands over own batches and the all-reduce's messages
// that arrive (kTagReduce) through a QueueChannel; a reduce thread of this class does the
// all-reduce, clock after clock, and delivers a kDenseSum item per clock to the update thread.
#include <functional>
#include <span>
#include <thread>

#include "sfb/comm/allreduce.h"
#include "sfb/comm/channel.h"
#include "sfb/comm/transport.h"
#include "sfb/core/bounded_queue.h"
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
  void loop();

  comm::AllreduceFactory engine_;
  runtime::ExchangeHost host_;
  int rank_ = 0, P_ = 1;
  BoundedQueue<SfBatchPtr> own_;
  std::unique_ptr<comm::QueueChannel> channel_;
  std::unique_ptr<comm::Allreduce> allreduce_;
  std::thread thread_;
};

}  // namespace sfb::baselines
