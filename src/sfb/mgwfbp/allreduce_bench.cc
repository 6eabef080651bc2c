#include "sfb/mgwfbp/allreduce_bench.h"

#include <algorithm>

#include "sfb/comm/mpi_transport.h"
#include "sfb/core/error.h"

namespace sfb::mgwfbp {

std::vector<Sample> measure_allreduce(MPI_Comm comm, const BenchOptions& opt) {
  SFB_CHECK(opt.min_bytes >= 4 && opt.max_bytes >= opt.min_bytes && opt.repeats >= 1,
            "benchmark sizes must satisfy 4 <= min <= max, got {}..{}", opt.min_bytes, opt.max_bytes);
  std::vector<float> in(static_cast<size_t>(opt.max_bytes / 4), 1.0f), out(in.size());
  std::vector<Sample> samples;
  for (int64_t bytes = opt.min_bytes; bytes <= opt.max_bytes; bytes *= 2) {
    const int count = static_cast<int>(bytes / 4);
    for (int i = 0; i < opt.warmup; ++i)
      SFB_MPI_CALL(MPI_Allreduce(in.data(), out.data(), count, MPI_FLOAT, MPI_SUM, comm));
    std::vector<double> times;
    for (int i = 0; i < opt.repeats; ++i) {
      SFB_MPI_CALL(MPI_Barrier(comm));
      const double t0 = MPI_Wtime();
      SFB_MPI_CALL(MPI_Allreduce(in.data(), out.data(), count, MPI_FLOAT, MPI_SUM, comm));
      double dt = MPI_Wtime() - t0, slowest = 0;
      SFB_MPI_CALL(MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm));
      times.push_back(slowest * 1e6);
    }
    std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
    samples.push_back({bytes, times[times.size() / 2]});
  }
  return samples;
}

}  // namespace sfb::mgwfbp
