#pragma once
// What a job may allocate, and estimates checked against it before anything big is allocated: a
// job whose W, minibatches or queues cannot fit is refused at start-up naming the config keys
// that size it, instead of being OOM-killed, or dying of a bare std::bad_alloc, after minutes.
#include <cstdint>
#include <string>
#include <vector>

namespace sfb {

// Bytes this process may still allocate: the smaller of its share of the host's available memory
// (MemAvailable / ranks_on_host) and what its address-space limit (ulimit -v) leaves. -1 when
// neither is known.
int64_t available_memory_bytes(int ranks_on_host);

// A sum of named parts, each sized by config keys.
struct MemoryEstimate {
  struct Part {
    std::string what;  // "W itself (1000 x 784 floats)"
    std::string keys;  // "model.dim, data.features"
    double bytes = 0;
    bool held = false;  // already allocated (measured): not checked against what is available
  };
  std::vector<Part> parts;
  void add(std::string what, std::string keys, double bytes, bool held = false) {
    parts.push_back({std::move(what), std::move(keys), bytes, held});
  }
  double total() const;
  // Of the total, what the process already held when it was estimated (the held parts).
  double held() const;
  // The parts, largest first, in plain words: "about 4.1 GiB: 3.7 GiB W itself (...), ...".
  std::string describe() const;
  // Whether what is still to be allocated (total() - held()) fits in `available` (any amount fits
  // when available < 0: unknown).
  bool fits(int64_t available) const;
  // Throws InvalidArgument listing every part and the keys that size it when it does not fit.
  void check(int64_t available, const std::string& subject) const;
};

std::string human_bytes(double bytes);

// Before a rows x cols float matrix read from file `path` (a `what`) is allocated whole: throws
// DataError naming the file, its size and what this process can allocate when it does not fit.
void check_fits_in_memory(const std::string& path, const std::string& what, int64_t rows, int64_t cols);

// This process's peak resident set so far (getrusage ru_maxrss) and its resident set now
// (/proc/self/statm), in bytes; -1 where unknown.
int64_t peak_rss_bytes();
int64_t current_rss_bytes();

// The allocation policy of sfb's processes (sfbd, sfb-commbench), set first thing in main: one
// malloc arena, and large blocks served from the heap and kept after free, so the buffers of a
// clock's messages and updates (tens to hundreds of MiB, every clock) reuse memory instead of
// mapping fresh zero pages each time (glibc maps blocks over 32 MiB per allocation, and a thread's
// arena cannot hold them at all). Measured on the netns hosts at 1 Gbit/s: the page faults of a
// fresh 64 MiB receive buffer per message cost more CPU than the transfer (docs/performance.md).
// The price: memory freed during the run stays with the process until it exits.
void reuse_large_allocations();

}  // namespace sfb
