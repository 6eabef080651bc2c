#include "sfbd/machine.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace sfb {
namespace {

TEST(CpuTicks, ParsesTheCpuLineWithItsSteal) {
  // user nice system idle iowait irq softirq steal guest guest_nice: guest is already in user.
  const auto t = parse_cpu_ticks("cpu  1000 10 300 5000 40 0 50 600 70 0");
  ASSERT_TRUE(t.known);
  EXPECT_DOUBLE_EQ(t.total, 1000 + 10 + 300 + 5000 + 40 + 0 + 50 + 600);
  EXPECT_DOUBLE_EQ(t.idle, 5000 + 40);
  EXPECT_DOUBLE_EQ(t.steal, 600);
  // A kernel without the steal field (before 2.6.11): known, nothing stolen.
  const auto old = parse_cpu_ticks("cpu 10 0 5 100");
  ASSERT_TRUE(old.known);
  EXPECT_DOUBLE_EQ(old.total, 115);
  EXPECT_DOUBLE_EQ(old.idle, 100);
  EXPECT_DOUBLE_EQ(old.steal, 0);
  // Not the machine's line, too short, or not numbers: unknown.
  for (const char* bad : {"cpu0 1 2 3 4 5 6 7 8", "cpu 1 2", "intr 5 6 7 8", "", "cpu a b c d", "cpu 1 2 -3 4"})
    EXPECT_FALSE(parse_cpu_ticks(bad).known) << bad;
}

TEST(CpuTicks, StealShareIsTheStolenPartOfTheTimeTheMachineWanted) {
  const auto a = parse_cpu_ticks("cpu 1000 0 0 1000 0 0 0 100");
  // 1000 ticks later: 700 user, 100 system, 100 idle, 100 stolen: 100 of the 900 wanted.
  const auto b = parse_cpu_ticks("cpu 1700 0 100 1100 0 0 0 200");
  EXPECT_DOUBLE_EQ(steal_share(a, b), 100.0 / 900);
  // Mostly idle: the same 100 stolen of 200 wanted (idle and iowait 800) is half, not a tenth.
  EXPECT_DOUBLE_EQ(steal_share(a, parse_cpu_ticks("cpu 1100 0 0 1700 100 0 0 200")), 0.5);
  EXPECT_EQ(steal_share(a, parse_cpu_ticks("cpu 1000 0 0 2000 0 0 0 100")), 0);  // all idle
  EXPECT_EQ(steal_share(a, parse_cpu_ticks("cpu 900 0 0 2000 0 0 0 200")), -1);  // a counter went back
  EXPECT_EQ(steal_share(a, a), -1);                                              // no time passed
  EXPECT_EQ(steal_share(a, CpuTicks{}), -1);
  EXPECT_EQ(steal_share(b, a), -1);  // readings out of order
  // This machine's /proc/stat reads (Linux): a share in [0, 1] across a moment of work.
  const auto before = cpu_ticks();
  ASSERT_TRUE(before.known);
  volatile double x = 0;
  for (int i = 0; i < 30'000'000; ++i) x = x + 1e-9 * i;
  const double share = steal_share(before, cpu_ticks());
  if (share != -1) {
    EXPECT_GE(share, 0);
    EXPECT_LE(share, 1);
  }
}

// A watch over a stretch of work has a steal share in [0, 1], or unknown where /proc/stat has none;
// one that measures nothing (a rank that writes no summary) says unknown.
TEST(MachineWatch, AStretchOfWorkHasAStealShareOrUnknown) {
  const MachineWatch watch;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // several of /proc/stat's 10 ms ticks
  const double share = watch.stolen_share();
  if (cpu_ticks().known) {  // Linux: the watch read it at both ends
    EXPECT_GE(share, 0);
    EXPECT_LE(share, 1);
  } else {
    EXPECT_EQ(share, -1);
  }
  EXPECT_EQ(MachineWatch(false).stolen_share(), -1);
}

}  // namespace
}  // namespace sfb
