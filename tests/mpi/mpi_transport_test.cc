// Runs under `mpirun -np 4`, once per transport sfbd can train over: MPI point-to-point (also with
// 1000-byte segments, so large messages go in pieces) and TCP (bootstrapped through MPI). For each:
//  * every rank sends every other rank messages of several sizes; content, order and counters;
//  * the set-up collectives;
//  * no head-of-line blocking: rank 2's small message reaches rank 0 while rank 1's 256 MiB message
//    to rank 0 is still arriving;
//  * a peer that stops mid-message (rank 1 sends 64 MiB, then SIGSTOPs itself) is reported by the
//    receiver within its peer timeout; after SIGCONT the message arrives whole.
// Then MPI_Allreduce (comm.collectives = "mpi") leaves every rank the same bits at every size.
// Exits non-zero on the first mismatch.
#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "sfb/comm/mpi_collectives.h"
#include "sfb/comm/mpi_session.h"
#include "sfb/comm/setup_collectives.h"
#include "sfb/comm/transport/mpi.h"
#include "sfb/core/error.h"
#include "sfb/core/hash.h"
#include "sfb/core/timer.h"

namespace {

using sfb::comm::Transport;

sfb::comm::Bytes payload(int src, int dst, size_t n) {
  sfb::comm::Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<std::byte>((src * 31 + dst * 7 + i * 13) & 0xff);
  return b;
}

int failures = 0;
int rank = 0;
#define CHECK(cond, ...)                                                                            \
  do {                                                                                              \
    if (!(cond)) {                                                                                  \
      ++failures;                                                                                   \
      fmt::print(stderr, "rank {}: check failed: {}: {}\n", rank, #cond, fmt::format(__VA_ARGS__)); \
    }                                                                                               \
  } while (0)

void exchange_all(Transport& t, const std::vector<size_t>& sizes) {
  const int p = t.size();
  const auto before = t.total_counters();
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
  size_t expect = 0;
  for (size_t n : sizes) expect += n;
  const auto after = t.total_counters();
  CHECK(after.bytes_sent - before.bytes_sent == static_cast<int64_t>(expect) * p, "bytes sent");
  CHECK(after.bytes_received - before.bytes_received == static_cast<int64_t>(expect) * p, "bytes received");
  const auto all = sfb::comm::allgather_i64(t, 10 * rank);
  for (int q = 0; q < p; ++q) CHECK(all[q] == 10 * q, "allgather[{}] = {}", q, all[q]);
  sfb::comm::check_all_equal(t, 99, "a constant");
}

void no_head_of_line_blocking(Transport& t, const sfb::comm::MpiSession& mpi) {
  const size_t big = size_t{256} << 20;
  if (rank == 1) t.send_shared(0, sfb::comm::kTagSf, std::make_shared<const sfb::Bytes>(big, std::byte{5}));
  mpi.barrier();  // rank 1's message is on its way (MPI's barrier: not queued behind it)
  if (rank == 2) t.send(0, sfb::comm::kTagControl, payload(2, 0, 8));
  if (rank == 0) {
    const auto small = t.recv(sfb::comm::kTagControl);
    CHECK(small.src == 2, "small message from rank {}", small.src);
    CHECK(!t.try_recv(sfb::comm::kTagSf).has_value(), "rank 1's 256 MiB arrived before rank 2's 8 bytes");
    const auto m = t.recv(sfb::comm::kTagSf);
    CHECK(m.data.size() == big && m.data[big - 1] == std::byte{5}, "the large message");
  }
  t.flush();
  t.barrier();
}

void stopped_peer_is_reported(Transport& t, const std::vector<int64_t>& pids) {
  const size_t n = size_t{64} << 20;
  if (rank == 1) {
    t.send_shared(0, sfb::comm::kTagSf, std::make_shared<const sfb::Bytes>(payload(1, 0, n)));
    ::raise(SIGSTOP);  // mid-message: rank 0 sends SIGCONT once it has reported us
  }
  if (rank == 0) {
    t.set_peer_timeout(2.0);
    sfb::Stopwatch sw;
    bool reported = false;
    try {
      t.recv(sfb::comm::kTagSf);
      // 64 MiB cannot be through: the kernel's socket buffers (or MPI's rendezvous) hold far less.
      CHECK(false, "the whole message arrived although its sender was stopped");
    } catch (const sfb::CommError& e) {
      reported = std::strstr(e.what(), "no SF batch message for 2 s") != nullptr;
      CHECK(reported, "unexpected error: {}", e.what());
      CHECK(sw.seconds() < 10.0, "reported after {} s", sw.seconds());
      ::kill(static_cast<pid_t>(pids[1]), SIGCONT);
      t.set_peer_timeout(60.0);
      const auto m = t.recv(sfb::comm::kTagSf);
      CHECK(m.data == payload(1, 0, n), "the message after SIGCONT");
    }
    ::kill(static_cast<pid_t>(pids[1]), SIGCONT);
    CHECK(reported, "no report");
  }
  t.set_peer_timeout(60.0);
  t.flush();
  t.barrier();
}

void run_on(Transport& t, const std::string& name, const sfb::comm::MpiSession& mpi, const std::vector<int64_t>& pids) {
  if (rank == 0) fmt::print("mpi_transport_test: {}\n", name);
  exchange_all(t, {0, 1, 999, 1000, 1001, 250000, size_t{5} << 20});
  no_head_of_line_blocking(t, mpi);
  stopped_peer_is_reported(t, pids);
}

// MPI_Allreduce leaves every rank the same bits (the checksum of the result, compared).
void mpi_allreduce_is_bitwise_identical(Transport& t) {
  sfb::comm::MpiAllreduce ar(t.size());
  for (int64_t n = 1; n <= (int64_t{16} << 20); n *= 4) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = 1.0f / static_cast<float>(i % 97 + rank + 1) * 1e3f;
    ar.run(v, 0);
    const uint64_t h = sfb::fnv1a64(std::as_bytes(std::span(v.data(), v.size())));
    const auto all = sfb::comm::allgather_i64(t, static_cast<int64_t>(h));
    for (size_t q = 1; q < all.size(); ++q)
      CHECK(all[q] == all[0], "MPI_Allreduce of {} floats differs on rank {}", n, q);
  }
}

}  // namespace

int main(int argc, char** argv) {
  sfb::comm::MpiSession mpi(argc, argv, sfb::comm::MpiSession::Threads::kMultiple);
  rank = mpi.rank();
  try {
    const auto pids = mpi.allgather(::getpid());
    const std::string only = argc > 1 ? argv[1] : "";
    if (only.empty() || only == "mpi") {
      auto t = sfb::comm::make_mpi_transport(MPI_COMM_WORLD);
      run_on(*t, "MPI transport", mpi, pids);
      mpi_allreduce_is_bitwise_identical(*t);
      sfb::comm::MpiTransport segmented(MPI_COMM_WORLD, 1000);
      if (rank == 0) fmt::print("mpi_transport_test: MPI transport, 1000-byte segments\n");
      exchange_all(segmented, {0, 1, 999, 1000, 1001, 250000});
    }
    if (only.empty() || only == "tcp") {
      sfb::comm::TransportOptions opt;
      opt.kind = sfb::TransportKind::kTcp;
      auto t = mpi.make_transport(opt);
      run_on(*t, "TCP transport", mpi, pids);
      mpi.barrier();
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "rank {}: {}\n", rank, e.what());
    ++failures;
  }
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) fmt::print("mpi_transport_test: {}\n", total == 0 ? "OK" : fmt::format("{} failures", total));
  return total == 0 ? 0 : 1;
}
