#pragma once
// What this process may use of the machine it runs on, read from the kernel.
#include <string>

namespace sfb {

// The CPU time this process may use, in cores: its hardware threads, or less where a cgroup CPU
// quota is set on its group or an ancestor (v1 cpu.cfs_quota_us / cpu.cfs_period_us, v2 cpu.max;
// scripts/netns-cluster.sh --cpus sets one per emulated host). `group` is the cgroup holding the
// tightest quota ("" without one): processes in one group share its budget.
struct CpuBudget {
  double cores = 1;
  std::string group;
};
CpuBudget cpu_budget();

}  // namespace sfb
