#pragma once
// Bounds every wait of sfbd on its peers outside the training threads: the agreements at
// start-up (config, data, checkpoint), the collectives at the end of the job and MPI_Finalize.
// MPI collectives have no timeout of their own, so a stopped or lost peer would hold every other
// rank there forever; instead, a stage armed here that has not finished within its time makes
// this rank report the stage and end the job (exit code 3 through MPI_Abort; _Exit during
// MPI_Finalize, where MPI may no longer be called). The training threads bound their own waits
// (runtime.peer_timeout_s).
//
// Threads: guard() on the main thread; the watchdog's own thread only waits and, at worst, ends
// the process.
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "sfb/comm/mpi_session.h"
#include "sfb/core/timer.h"

namespace sfbd {

class Watchdog {
 public:
  explicit Watchdog(const sfb::comm::MpiSession& mpi);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Disarms the stage when it goes out of scope.
  class Guard {
   public:
    explicit Guard(Watchdog& w) : w_(w) {}
    ~Guard() { w_.disarm(); }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    Watchdog& w_;
  };
  // `stage` ("agreeing on the config", "MPI_Finalize") must end within `seconds`; `limit` says
  // where they come from in the message when it does not.
  [[nodiscard]] Guard guard(std::string stage, double seconds, std::string limit = "runtime.peer_timeout_s");

 private:
  void disarm();
  void loop();
  [[noreturn]] void expire(const std::string& stage, double seconds, const std::string& limit);

  const sfb::comm::MpiSession& mpi_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool armed_ = false, stop_ = false;
  std::string stage_, limit_;
  double seconds_ = 0;
  sfb::SteadyClock::time_point deadline_;
  std::thread thread_;
};

}  // namespace sfbd
