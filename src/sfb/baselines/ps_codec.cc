#include "sfb/baselines/ps_codec.h"

#include <cstring>

#include <fmt/format.h>

#include "sfb/core/error.h"

namespace sfb::baselines {

comm::Bytes encode_ps(PsType type, int64_t clock, int64_t row_begin, int64_t rows, int64_t cols, const float* payload) {
  PsHeader h;
  h.type = type;
  h.clock = clock;
  h.row_begin = row_begin;
  h.rows = payload ? rows : 0;
  h.cols = payload ? cols : 0;
  const auto bytes = static_cast<size_t>(h.rows * h.cols) * sizeof(float);
  comm::Bytes out(sizeof(h) + bytes);
  std::memcpy(out.data(), &h, sizeof(h));
  if (bytes > 0) std::memcpy(out.data() + sizeof(h), payload, bytes);
  return out;
}

PsHeader decode_ps_header(const comm::Bytes& data, int from) {
  PsHeader h;
  if (data.size() < sizeof(h))
    throw CommError(fmt::format("parameter-server message from rank {}: {} bytes, shorter than its 48-byte header",
                                from, data.size()));
  std::memcpy(&h, data.data(), sizeof(h));
  if (h.magic != PsHeader{}.magic)
    throw CommError(fmt::format("parameter-server message from rank {}: bad magic {:#x}", from, h.magic));
  const auto t = static_cast<uint32_t>(h.type);
  if (t < 1 || t > 4) throw CommError(fmt::format("parameter-server message from rank {}: unknown type {}", from, t));
  if (h.rows < 0 || h.cols < 0 || h.row_begin < 0 || h.clock < 0 || (h.cols > 0 && h.rows > (int64_t{1} << 40) / h.cols))
    throw CommError(fmt::format("parameter-server message from rank {}: bad shape rows {} cols {} at row {} clock {}",
                                from, h.rows, h.cols, h.row_begin, h.clock));
  const auto want = sizeof(h) + static_cast<size_t>(h.rows * h.cols) * sizeof(float);
  if (data.size() != want)
    throw CommError(fmt::format("parameter-server message from rank {}: {} bytes, its header says {}", from,
                                data.size(), want));
  return h;
}

}  // namespace sfb::baselines
