#pragma once
// The dense all-reduce baseline (what Horovod and PyTorch DDP do): every clock each worker forms
// its dense update dW_p = U^T V and the workers sum them with a ring all-reduce (reduce-scatter then
// all-gather over P chunks, 2 (P-1) / P * J * D floats sent per worker), so every replica applies
// the same sum. Bytes on the network per clock: 2 (P - 1) J D floats.
//
// Threads: the worker's communication thread hands over own batches and the chunks that arrive
// (kTagReduce, always from the left neighbour); a reduce thread of this class does the
// all-reduce, clock after clock, and delivers a kDenseSum item per clock to the update thread.
#include <functional>
#include <span>
#include <thread>

#include "sfb/comm/transport.h"
#include "sfb/core/bounded_queue.h"
#include "sfb/runtime/exchange.h"

namespace sfb::baselines {

class AllreduceExchange final : public runtime::Exchange {
 public:
  AllreduceExchange() = default;
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
  comm::Message next_chunk();

  runtime::ExchangeHost host_;
  int rank_ = 0, P_ = 1;
  BoundedQueue<SfBatchPtr> own_;
  BoundedQueue<std::shared_ptr<comm::Message>> chunks_;
  std::thread thread_;
};

}  // namespace sfb::baselines
