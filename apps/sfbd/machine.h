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

// The machine's CPU time so far, from the "cpu" line of /proc/stat (clock ticks, every CPU): all
// of it, the idle part (idle and iowait: no CPU wanted), and the steal, the time the hypervisor of
// a virtual machine gave to other guests while this one had work. A run timed while a tenth of the
// CPU time it wanted was stolen ran slower by about that much, whatever the code did: timings taken
// on a virtual machine (benchmarks, profiles, the validation's runs) carry the share stolen while
// they ran.
struct CpuTicks {
  double total = 0, idle = 0, steal = 0;
  bool known = false;  // false: /proc/stat unreadable or not in the kernel's format
};
CpuTicks cpu_ticks();
// The ticks of one /proc/stat "cpu" line ("cpu  user nice system idle iowait irq softirq steal
// ..."; kernels before 2.6.11 have no steal field: steal 0).
CpuTicks parse_cpu_ticks(const std::string& line);
// Of the CPU time the machine wanted between two readings (its CPUs running anything, or stolen
// from it: all but idle), the share stolen, in [0, 1]; 0 when nothing was wanted; -1 when either
// reading is unknown, out of order, or no time passed. Not the share of all CPU time: steal accrues
// only while a CPU has work, so on a machine mostly idle that share hides how much a run lost (the
// validation's netns hosts kept 2 vCPUs 27-69% busy: 7.6% of all the time was 18% of the wanted).
double steal_share(const CpuTicks& before, const CpuTicks& after);

// The machine over a stretch of timed work (a training run, a profile): the steal's share of the
// CPU time wanted (steal_share). No reading of the cores' speed: a fixed-work canary timed on rank
// 0's CPU time at the start and the end (tried, 2026-12-05) spread 30% between repeats of one run
// whose times spread 11%, and dividing the validation's predictions by its runs-over-profile ratio
// took their median error from 10% to 17% (docs/compare-log.md): it read the moment's neighbours of
// its 10 ms (5 tries of 2 ms), not the run's.
class MachineWatch {
 public:
  // Reads /proc/stat; with `measure` false reads nothing and stolen_share() says unknown (the ranks that
  // write no summary).
  explicit MachineWatch(bool measure = true);
  // The steal's share since construction (steal_share), -1 when unknown.
  double stolen_share() const;

 private:
  bool measure_;
  CpuTicks ticks_;
};

}  // namespace sfb
