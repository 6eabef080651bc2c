#pragma once
// SIGINT / SIGTERM: the handler only records the signal (async-signal-safe); the communication
// thread polls it and starts the stop protocol, so a signalled job still ends at a common clock,
// drains its queues and writes its model.
namespace sfb::runtime {

void install_stop_signal_handlers();
// The signal that asked to stop, or 0.
int stop_signal();
// For tests: pretend a signal arrived (0 clears).
void set_stop_signal(int sig);

}  // namespace sfb::runtime
