#pragma once
// All-gather of one byte string per rank, for the sharded scheme's minibatch rows and statistics
// (runtime/sharded_worker.h): every rank sends its bytes to every other rank directly (one step
// of latency, (P - 1) x its bytes out) and gets every rank's back in rank order, its own as given.
// Each message is an 8-byte head (the call's id, checked) and the bytes. Messages of later calls
// from faster ranks wait per source (SourceStash).
//
// Threads: the caller must be the only thread receiving the channel's tag.
#include <cstdint>
#include <span>
#include <vector>

#include "sfb/comm/source_stash.h"
#include "sfb/comm/transport.h"

namespace sfb::comm {

class BytesAllgather {
 public:
  // Over every rank of the channel's transport.
  explicit BytesAllgather(Channel& ch) : ch_(ch), stash_(ch) {}
  // Every rank's bytes of call `id` (increasing from call to call), in rank order: start, then
  // finish.
  std::vector<Bytes> run(Bytes mine, int64_t id);
  // Sends this rank's bytes of call `id` to every other rank and returns: the caller may compute
  // while they travel (the sharded engine sends a clock's samples during the clock before).
  void start(std::span<const std::byte> mine, int64_t id);
  // Waits for the other ranks' bytes of call `id`; `mine` (what start sent) takes this rank's place.
  std::vector<Bytes> finish(Bytes mine, int64_t id);

 private:
  Channel& ch_;
  SourceStash stash_;
};

}  // namespace sfb::comm
