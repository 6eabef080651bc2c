#pragma once
// Connection set-up of the TCP transport (tcp.h), in two bootstrap rounds: the ranks all-gather
// where they live (network namespace) and rank 0's job key; each then listens only where its peers
// will come from (loopback for ranks in its namespace, its other addresses or comm.interface's for
// the rest) and all-gather those listeners; rank r connects to every rank below it while a thread
// accepts every rank above it, each connection through the handshake of tcp_handshake.h with its
// own deadline. Refused connections are logged once per address and named if set-up fails.
// Internal to comm/transport.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sfb/comm/transport/tcp.h"

namespace sfb::comm::tcp {

// An owned file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = o.release();
    }
    return *this;
  }
  int get() const { return fd_; }
  int release() {
    const int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset();
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

struct Mesh {
  std::vector<Fd> fds;              // [peer]: the connected socket (none for this rank)
  std::vector<std::string> routes;  // [peer]: "local -> remote" addresses, for logs and errors
};

// One listening socket a rank advertises (network byte order address, host order port).
struct Listener {
  uint32_t addr = 0;
  uint16_t port = 0;
};

// Collective over the bootstrap's ranks; throws CommError (naming the peer and the addresses tried)
// when a peer cannot be reached within opt.connect_timeout_s, InvalidArgument for a bad
// opt.interface.
Mesh connect_mesh(const Bootstrap& boot, const TcpOptions& opt);
// setsockopt TCP_CONGESTION: 0, or -1 with errno; and what a socket runs ("" when unreadable).
int set_congestion(int fd, const std::string& name);
std::string congestion_of(int fd);

// The IPv4 addresses (network byte order) this rank advertises: opt.interface's, or every up,
// non-loopback interface's. Also the source of comm.interface's error message.
std::vector<uint32_t> local_addresses(const std::string& interface);

// The listeners in a set-up message of the second round; nullopt for any other message (tests
// use it to aim intruders at a job's listeners).
std::optional<std::vector<Listener>> peek_endpoint(const Bytes& message);
// The second round's message for these listeners (tests put a proxy in a rank's place with it).
Bytes encode_endpoint(const std::vector<Listener>& listeners);

// "a.b.c.d:port".
std::string format_endpoint(uint32_t addr_be, uint16_t port);

}  // namespace sfb::comm::tcp
