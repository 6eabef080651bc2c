#pragma once
// The MPI process environment of the apps (sfbd, mgwfbp-plan): MPI_Init_thread / MPI_Finalize,
// the world rank and size, and the few operations on MPI_COMM_WORLD that run outside a Transport
// (before one exists, or after it is gone). Raw MPI stays in comm's MPI backend: apps and every
// other layer see this class and Transport only.
//
// Threads: construct and destroy on the main thread; the queries may be called from any thread.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sfb/comm/transport.h"
#include "sfb/comm/transport/tcp.h"
#include "sfb/core/config.h"

namespace sfb::comm {

struct MpiAllreduceBench {
  int64_t min_bytes = 4;
  int64_t max_bytes = int64_t{64} << 20;
  int warmup = 3;
  int repeats = 11;
};
struct TimedSize {
  int64_t bytes = 0;
  double us = 0.0;
};

// Which transport the ranks train over (comm.transport, comm.interface).
struct TransportOptions {
  TransportKind kind = TransportKind::kTcp;  // kTcp: comm/transport/tcp.h (MPI only bootstraps it); kMpi: MPI p2p
  std::string interface;                     // tcp: "" (every interface) or the one to use
  double connect_timeout_s = 120.0;
  std::string secret;      // tcp: comm.secret_file's bytes ("" none)
  std::string congestion;  // tcp: comm.tcp_congestion ("" the host's default)
};

class MpiSession {
 public:
  enum class Threads { kSerialized, kMultiple };
  // Initialises MPI with at least `threads` support (kMultiple is checked by make_transport()).
  MpiSession(int& argc, char**& argv, Threads threads);
  ~MpiSession();  // finalize() unless done
  // MPI_Finalize (once); no MPI call may follow.
  void finalize();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // This rank's index among the ranks on its host, and how many there are (MPI_COMM_TYPE_SHARED):
  // which GPU a rank takes, how many cores it may use.
  int local_rank() const { return local_rank_; }
  int ranks_on_host() const { return ranks_on_host_; }

  // Collective: the transport `opt` names, over every rank of MPI_COMM_WORLD. "mpi" duplicates
  // MPI_COMM_WORLD (needs MPI_THREAD_MULTIPLE); "tcp" exchanges the ranks' addresses through MPI and
  // connects them (bootstrap()).
  std::unique_ptr<Transport> make_transport(const TransportOptions& opt = {}) const;
  // The TCP transport's bootstrap: an all-gather of bytes over MPI_COMM_WORLD.
  Bootstrap bootstrap() const;
  // Collective: every rank's value, in rank order, on every rank (before any Transport exists).
  std::vector<int64_t> allgather(int64_t value) const;
  void barrier() const;
  // Collective: the largest of every rank's value, on every rank.
  double max(double value) const;
  // Collective: true on every rank when any rank passes true.
  bool any(bool flag) const;
  // Collective: every rank's string, in rank order, on rank 0 (empty elsewhere).
  std::vector<std::string> gather(const std::string& value) const;
  // Collective: root's value on every rank.
  int broadcast(int value, int root) const;
  // Ends every rank of the job with `code` (MPI_Abort).
  [[noreturn]] void abort(int code) const;

  // Collective: times MPI_Allreduce (float sum) for sizes min_bytes, 2 min_bytes, ... max_bytes:
  // warm-up calls, then `repeats` timed calls per size, each timed as the slowest rank's duration;
  // the median per size.
  std::vector<TimedSize> measure_allreduce(const MpiAllreduceBench& opt) const;

 private:
  int rank_ = 0, size_ = 1, local_rank_ = 0, ranks_on_host_ = 1;
  bool finalized_ = false;
};

}  // namespace sfb::comm
