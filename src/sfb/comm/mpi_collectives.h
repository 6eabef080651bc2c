#pragma once
// Open MPI's own collectives behind sfb's interfaces (comm.collectives = "mpi"): MPI_Allreduce as
// an Allreduce (allreduce.h). Part of comm's MPI backend: needs MPI initialised (MpiSession).
//
// Every rank's result is the same bits only when Open MPI's algorithm for the size reduces each
// element once and copies the result (its ring and its reduce+broadcast do; recursive doubling adds
// the same values pairwise on every rank in orders that are mirror images, which IEEE addition's
// commutativity makes equal for two operands per step). tests/mpi/mpi_transport_test.cc checks it
// for sizes 4 B .. 64 MiB on 4 ranks, and sfbd's replica checksums check every run.
#include <mpi.h>

#include <string>

#include "sfb/comm/allreduce.h"

namespace sfb::comm {

class MpiAllreduce final : public Allreduce {
 public:
  // Collective over MPI_COMM_WORLD: a communicator of ranks 0 .. ranks-1 (ranks beyond it take
  // part in the split only), so its traffic never meets another's.
  explicit MpiAllreduce(int ranks);
  ~MpiAllreduce() override;
  void run(std::span<float> data, int64_t id) override;
  std::string name() const override { return "mpi"; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

// The factory of comm.collectives = "mpi" (the channel is not used: MPI moves the bytes).
AllreduceFactory mpi_allreduce_factory();

}  // namespace sfb::comm
