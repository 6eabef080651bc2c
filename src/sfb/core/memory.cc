#include "sfb/core/memory.h"

#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

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

double MemoryEstimate::held() const {
  double h = 0;
  for (const auto& p : parts) h += p.held ? p.bytes : 0;
  return h;
}

std::string MemoryEstimate::describe() const {
  auto sorted = parts;
  std::stable_sort(sorted.begin(), sorted.end(), [](const Part& a, const Part& b) { return a.bytes > b.bytes; });
  std::vector<std::string> lines;
  for (const auto& p : sorted) lines.push_back(fmt::format("{} {}", human_bytes(p.bytes), p.what));
  return fmt::format("about {}: {}", human_bytes(total()), fmt::join(lines, ", "));
}

bool MemoryEstimate::fits(int64_t available) const {
  return available < 0 || total() - held() <= static_cast<double>(available);
}

void MemoryEstimate::check(int64_t available, const std::string& subject) const {
  if (fits(available)) return;
  const double needed = total() - held();
  auto sorted = parts;
  std::stable_sort(sorted.begin(), sorted.end(), [](const Part& a, const Part& b) { return a.bytes > b.bytes; });
  std::vector<std::string> lines;
  for (const auto& p : sorted)
    lines.push_back(fmt::format("{} {}{}", human_bytes(p.bytes), p.what, p.held ? "" : " (sized by " + p.keys + ")"));
  throw InvalidArgument(fmt::format(
      "{} needs about {} on this rank, {} of it still to allocate, but this rank can allocate {}: {}; reduce those "
      "keys or run on more memory",
      subject, human_bytes(total()), human_bytes(needed), human_bytes(static_cast<double>(available)),
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

void check_fits_in_memory(const std::string& path, const std::string& what, int64_t rows, int64_t cols) {
  const double bytes = 4.0 * static_cast<double>(rows) * static_cast<double>(cols);
  const int64_t available = available_memory_bytes(1);
  SFB_CHECK_DATA(available <= 0 || bytes <= static_cast<double>(available),
                 "{}: the {}'s {} x {} matrix is {}, more than this process can allocate ({}): not read", path, what,
                 rows, cols, human_bytes(bytes), human_bytes(static_cast<double>(available)));
}

int64_t peak_rss_bytes() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return -1;
  return static_cast<int64_t>(u.ru_maxrss) * 1024;  // kB on Linux
}

int64_t current_rss_bytes() {
  std::ifstream in("/proc/self/statm");
  int64_t size = 0, resident = -1;
  if (!(in >> size >> resident)) return -1;
  return resident * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

void reuse_large_allocations() {
  mallopt(M_ARENA_MAX, 1);
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

}  // namespace sfb
