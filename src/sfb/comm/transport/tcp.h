#pragma once
// The TCP transport: one socket per pair of ranks and one I/O thread per rank that moves bytes on
// all of them at once (epoll), the way gloo's tcp transport and NCCL's socket proxy do.
//
//  * Full duplex, every peer at once: sends are queued per destination and written by the caller
//    (when the queue was empty) or by the I/O thread whenever the socket has room; the I/O thread
//    reads every socket as data arrives, straight into the message's final buffer. A large message
//    from one rank never holds up another rank's messages (each peer has its own stream), and a
//    rank's sends and receives go on together.
//  * Zero copy on the send side: send_shared() keeps the caller's buffer until the kernel has it,
//    so one serialised buffer goes to every peer.
//  * Bounded memory: when received messages nobody has polled yet exceed
//    TcpOptions::max_unpolled_bytes, the I/O thread stops starting new messages; TCP's flow
//    control then holds the senders back until the receiver catches up.
//  * Every wait bounded: connecting, recv() and flush() wait at most peer_timeout_s(); a peer whose
//    connection breaks mid-message is an error at the next poll, one that closed its connection
//    at a message boundary is named by peer_gone() and in the errors of sends to it.
//
// Frames on the wire: a 16-byte head (u32 magic "SFBT", i32 tag, u64 length) and the payload.
// Connection set-up (tcp_connect.h): the ranks exchange a 256-bit job key from getrandom and their
// listening addresses through a Bootstrap (MPI in sfbd, shared memory in tests); every rank
// listens only where its peers come from, rank r connects to every rank below it while accepting
// every rank above it concurrently, and each connection passes an HMAC-SHA256 challenge-response
// (tcp_handshake.h): the key never crosses the wire. Ranks in one network namespace talk over
// loopback; others over the first advertised address that answers, or over the interface
// TcpOptions::interface names.
//
// Threads: as Transport (send from any thread, poll from one thread at a time).
#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sfb/comm/transport.h"
#include "sfb/core/timer.h"

namespace sfb::comm {

// How the ranks of a job find each other before any socket exists: an all-gather of a few bytes.
struct Bootstrap {
  int rank = 0;
  int size = 1;
  // Every rank's bytes, in rank order (collective: every rank calls it once per use).
  std::function<std::vector<Bytes>(const Bytes& mine)> allgather;
};

struct TcpOptions {
  // "" picks the addresses itself (every up IPv4 interface but loopback); an interface name
  // ("eth0") or an IPv4 address restricts listening and advertising to that one (comm.interface).
  std::string interface;
  // Received messages not yet polled, in bytes, beyond which the I/O thread starts no new message.
  int64_t max_unpolled_bytes = int64_t{512} << 20;
  // The largest message a peer may announce (a corrupt or hostile head is refused, not allocated).
  int64_t max_message_bytes = int64_t{1} << 40;
  // Connecting to every peer and accepting every peer must end within this time.
  double connect_timeout_s = 120.0;
  // Mixed into the job key (comm.secret_file's bytes; "" for none): ranks without it cannot join.
  std::string secret;
  // The kernel's TCP congestion control for every connection ("cubic", "reno", ...; "" the
  // host's default): comm.tcp_congestion.
  std::string congestion;
};

class TcpTransport final : public Transport {
 public:
  // Collective over the bootstrap's ranks: listens, exchanges addresses, connects every pair.
  TcpTransport(const Bootstrap& boot, const TcpOptions& opt);
  // Flushes (bounded by the peer timeout), closes every connection after the peer closed its
  // side (bounded), and joins the I/O thread.
  ~TcpTransport() override;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void barrier() override;
  void flush() override;
  bool peer_gone(int peer) const override;
  bool wait_for_message(SteadyClock::time_point until) override;
  void wake() override;
  double own_threads_cpu_seconds() const override;
  // The local address each peer's connection uses, "127.0.0.1:port -> 10.77.0.2:port" (logs).
  std::string describe_peer(int peer) const;
  // The congestion control the kernel runs on the connection to `peer` ("cubic", "bbr", ...).
  std::string congestion_of(int peer) const;

 protected:
  void do_send(int dst, Tag tag, SharedBytes data) override;
  std::optional<Message> poll() override;

 private:
  struct Peer;
  void enqueue(int dst, Tag tag, SharedBytes data);
  void io_loop();
  void wake_io();
  void on_readable(Peer& p, bool hangup);
  void on_writable(Peer& p);
  bool refill(Peer& p, bool& eof);
  bool start_frame(Peer& p);
  void complete(Peer& p);
  void write_some_locked(Peer& p);
  void arm_locked(Peer& p);
  void fail_peer_locked(Peer& p, const std::string& why);
  void peer_closed(Peer& p);
  void deliver(Message m);
  bool pause_if_full(Peer& p);
  void resume_reading();
  void read_inline();
  bool nothing_delivered() const;
  void close_gracefully();
  std::vector<int> pending_destinations();

  int rank_ = 0, size_ = 1;
  TcpOptions opt_;
  std::vector<std::unique_ptr<Peer>> peers_;  // [rank_] is null
  int epoll_fd_ = -1, wake_fd_ = -1;

  // Received messages, in arrival order, for poll().
  mutable std::mutex rq_mu_;
  std::condition_variable rq_cv_;
  std::deque<Message> rq_;
  int64_t rq_bytes_ = 0;
  bool reading_paused_ = false;
  std::atomic<int64_t> limit_{0};  // opt_.max_unpolled_bytes; unlimited while closing
  std::string error_;              // the first broken connection; poll() throws it
  bool woken_ = false;             // wake(): the next wait_for_message() returns at once

  // Sends not yet handed to the kernel, for flush().
  std::mutex out_mu_;
  std::condition_variable out_cv_;
  int64_t queued_sends_ = 0;

  // The barrier: tokens of each generation received so far.
  std::mutex bar_mu_;
  std::condition_variable bar_cv_;
  std::vector<int64_t> bar_seen_;  // per peer: the last generation it reached
  int64_t bar_gen_ = 0;

  std::atomic<bool> stop_{false};
  std::thread io_;
  clockid_t io_clock_{};  // io_'s CPU clock (own_threads_cpu_seconds); io_clock_ok_ once read
  bool io_clock_ok_ = false;
};

std::unique_ptr<Transport> make_tcp_transport(const Bootstrap& boot, const TcpOptions& opt);
// Throws InvalidArgument naming comm.interface and this host's interfaces when `interface` is
// neither "" nor an up interface or IPv4 address here.
void check_interface(const std::string& interface);
// Throws InvalidArgument naming comm.tcp_congestion, the value and what this kernel offers when
// `name` is neither "" nor a congestion control a socket here may select (a name the kernel does
// not have, or one a namespace does not allow).
void check_congestion(const std::string& name);
// comm.secret_file's bytes; InvalidArgument naming the key and path when it is missing, not a
// regular file, shorter than 16 bytes, larger than 64 KiB or readable by group or others.
std::string read_secret_file(const std::string& path);

}  // namespace sfb::comm
