#pragma once
// Time: a stopwatch, deadlines that cannot overflow, and the idle back-off of polling loops.
#include <algorithm>
#include <chrono>
#include <thread>

#include <time.h>

namespace sfb {

using SteadyClock = std::chrono::steady_clock;

// Monotonic stopwatch; seconds as double.
class Stopwatch {
 public:
  Stopwatch() : start_(SteadyClock::now()) {}
  void reset() { start_ = SteadyClock::now(); }
  double seconds() const { return std::chrono::duration<double>(SteadyClock::now() - start_).count(); }

 private:
  SteadyClock::time_point start_;
};

// Seconds on a CPU-time clock (a thread's, the process's, or another thread's from
// pthread_getcpuclockid); 0 when it cannot be read.
inline double cpu_clock_seconds(clockid_t clock) {
  timespec ts{};
  if (::clock_gettime(clock, &ts) != 0) return 0.0;
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// CPU seconds of the calling thread (CLOCK_THREAD_CPUTIME_ID), or of the whole process, every
// thread's (CLOCK_PROCESS_CPUTIME_ID).
inline double cpu_seconds(bool whole_process) {
  return cpu_clock_seconds(whole_process ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_THREAD_CPUTIME_ID);
}

// `seconds` from now, saturating: a duration the clock cannot represent (1e300 s, infinity) is the
// far future, never an overflow into the past; a negative or NaN one is now.
inline SteadyClock::time_point deadline_after(double seconds) {
  const auto now = SteadyClock::now();
  if (!(seconds > 0)) return now;
  const double room = std::chrono::duration<double>(SteadyClock::time_point::max() - now).count();
  if (seconds >= room * 0.5) return SteadyClock::time_point::max() - std::chrono::hours(24);
  return now + std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(seconds));
}

// The idle policy of a polling loop: yield for the first rounds, then sleep 10, 20, ... up to
// 200 microseconds, so an idle loop neither spins against the compute threads nor reacts late.
class Backoff {
 public:
  void idle() {
    if (++idle_ < 16)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(std::min(200, 10 * (idle_ - 15))));
  }
  void reset() { idle_ = 0; }

 private:
  int idle_ = 0;
};

}  // namespace sfb
