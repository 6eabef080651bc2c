#include "sfb/comm/sf_codec.h"

#include <fmt/format.h>

#include "sfb/core/bytes.h"
#include "sfb/core/error.h"

namespace sfb::comm {

// Magic, version and kind: the first 8 bytes of every message of this codec.
void check_wire_head(ByteReader& r, size_t header, uint16_t kind) {
  if (r.remaining() < header)
    r.fail(fmt::format("{}: message of {} bytes is shorter than the {}-byte header", r.what(), r.remaining(), header));
  const auto magic = r.get<uint32_t>("magic");
  if (magic != kWireMagic)
    r.fail(fmt::format("{}: bad magic 0x{:08x} (expected 0x{:08x})", r.what(), magic, kWireMagic));
  const auto version = r.get<uint16_t>("version");
  if (version != kWireVersion)
    r.fail(fmt::format("{}: wire version {} is not supported (expected {}); are all ranks the same sfbd build?",
                       r.what(), version, kWireVersion));
  const auto k = r.get<uint16_t>("kind");
  if (k != kind) r.fail(fmt::format("{}: message kind {} where kind {} was expected", r.what(), k, kind));
}

void put_wire_head(ByteWriter& w, uint16_t kind) {
  w.put<uint32_t>(kWireMagic);
  w.put<uint16_t>(kWireVersion);
  w.put<uint16_t>(kind);
}

int64_t encoded_sf_bytes(const SfBatch& b) {
  int64_t payload = int64_t{b.count} * b.J * 4;
  if (b.sparse_v)
    payload += (int64_t{b.count} + 1) * 8 + static_cast<int64_t>(b.v_index.size()) * 8;
  else
    payload += int64_t{b.count} * b.D * 4;
  return static_cast<int64_t>(kSfHeaderBytes) + payload;
}

namespace {

// Appends b's encoding (encoded_sf_bytes(b) bytes) to w.
void put_sf_batch(ByteWriter& w, const SfBatch& b) {
  SFB_ENFORCE(b.u.rows() == b.count && b.u.cols() == b.J, "u is {}x{}, batch {}x{}", b.u.rows(), b.u.cols(), b.count,
              b.J);
  if (b.sparse_v) {
    SFB_ENFORCE(b.v_row_ptr.size() == static_cast<size_t>(b.count) + 1 && b.v_index.size() == b.v_value.size(),
                "sparse v of batch is inconsistent");
  } else {
    SFB_ENFORCE(b.v.rows() == b.count && b.v.cols() == b.D, "v is {}x{}, batch {}x{}", b.v.rows(), b.v.cols(), b.count,
                b.D);
  }
  const int64_t total = encoded_sf_bytes(b);
  const size_t start = w.size();
  put_wire_head(w, kKindSfBatch);
  w.put<int32_t>(b.sender);
  w.put<int32_t>(b.count);
  w.put<int64_t>(b.clock);
  w.put<int32_t>(b.J);
  w.put<int32_t>(b.D);
  w.put<uint32_t>(b.sparse_v ? 1u : 0u);
  w.put<uint32_t>(0);
  w.put<int64_t>(b.sparse_v ? static_cast<int64_t>(b.v_index.size()) : 0);
  w.put<int64_t>(total - static_cast<int64_t>(kSfHeaderBytes));
  w.put_array(b.u.data(), static_cast<size_t>(b.u.size()));
  if (b.sparse_v) {
    w.put_array(std::span<const int64_t>(b.v_row_ptr));
    w.put_array(std::span<const int32_t>(b.v_index));
    w.put_array(std::span<const float>(b.v_value));
  } else {
    w.put_array(b.v.data(), static_cast<size_t>(b.v.size()));
  }
  SFB_ENFORCE(static_cast<int64_t>(w.size() - start) == total, "encoded {} bytes, expected {}", w.size() - start,
              total);
}

}  // namespace

Bytes encode_sf_batch(const SfBatch& b) {
  ByteWriter w(static_cast<size_t>(encoded_sf_bytes(b)));
  put_sf_batch(w, b);
  return w.take();
}

SfBatch decode_sf_batch(std::span<const std::byte> d, const SfExpect& ex) {
  ByteReader r(d, "SF batch", ByteReader::Source::kMessage);
  check_wire_head(r, kSfHeaderBytes, kKindSfBatch);
  SfBatch b;
  b.sender = r.get<int32_t>("sender");
  b.count = r.get<int32_t>("count");
  b.clock = r.get<int64_t>("clock");
  b.J = r.get<int32_t>("J");
  b.D = r.get<int32_t>("D");
  const auto flags = r.get<uint32_t>("flags");
  r.skip(4, "reserved");
  const auto nnz = r.get<int64_t>("nnz");
  const auto payload = r.get<int64_t>("payload bytes");
  const auto where = fmt::format("SF batch from rank {} (clock {})", b.sender, b.clock);
  if (ex.sender >= 0 && b.sender != ex.sender)
    throw CommError(fmt::format("{}: header names sender {} but it came from rank {}", where, b.sender, ex.sender));
  if (b.clock < 0) throw CommError(fmt::format("{}: negative clock", where));
  if (b.count < 0 || b.count > ex.max_count)
    throw CommError(fmt::format("{}: count {} outside [0, {}]", where, b.count, ex.max_count));
  if (b.J <= 0 || (ex.J >= 0 && b.J != ex.J))
    throw CommError(fmt::format("{}: J = {}, this worker has J = {}", where, b.J, ex.J));
  if (b.D <= 0 || (ex.D >= 0 && b.D != ex.D))
    throw CommError(fmt::format("{}: D = {}, this worker has D = {}", where, b.D, ex.D));
  if ((flags & ~1u) != 0) throw CommError(fmt::format("{}: unknown flags 0x{:x}", where, flags));
  b.sparse_v = (flags & 1u) != 0;
  if (b.sparse_v ? (nnz < 0 || nnz > int64_t{b.count} * b.D) : nnz != 0)
    throw CommError(fmt::format("{}: nnz {} is impossible for {} rows of D = {}", where, nnz, b.count, b.D));
  int64_t expected = int64_t{b.count} * b.J * 4;
  expected += b.sparse_v ? (int64_t{b.count} + 1) * 8 + nnz * 8 : int64_t{b.count} * b.D * 4;
  if (payload != expected)
    throw CommError(fmt::format("{}: header says {} payload bytes, its shape needs {}", where, payload, expected));
  if (static_cast<int64_t>(r.remaining()) != payload)
    throw CommError(fmt::format("{}: received {} payload bytes, header says {}", where, r.remaining(), payload));
  b.u.resize(b.count, b.J);
  r.get_array(b.u.data(), static_cast<size_t>(b.u.size()), "u");
  if (!b.sparse_v) {
    b.v.resize(b.count, b.D);
    r.get_array(b.v.data(), static_cast<size_t>(b.v.size()), "v");
    return b;
  }
  b.v_row_ptr.resize(static_cast<size_t>(b.count) + 1);
  r.get_array(b.v_row_ptr.data(), b.v_row_ptr.size(), "v row pointers");
  b.v_index.resize(static_cast<size_t>(nnz));
  r.get_array(b.v_index.data(), b.v_index.size(), "v indices");
  b.v_value.resize(static_cast<size_t>(nnz));
  r.get_array(b.v_value.data(), b.v_value.size(), "v values");
  if (b.v_row_ptr.front() != 0 || b.v_row_ptr.back() != nnz)
    throw CommError(fmt::format("{}: sparse row pointers span [{}, {}], expected [0, {}]", where, b.v_row_ptr.front(),
                                b.v_row_ptr.back(), nnz));
  for (int32_t i = 0; i < b.count; ++i) {
    if (b.v_row_ptr[i + 1] < b.v_row_ptr[i])
      throw CommError(fmt::format("{}: sparse row pointer {} decreases", where, i + 1));
  }
  for (int32_t idx : b.v_index) {
    if (idx < 0 || idx >= b.D) throw CommError(fmt::format("{}: sparse index {} outside [0, {})", where, idx, b.D));
  }
  return b;
}

Bytes encode_sf_batches(std::span<const SfBatch> batches) {
  int64_t total = 0;
  for (const SfBatch& b : batches) total += encoded_sf_bytes(b);
  ByteWriter w(static_cast<size_t>(total));
  for (const SfBatch& b : batches) put_sf_batch(w, b);
  return w.take();
}

std::vector<SfBatch> decode_sf_batches(std::span<const std::byte> d, std::span<const SfExpect> expect) {
  std::vector<SfBatch> out;
  size_t at = 0;
  for (size_t i = 0; i < expect.size(); ++i) {
    const size_t left = d.size() - at;
    if (left < kSfHeaderBytes)
      throw CommError(fmt::format("message of {} SF batches: batch {} starts at byte {} but only {} bytes are left",
                                  expect.size(), i, at, left));
    ByteReader r(d.subspan(at + 48, 8), "SF batch header", ByteReader::Source::kMessage);
    const auto payload = r.get<int64_t>("payload bytes");
    if (payload < 0 || static_cast<uint64_t>(payload) > left - kSfHeaderBytes)
      throw CommError(fmt::format("message of {} SF batches: batch {} says {} payload bytes, {} are left",
                                  expect.size(), i, payload, left - kSfHeaderBytes));
    const size_t extent = kSfHeaderBytes + static_cast<size_t>(payload);
    out.push_back(decode_sf_batch(d.subspan(at, extent), expect[i]));
    at += extent;
  }
  if (at != d.size())
    throw CommError(
        fmt::format("message of {} SF batches has {} bytes after the last one", expect.size(), d.size() - at));
  return out;
}

}  // namespace sfb::comm
