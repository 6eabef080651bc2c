#pragma once
// Full-matrix synchronisation through parameter servers (the Petuum Bosen baseline), worker side.
// Servers are the last S ranks; server s holds rows [J s / S, J (s+1) / S) of W. Every clock a
// worker forms its dense update dW_p = U^T V, pushes each server its rows, and replaces its W by
// the servers' rows once all S have sent the version after a clock (kReplaceW items). Staleness
// works as for SFB: clock c starts when the servers' W includes every worker's clocks < c - s.
// Bytes per clock: P J D floats pushed and P J D pulled.
//
// Read-my-writes under SSP/ASP (staleness > 0), as a Bosen client keeps its oplog applied to its
// cache: the worker applies its own update of clock c at once (a kOwnDense item), keeps it until a
// version that includes it arrives, and replaces W by the servers' W plus its own updates not yet
// in it. The staleness gate is unchanged (clock c starts when the servers' W includes every
// worker's clocks < c - s) and clock c also waits for its own c - 1, so a worker never computes
// from a W that lacks its own recent updates. Under BSP the next version always includes the
// worker's own clock before it may start another, so nothing is kept.
//
// Threads: everything runs on the worker's communication thread.
#include <map>

#include "sfb/runtime/exchange.h"

namespace sfb::baselines {

class FmsExchange final : public runtime::Exchange {
 public:
  FmsExchange(int servers, bool read_my_writes) : S_(servers), rmw_(read_my_writes) {}
  std::string name() const override { return "fms"; }
  void start(const runtime::ExchangeHost& host) override;
  void send_own(const SfBatchPtr& batch) override;
  bool handles(comm::Tag tag) const override { return tag == comm::kTagPs; }
  bool reads_own_writes() const override { return rmw_; }
  void on_message(comm::Message&& m) override;
  void finish() override;
  void abort() override {}

 private:
  struct Assembly {
    std::shared_ptr<Matrix> W;
    int shards = 0;
  };
  runtime::ExchangeHost host_;
  void deliver_complete_versions();

  int S_;
  bool rmw_;
  int rank_ = 0;
  std::map<int64_t, std::shared_ptr<const Matrix>> own_;  // read-my-writes: own updates not yet in a version
  Matrix dW_;                                             // reused
  std::map<int64_t, Assembly> versions_;                  // version -> rows received so far
  int64_t next_version_ = 0;
};

}  // namespace sfb::baselines
