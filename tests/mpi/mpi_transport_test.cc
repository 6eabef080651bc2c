// Runs under `mpirun -np 4`: every rank sends every other rank messages of several sizes over the
// MPI transport (one transport with 1000-byte chunks, so large messages are split), checks
// content, order and counters, then the collectives. Exits non-zero on the first mismatch.
#include <mpi.h>

#include <cstdio>

#include <fmt/format.h>

#include "sfb/comm/setup_collectives.h"
#include "sfb/comm/transport/mpi.h"
#include "sfb/core/error.h"

namespace {

sfb::comm::Bytes payload(int src, int dst, size_t n) {
  sfb::comm::Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<std::byte>((src * 31 + dst * 7 + i * 13) & 0xff);
  return b;
}

int failures = 0;
#define CHECK(cond, ...)                                                                            \
  do {                                                                                              \
    if (!(cond)) {                                                                                  \
      ++failures;                                                                                   \
      fmt::print(stderr, "rank {}: check failed: {}: {}\n", rank, #cond, fmt::format(__VA_ARGS__)); \
    }                                                                                               \
  } while (0)

void exchange_all(sfb::comm::Transport& t, const std::vector<size_t>& sizes) {
  const int rank = t.rank(), p = t.size();
  for (int dst = 0; dst < p; ++dst)
    for (size_t n : sizes) t.send(dst, sfb::comm::kTagSf, payload(rank, dst, n));
  std::vector<size_t> next(static_cast<size_t>(p), 0);
  for (int i = 0; i < p * static_cast<int>(sizes.size()); ++i) {
    const auto m = t.recv(sfb::comm::kTagSf);
    const size_t want = sizes[next[static_cast<size_t>(m.src)]++];
    CHECK(m.data == payload(m.src, rank, want), "message {} from rank {} ({} bytes, expected {})", i, m.src,
          m.data.size(), want);
  }
  t.flush();
  t.barrier();
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  try {
    const std::vector<size_t> sizes = {0, 1, 999, 1000, 1001, 250000};
    {
      auto t = sfb::comm::make_mpi_transport(MPI_COMM_WORLD);
      exchange_all(*t, sizes);
      size_t expect = 0;
      for (size_t n : sizes) expect += n;
      for (int q = 0; q < t->size(); ++q) {
        CHECK(t->counters(q).bytes_sent == static_cast<int64_t>(expect), "bytes sent to {}", q);
        CHECK(t->counters(q).bytes_received == static_cast<int64_t>(expect), "bytes from {}", q);
        CHECK(t->counters(q).msgs_received == static_cast<int64_t>(sizes.size()), "messages from {}", q);
      }
      const auto all = sfb::comm::allgather_i64(*t, 10 * rank);
      for (int q = 0; q < t->size(); ++q) CHECK(all[q] == 10 * q, "allgather[{}] = {}", q, all[q]);
      sfb::comm::check_all_equal(*t, 99, "a constant");
    }
    {
      sfb::comm::MpiTransport chunked(MPI_COMM_WORLD, 1000);
      exchange_all(chunked, sizes);
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "rank {}: {}\n", rank, e.what());
    ++failures;
  }
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) fmt::print("mpi_transport_test: {}\n", total == 0 ? "OK" : fmt::format("{} failures", total));
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
