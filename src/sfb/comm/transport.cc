#include "sfb/comm/transport.h"

#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sfb/core/error.h"
#include "sfb/core/timer.h"

namespace sfb::comm {

void Transport::init_counters(int size) {
  counters_ = std::make_unique<AtomicCounters[]>(static_cast<size_t>(size));
  counters_size_ = size;
}

void Transport::send(int dst, Tag tag, std::span<const std::byte> data) {
  send_shared(dst, tag, std::make_shared<const Bytes>(data.begin(), data.end()));
}

void Transport::send_shared(int dst, Tag tag, SharedBytes data) {
  if (dst < 0 || dst >= size())
    throw CommError(fmt::format("rank {}: send to rank {} outside [0, {})", rank(), dst, size()));
  if (tag < 0 || tag > kMaxTag) throw CommError(fmt::format("rank {}: tag {} outside [0, {}]", rank(), tag, kMaxTag));
  const auto n = static_cast<int64_t>(data->size());
  do_send(dst, tag, std::move(data));
  counters_[dst].bytes_sent.fetch_add(n, std::memory_order_relaxed);
  counters_[dst].msgs_sent.fetch_add(1, std::memory_order_relaxed);
}

std::optional<Message> Transport::try_recv() {
  if (!stash_.empty()) {
    Message m = std::move(stash_.front());
    stash_.pop_front();
    return m;
  }
  auto m = poll();
  if (m) {
    counters_[m->src].bytes_received.fetch_add(static_cast<int64_t>(m->data.size()), std::memory_order_relaxed);
    counters_[m->src].msgs_received.fetch_add(1, std::memory_order_relaxed);
  }
  return m;
}

std::optional<Message> Transport::try_recv(Tag tag) {
  for (auto it = stash_.begin(); it != stash_.end(); ++it) {
    if (it->tag == tag) {
      Message m = std::move(*it);
      stash_.erase(it);
      return m;
    }
  }
  while (auto m = poll()) {
    counters_[m->src].bytes_received.fetch_add(static_cast<int64_t>(m->data.size()), std::memory_order_relaxed);
    counters_[m->src].msgs_received.fetch_add(1, std::memory_order_relaxed);
    if (m->tag == tag) return m;
    stash_.push_back(std::move(*m));
  }
  return std::nullopt;
}

Message Transport::recv(Tag tag) {
  const auto deadline = deadline_after(peer_timeout_s());
  Backoff backoff;
  for (;;) {
    if (auto m = try_recv(tag)) return std::move(*m);
    if (SteadyClock::now() > deadline)
      throw CommError(
          fmt::format("rank {}: no {} message for {} s (runtime.peer_timeout_s): a peer is stopped, lost "
                      "or far behind{}",
                      rank(), tag_name(tag), peer_timeout_s(), gone_peers()));
    if (!wait_for_message(std::min(deadline, SteadyClock::now() + std::chrono::milliseconds(50)))) backoff.idle();
  }
}

std::string Transport::gone_peers() const {
  std::vector<int> gone;
  for (int q = 0; q < size(); ++q)
    if (q != rank() && peer_gone(q)) gone.push_back(q);
  return gone.empty() ? std::string() : fmt::format(" (ranks {} have closed their connections)", fmt::join(gone, ", "));
}

const char* tag_name(Tag tag) {
  switch (tag) {
    case kTagSf: return "SF batch";
    case kTagControl: return "control";
    case kTagCollective: return "collective";
    case kTagPs: return "parameter-server";
    case kTagReduce: return "all-reduce";
    case kTagShardRows: return "sharded rows";
    case kTagShardStats: return "sharded statistics";
    case kTagShardW: return "sharded W";
    case kTagProbe: return "timing all-reduce";
    case kTagProbeSf: return "timing SF all-gather";
    case kTagReconcile: return "replica reconciliation";
    default: return "tagged";
  }
}

PeerCounters Transport::counters(int peer) const {
  SFB_ENFORCE(peer >= 0 && peer < counters_size_, "peer {}", peer);
  const auto& c = counters_[peer];
  return {c.bytes_sent.load(), c.msgs_sent.load(), c.bytes_received.load(), c.msgs_received.load()};
}

PeerCounters Transport::total_counters() const {
  PeerCounters t;
  for (int p = 0; p < counters_size_; ++p) {
    const auto c = counters(p);
    t.bytes_sent += c.bytes_sent;
    t.msgs_sent += c.msgs_sent;
    t.bytes_received += c.bytes_received;
    t.msgs_received += c.msgs_received;
  }
  return t;
}

}  // namespace sfb::comm
