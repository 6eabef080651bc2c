#include "sfb/runtime/signals.h"

#include <atomic>
#include <csignal>

namespace sfb::runtime {
namespace {
std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);
extern "C" void on_signal(int sig) { g_signal.store(sig, std::memory_order_relaxed); }
}  // namespace

void install_stop_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int stop_signal() { return g_signal.load(std::memory_order_relaxed); }
void set_stop_signal(int sig) { g_signal.store(sig, std::memory_order_relaxed); }

}  // namespace sfb::runtime
