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

  // A Transport over a duplicate of MPI_COMM_WORLD (needs MPI_THREAD_MULTIPLE).
  std::unique_ptr<Transport> make_transport() const;
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
