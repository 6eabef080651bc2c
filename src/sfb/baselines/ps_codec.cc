#include "sfb/baselines/ps_codec.h"

#include <fmt/format.h>

#include "sfb/core/bytes.h"
#include "sfb/core/error.h"

namespace sfb::baselines {

comm::Bytes encode_ps(PsType type, int64_t clock, int64_t row_begin, int64_t rows, int64_t cols, const float* payload) {
  const int64_t r = payload ? rows : 0, c = payload ? cols : 0;
  const auto floats = static_cast<size_t>(r * c);
  ByteWriter w(kPsHeaderBytes + floats * sizeof(float));
  w.put<uint32_t>(kPsMagic);
  w.put<uint32_t>(static_cast<uint32_t>(type));
  w.put<int64_t>(clock);
  w.put<int64_t>(row_begin);
  w.put<int64_t>(r);
  w.put<int64_t>(c);
  w.put<int64_t>(0);
  w.put_array(payload, floats);
  return w.take();
}

PsHeader decode_ps_header(const comm::Bytes& data, int from) {
  const std::string what = fmt::format("parameter-server message from rank {}", from);
  if (data.size() < kPsHeaderBytes)
    throw CommError(fmt::format("{}: {} bytes, shorter than its 48-byte header", what, data.size()));
  ByteReader r(data, what, ByteReader::Source::kMessage);
  const auto magic = r.get<uint32_t>("magic");
  if (magic != kPsMagic) throw CommError(fmt::format("{}: bad magic {:#x}", what, magic));
  const auto t = r.get<uint32_t>("type");
  if (t < 1 || t > 6) throw CommError(fmt::format("{}: unknown type {}", what, t));
  PsHeader h;
  h.type = static_cast<PsType>(t);
  h.clock = r.get<int64_t>("clock");
  h.row_begin = r.get<int64_t>("row_begin");
  h.rows = r.get<int64_t>("rows");
  h.cols = r.get<int64_t>("cols");
  r.skip(8, "reserved");
  if (h.rows < 0 || h.cols < 0 || h.row_begin < 0 || h.clock < 0 ||
      (h.cols > 0 && h.rows > (int64_t{1} << 40) / h.cols))
    throw CommError(
        fmt::format("{}: bad shape rows {} cols {} at row {} clock {}", what, h.rows, h.cols, h.row_begin, h.clock));
  const auto want = kPsHeaderBytes + static_cast<size_t>(h.rows * h.cols) * sizeof(float);
  if (data.size() != want) throw CommError(fmt::format("{}: {} bytes, its header says {}", what, data.size(), want));
  return h;
}

}  // namespace sfb::baselines
