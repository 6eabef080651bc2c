#include "machine.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace sfb {
namespace {

// The first line of a small kernel file ("" when it cannot be read: procfs and cgroupfs report
// size 0, so read as a stream).
std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// `path` and its ancestors up to the root: "/a/b" gives "/a/b", "/a", "".
std::vector<std::string> up_from(std::string path) {
  std::vector<std::string> out;
  while (!path.empty() && path != "/") {
    out.push_back(path);
    path = path.substr(0, path.rfind('/'));
  }
  out.emplace_back("");
  return out;
}

// Cores a quota of `quota` per `period` microseconds gives (0: none set or unreadable).
double quota_cores(const std::string& quota, const std::string& period) {
  try {
    const double q = std::stod(quota), p = std::stod(period);
    return q > 0 && p > 0 ? q / p : 0.0;
  } catch (const std::exception&) {
    return 0.0;
  }
}

// The cgroup path of `controller` in /proc/self/cgroup (v1: "N:a,b:path"; v2: "0::path").
std::string cgroup_path(const std::string& controller) {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    const auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::stringstream names(line.substr(a + 1, b - a - 1));
    for (std::string n; std::getline(names, n, ',');)
      if (n == controller) return line.substr(b + 1);
    if (controller.empty() && a + 1 == b) return line.substr(b + 1);
  }
  return "";
}

}  // namespace

CpuBudget cpu_budget() {
  CpuBudget b;
  b.cores = std::max(1u, std::thread::hardware_concurrency());
  const auto tighten = [&b](double cores, const std::string& group) {
    if (cores > 0 && cores < b.cores) b = {cores, group};
  };
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists("/sys/fs/cgroup/cgroup.controllers", ec)) {  // cgroup v2 alone
    for (const auto& g : up_from(cgroup_path(""))) {
      std::istringstream max(first_line("/sys/fs/cgroup" + g + "/cpu.max"));
      std::string quota, period;
      max >> quota >> period;
      if (quota != "max") tighten(quota_cores(quota, period), g);
    }
    return b;
  }
  for (const char* mount : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"}) {
    if (!fs::exists(std::string(mount) + "/cpu.cfs_quota_us", ec)) continue;
    for (const auto& g : up_from(cgroup_path("cpu")))
      tighten(quota_cores(first_line(mount + g + "/cpu.cfs_quota_us"), first_line(mount + g + "/cpu.cfs_period_us")),
              g);
    break;
  }
  return b;
}

CpuTicks parse_cpu_ticks(const std::string& line) {
  std::istringstream in(line);
  std::string name;
  in >> name;
  CpuTicks t;
  if (name != "cpu") return t;
  // user nice system idle iowait irq softirq steal guest guest_nice: guest time is already in
  // user and nice, so the total is the first eight.
  double v = 0;
  int fields = 0;
  for (; fields < 8 && in >> v; ++fields) {
    if (v < 0) return {};
    t.total += v;
    if (fields == 3 || fields == 4) t.idle += v;
    if (fields == 7) t.steal = v;
  }
  t.known = fields >= 4;
  return t.known ? t : CpuTicks{};
}

CpuTicks cpu_ticks() { return parse_cpu_ticks(first_line("/proc/stat")); }

double steal_share(const CpuTicks& before, const CpuTicks& after) {
  const double total = after.total - before.total, steal = after.steal - before.steal;
  const double wanted = total - (after.idle - before.idle);
  if (!before.known || !after.known || !(total > 0) || steal < 0 || wanted < steal) return -1;
  return wanted > 0 ? std::min(1.0, steal / wanted) : 0.0;
}

MachineWatch::MachineWatch(bool measure) : measure_(measure), ticks_(measure ? cpu_ticks() : CpuTicks{}) {}

double MachineWatch::stolen_share() const { return measure_ ? steal_share(ticks_, cpu_ticks()) : -1.0; }

}  // namespace sfb
