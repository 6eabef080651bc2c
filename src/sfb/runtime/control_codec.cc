#include "sfb/runtime/control_codec.h"

#include <fmt/format.h>

#include "sfb/comm/sf_codec.h"
#include "sfb/core/bytes.h"
#include "sfb/core/error.h"

namespace sfb::runtime {

Bytes encode_control(const ControlMsg& m) {
  ByteWriter w(kControlHeaderBytes + m.payload.size() * 8);
  comm::put_wire_head(w, comm::kKindControl);
  w.put<int32_t>(m.sender);
  w.put<uint32_t>(static_cast<uint32_t>(m.type));
  w.put<int64_t>(m.value);
  w.put<uint32_t>(static_cast<uint32_t>(m.payload.size()));
  w.put<uint32_t>(0);
  w.put_array(std::span<const int64_t>(m.payload));
  return w.take();
}

ControlMsg decode_control(std::span<const std::byte> d, int expected_sender) {
  ByteReader r(d, "control message", ByteReader::Source::kMessage);
  comm::check_wire_head(r, kControlHeaderBytes, comm::kKindControl);
  ControlMsg m;
  m.sender = r.get<int32_t>("sender");
  const auto type = r.get<uint32_t>("type");
  m.value = r.get<int64_t>("value");
  const auto n = r.get<uint32_t>("payload words");
  r.skip(4, "reserved");
  if (expected_sender >= 0 && m.sender != expected_sender)
    throw CommError(
        fmt::format("control message: header names sender {} but it came from rank {}", m.sender, expected_sender));
  if (type < 1 || type > 7)
    throw CommError(fmt::format("control message from rank {}: unknown type {}", m.sender, type));
  m.type = static_cast<ControlType>(type);
  if (d.size() != kControlHeaderBytes + size_t{n} * 8)
    throw CommError(
        fmt::format("control message from rank {}: {} bytes, header says {} payload words", m.sender, d.size(), n));
  m.payload.resize(n);
  r.get_array(m.payload.data(), n, "payload");
  return m;
}

}  // namespace sfb::runtime
