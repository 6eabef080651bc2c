#include "sfb/core/memory.h"

#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sfb/core/error.h"

namespace sfb {
namespace {

// A "<key>: <number> kB" line of a /proc file, in bytes; -1 when absent.
int64_t proc_kb(const char* file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) != 0) continue;
    std::istringstream ss(line.substr(key.size() + 1));
    int64_t kb = -1;
    ss >> kb;
    return kb >= 0 ? kb * 1024 : -1;
  }
  return -1;
}

}  // namespace

int64_t available_memory_bytes(int ranks_on_host) {
  int64_t avail = -1;
  if (const int64_t host = proc_kb("/proc/meminfo", "MemAvailable"); host >= 0)
    avail = host / std::max(1, ranks_on_host);
  rlimit lim{};
  if (getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    const int64_t used = std::max<int64_t>(0, proc_kb("/proc/self/status", "VmSize"));
    const int64_t left = std::max<int64_t>(0, static_cast<int64_t>(lim.rlim_cur) - used);
    avail = avail < 0 ? left : std::min(avail, left);
  }
  return avail;
}

double MemoryEstimate::total() const {
  double t = 0;
  for (const auto& p : parts) t += p.bytes;
  return t;
}

void MemoryEstimate::check(int64_t available, const std::string& subject) const {
  if (available < 0 || total() <= static_cast<double>(available)) return;
  auto sorted = parts;
  std::sort(sorted.begin(), sorted.end(), [](const Part& a, const Part& b) { return a.bytes > b.bytes; });
  std::vector<std::string> lines;
  for (size_t i = 0; i < sorted.size() && i < 3; ++i)
    lines.push_back(fmt::format("{} {} (sized by {})", human_bytes(sorted[i].bytes), sorted[i].what, sorted[i].keys));
  throw InvalidArgument(fmt::format("{} needs about {} per rank but this rank can allocate {}: {}; reduce those keys",
                                    subject, human_bytes(total()), human_bytes(static_cast<double>(available)),
                                    fmt::join(lines, "; ")));
}

std::string human_bytes(double bytes) {
  const char* unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024 && u < 6) {
    bytes /= 1024;
    ++u;
  }
  return fmt::format("{:.1f} {}", bytes, unit[u]);
}

void reuse_large_allocations() {
  mallopt(M_ARENA_MAX, 1);
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

}  // namespace sfb
