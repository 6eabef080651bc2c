#pragma once
// Wire format of the worker's control messages (kTagControl): the stop protocol's vocabulary
// (stop_protocol.h) and the replica-drift sketches (replica_drift.h). A 32-byte header -- the SF
// codec's 8-byte head (magic, version, kind = 2, comm/sf_codec.h), sender i32, type u32, value i64,
// n u32, reserved u32 -- and n int64 payload words (docs/formats.md). Decoding validates the header
// against the received length and the sender before the payload is read; every problem throws
// CommError naming the field.
#include <cstdint>
#include <span>
#include <vector>

#include "sfb/comm/transport.h"

namespace sfb::runtime {

inline constexpr size_t kControlHeaderBytes = 32;

enum class ControlType : uint32_t {
  kStopRequest = 1,  // any rank -> 0: a signal or error asks the job to stop
  kStopQuery = 2,    // 0 -> all: pause before the next clock, reply with committed clocks
  kStopReply = 3,    // all -> 0: value = clocks committed
  kStopAt = 4,       // 0 -> all: value = the common final clock count
  kDone = 5,         // all -> 0: payload = final statistics
  kFinal = 6,        // 0 -> all: every rank is done; leave the loop
  kDrift = 7,        // all -> 0: value = clock, payload = the replica-drift sketch (doubles' bits)
};

struct ControlMsg {
  ControlType type = ControlType::kStopRequest;
  int32_t sender = 0;
  int64_t value = 0;
  std::vector<int64_t> payload;
};

comm::Bytes encode_control(const ControlMsg& m);
ControlMsg decode_control(std::span<const std::byte> data, int expected_sender);

}  // namespace sfb::runtime
