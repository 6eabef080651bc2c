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
    std::string what;  // "W on rank 0 (W + 6 snapshots)"
    std::string keys;  // "model.dim, data.features"
    double bytes = 0;
  };
  std::vector<Part> parts;
  void add(std::string what, std::string keys, double bytes) {
    parts.push_back({std::move(what), std::move(keys), bytes});
  }
  double total() const;
  // Throws InvalidArgument listing the largest parts and their keys when the total exceeds
  // `available` (ignored when available < 0).
  void check(int64_t available, const std::string& subject) const;
};

std::string human_bytes(double bytes);

// The allocation policy of sfb's processes (sfbd, sfb-commbench), set first thing in main: one
// malloc arena, and large blocks served from the heap and kept after free, so the buffers of a
// clock's messages and updates (tens to hundreds of MiB, every clock) reuse memory instead of
// mapping fresh zero pages each time (glibc maps blocks over 32 MiB per allocation, and a thread's
// arena cannot hold them at all). Measured on the netns hosts at 1 Gbit/s: the page faults of a
// fresh 64 MiB receive buffer per message cost more CPU than the transfer (docs/performance.md).
// The price: memory freed during the run stays with the process until it exits.
void reuse_large_allocations();

}  // namespace sfb
