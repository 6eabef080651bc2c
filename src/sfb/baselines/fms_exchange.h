#pragma once
// Full-matrix synchronisation through parameter servers (the Petuum Bosen baseline), worker side.
// Servers are the last S ranks; server s holds rows [J s / S, J (s+1) / S) of W. Every clock a
// worker forms its dense update dW_p = U^T V, pushes each server its rows, and replaces its W by
// the servers' rows once all S have sent the version after a clock (kReplaceW items). Staleness
// works as for SFB: clock c starts when the servers' W includes every worker's clocks < c - s (no
// read-my-writes: the worker's own update comes back with everyone's). Bytes per clock: P J D
// floats pushed and P J D pulled.
//
// Threads: everything runs on the worker's communication thread.
#include <map>

#include "sfb/runtime/exchange.h"

namespace sfb::baselines {

class FmsExchange final : public runtime::Exchange {
 public:
  explicit FmsExchange(int servers) : S_(servers) {}
  std::string name() const override { return "fms"; }
  void start(const runtime::ExchangeHost& host) override;
  void send_own(const SfBatchPtr& batch) override;
  bool handles(comm::Tag tag) const override { return tag == comm::kTagPs; }
  void on_message(comm::Message&& m) override;
  void finish() override;
  void abort() override {}

 private:
  struct Assembly {
    std::shared_ptr<Matrix> W;
    int shards = 0;
  };
  runtime::ExchangeHost host_;
  int S_;
  int rank_ = 0;
  Matrix dW_;                             // reused
  std::map<int64_t, Assembly> versions_;  // version -> rows received so far
  int64_t next_version_ = 0;
};

}  // namespace sfb::baselines
