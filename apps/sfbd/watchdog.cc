#include "watchdog.h"

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "job.h"

namespace sfbd {

Watchdog::Watchdog(const sfb::comm::MpiSession& mpi) : mpi_(mpi), thread_([this] { loop(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

Watchdog::Guard Watchdog::guard(std::string stage, double seconds, std::string limit) {
  {
    std::lock_guard lock(mu_);
    armed_ = true;
    stage_ = std::move(stage);
    limit_ = std::move(limit);
    seconds_ = seconds;
    deadline_ = sfb::deadline_after(seconds);
  }
  cv_.notify_all();
  return Guard(*this);
}

void Watchdog::disarm() {
  std::lock_guard lock(mu_);
  armed_ = false;
  cv_.notify_all();
}

void Watchdog::loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    if (!armed_) {
      cv_.wait(lock);
      continue;
    }
    if (cv_.wait_until(lock, deadline_) == std::cv_status::timeout && armed_ && !stop_ &&
        sfb::SteadyClock::now() >= deadline_)
      expire(stage_, seconds_, limit_);
  }
}

void Watchdog::expire(const std::string& stage, double seconds, const std::string& limit) {
  fmt::print(stderr,
             "sfbd: rank {}: {} did not finish within {} s ({}): a peer is stopped or unreachable; ending the job\n",
             mpi_.rank(), stage, seconds, limit);
  std::fflush(stderr);
  if (stage == "MPI_Finalize") std::_Exit(kExitFailed);
  mpi_.abort(kExitFailed);
}

}  // namespace sfbd
