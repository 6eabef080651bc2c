#include "sfb/comm/allreduce_chunks.h"

#include <fmt/format.h>

#include "sfb/core/bytes.h"
#include "sfb/core/error.h"

namespace sfb::comm {

Bytes encode_chunk(const ChunkHead& head, std::span<const float> values) {
  ByteWriter w(ChunkHead::kBytes + values.size_bytes());
  w.put<int64_t>(head.id);
  w.put<int32_t>(head.step);
  w.put<int32_t>(head.chunk);
  w.put_array(values);
  return w.take();
}

std::span<const float> expect_chunk(const Message& m, const ChunkHead& want, int64_t count, const std::string& who) {
  const size_t bytes = ChunkHead::kBytes + static_cast<size_t>(count) * sizeof(float);
  ChunkHead got{-1, -1, -1};
  if (m.data.size() >= ChunkHead::kBytes) {
    ByteReader r(m.data, who, ByteReader::Source::kMessage);
    got.id = r.get<int64_t>("id");
    got.step = r.get<int32_t>("step");
    got.chunk = r.get<int32_t>("chunk");
  }
  if (m.data.size() != bytes || !(got == want))
    throw CommError(
        fmt::format("{}: chunk from rank {} ({} bytes, id {}, step {}, chunk {}); expected {} bytes, id {}, "
                    "step {}, chunk {}",
                    who, m.src, m.data.size(), got.id, got.step, got.chunk, bytes, want.id, want.step, want.chunk));
  return {reinterpret_cast<const float*>(m.data.data() + ChunkHead::kBytes), static_cast<size_t>(count)};
}

}  // namespace sfb::comm
