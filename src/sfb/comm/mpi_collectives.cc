#include "sfb/comm/mpi_collectives.h"

#include <algorithm>
#include <climits>

#include "sfb/comm/transport/mpi.h"
#include "sfb/core/error.h"

namespace sfb::comm {

MpiAllreduce::MpiAllreduce(int ranks) {
  int rank = 0, size = 0;
  SFB_MPI_CALL(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  SFB_MPI_CALL(MPI_Comm_size(MPI_COMM_WORLD, &size));
  SFB_ENFORCE(ranks >= 1 && ranks <= size, "MPI all-reduce over {} of {} ranks", ranks, size);
  SFB_MPI_CALL(MPI_Comm_split(MPI_COMM_WORLD, rank < ranks ? 0 : MPI_UNDEFINED, rank, &comm_));
  if (comm_ != MPI_COMM_NULL) SFB_MPI_CALL(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
}

MpiAllreduce::~MpiAllreduce() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (comm_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm_);
}

void MpiAllreduce::run(std::span<float> data, int64_t /*id*/) {
  SFB_ENFORCE(comm_ != MPI_COMM_NULL, "MPI all-reduce on a rank outside it");
  // MPI counts are ints: larger buffers go in pieces (each summed alike on every rank).
  for (size_t off = 0; off < data.size(); off += size_t{1} << 30) {
    const auto n = static_cast<int>(std::min(data.size() - off, size_t{1} << 30));
    SFB_MPI_CALL(MPI_Allreduce(MPI_IN_PLACE, data.data() + off, n, MPI_FLOAT, MPI_SUM, comm_));
  }
}

AllreduceFactory mpi_allreduce_factory() {
  return [](Channel&, int ranks) { return std::make_unique<MpiAllreduce>(ranks); };
}

}  // namespace sfb::comm
