#include "sfb/comm/sf_codec.h"

#include <bit>
#include <cstring>

#include <fmt/format.h>

#include "sfb/core/error.h"

namespace sfb::comm {

static_assert(std::endian::native == std::endian::little, "the wire format is little-endian");

namespace {

class Writer {
 public:
  explicit Writer(Bytes& out) : out_(out) {}
  template <typename T>
  void put(T v) {
    raw(&v, sizeof(T));
  }
  void raw(const void* p, size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    out_.insert(out_.end(), b, b + n);
  }

 private:
  Bytes& out_;
};

// memcpy with a null pointer is undefined even for 0 bytes, and empty vectors and matrices have
// null data() (found by fuzz_wire under UBSan).
void copy_bytes(void* dst, const void* src, size_t n) {
  if (n > 0) std::memcpy(dst, src, n);
}

template <typename T>
T get(std::span<const std::byte> d, size_t off) {
  T v;
  std::memcpy(&v, d.data() + off, sizeof(T));
  return v;
}

void check_common(std::span<const std::byte> d, size_t header, uint16_t kind, const char* what) {
  if (d.size() < header)
    throw CommError(fmt::format("{}: message of {} bytes is shorter than the {}-byte header", what, d.size(), header));
  const auto magic = get<uint32_t>(d, 0);
  if (magic != kWireMagic) throw CommError(fmt::format("{}: bad magic 0x{:08x} (expected 0x{:08x})", what, magic, kWireMagic));
  const auto version = get<uint16_t>(d, 4);
  if (version != kWireVersion)
    throw CommError(fmt::format("{}: wire version {} is not supported (expected {}); are all ranks the same sfbd build?",
                                what, version, kWireVersion));
  const auto k = get<uint16_t>(d, 6);
  if (k != kind) throw CommError(fmt::format("{}: message kind {} where kind {} was expected", what, k, kind));
}

}  // namespace

int64_t encoded_sf_bytes(const SfBatch& b) {
  int64_t payload = int64_t{b.count} * b.J * 4;
  if (b.sparse_v) payload += (int64_t{b.count} + 1) * 8 + static_cast<int64_t>(b.v_index.size()) * 8;
  else payload += int64_t{b.count} * b.D * 4;
  return static_cast<int64_t>(kSfHeaderBytes) + payload;
}

Bytes encode_sf_batch(const SfBatch& b) {
  SFB_ENFORCE(b.u.rows() == b.count && b.u.cols() == b.J, "u is {}x{}, batch {}x{}", b.u.rows(), b.u.cols(), b.count, b.J);
  if (b.sparse_v) {
    SFB_ENFORCE(b.v_row_ptr.size() == static_cast<size_t>(b.count) + 1 && b.v_index.size() == b.v_value.size(),
                "sparse v of batch is inconsistent");
  } else {
    SFB_ENFORCE(b.v.rows() == b.count && b.v.cols() == b.D, "v is {}x{}, batch {}x{}", b.v.rows(), b.v.cols(), b.count, b.D);
  }
  const int64_t total = encoded_sf_bytes(b);
  Bytes out;
  out.reserve(static_cast<size_t>(total));
  Writer w(out);
  w.put<uint32_t>(kWireMagic);
  w.put<uint16_t>(kWireVersion);
  w.put<uint16_t>(kKindSfBatch);
  w.put<int32_t>(b.sender);
  w.put<int32_t>(b.count);
  w.put<int64_t>(b.clock);
  w.put<int32_t>(b.J);
  w.put<int32_t>(b.D);
  w.put<uint32_t>(b.sparse_v ? 1u : 0u);
  w.put<uint32_t>(0);
  w.put<int64_t>(b.sparse_v ? static_cast<int64_t>(b.v_index.size()) : 0);
  w.put<int64_t>(total - static_cast<int64_t>(kSfHeaderBytes));
  w.raw(b.u.data(), static_cast<size_t>(b.u.size()) * 4);
  if (b.sparse_v) {
    w.raw(b.v_row_ptr.data(), b.v_row_ptr.size() * 8);
    w.raw(b.v_index.data(), b.v_index.size() * 4);
    w.raw(b.v_value.data(), b.v_value.size() * 4);
  } else {
    w.raw(b.v.data(), static_cast<size_t>(b.v.size()) * 4);
  }
  SFB_ENFORCE(static_cast<int64_t>(out.size()) == total, "encoded {} bytes, expected {}", out.size(), total);
  return out;
}

SfBatch decode_sf_batch(std::span<const std::byte> d, const SfExpect& ex) {
  check_common(d, kSfHeaderBytes, kKindSfBatch, "SF batch");
  SfBatch b;
  b.sender = get<int32_t>(d, 8);
  b.count = get<int32_t>(d, 12);
  b.clock = get<int64_t>(d, 16);
  b.J = get<int32_t>(d, 24);
  b.D = get<int32_t>(d, 28);
  const auto flags = get<uint32_t>(d, 32);
  const auto nnz = get<int64_t>(d, 40);
  const auto payload = get<int64_t>(d, 48);
  const auto where = fmt::format("SF batch from rank {} (clock {})", b.sender, b.clock);
  if (ex.sender >= 0 && b.sender != ex.sender)
    throw CommError(fmt::format("{}: header names sender {} but it came from rank {}", where, b.sender, ex.sender));
  if (b.clock < 0) throw CommError(fmt::format("{}: negative clock", where));
  if (b.count < 0 || b.count > ex.max_count)
    throw CommError(fmt::format("{}: count {} outside [0, {}]", where, b.count, ex.max_count));
  if (b.J <= 0 || (ex.J >= 0 && b.J != ex.J)) throw CommError(fmt::format("{}: J = {}, this worker has J = {}", where, b.J, ex.J));
  if (b.D <= 0 || (ex.D >= 0 && b.D != ex.D)) throw CommError(fmt::format("{}: D = {}, this worker has D = {}", where, b.D, ex.D));
  if ((flags & ~1u) != 0) throw CommError(fmt::format("{}: unknown flags 0x{:x}", where, flags));
  b.sparse_v = (flags & 1u) != 0;
  if (b.sparse_v ? (nnz < 0 || nnz > int64_t{b.count} * b.D) : nnz != 0)
    throw CommError(fmt::format("{}: nnz {} is impossible for {} rows of D = {}", where, nnz, b.count, b.D));
  int64_t expected = int64_t{b.count} * b.J * 4;
  expected += b.sparse_v ? (int64_t{b.count} + 1) * 8 + nnz * 8 : int64_t{b.count} * b.D * 4;
  if (payload != expected)
    throw CommError(fmt::format("{}: header says {} payload bytes, its shape needs {}", where, payload, expected));
  if (static_cast<int64_t>(d.size()) - static_cast<int64_t>(kSfHeaderBytes) != payload)
    throw CommError(fmt::format("{}: received {} payload bytes, header says {}", where,
                                static_cast<int64_t>(d.size()) - static_cast<int64_t>(kSfHeaderBytes), payload));
  size_t off = kSfHeaderBytes;
  b.u.resize(b.count, b.J);
  copy_bytes(b.u.data(), d.data() + off, static_cast<size_t>(b.u.size()) * 4);
  off += static_cast<size_t>(b.u.size()) * 4;
  if (!b.sparse_v) {
    b.v.resize(b.count, b.D);
    copy_bytes(b.v.data(), d.data() + off, static_cast<size_t>(b.v.size()) * 4);
    return b;
  }
  b.v_row_ptr.resize(static_cast<size_t>(b.count) + 1);
  copy_bytes(b.v_row_ptr.data(), d.data() + off, b.v_row_ptr.size() * 8);
  off += b.v_row_ptr.size() * 8;
  b.v_index.resize(static_cast<size_t>(nnz));
  copy_bytes(b.v_index.data(), d.data() + off, b.v_index.size() * 4);
  off += b.v_index.size() * 4;
  b.v_value.resize(static_cast<size_t>(nnz));
  copy_bytes(b.v_value.data(), d.data() + off, b.v_value.size() * 4);
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

Bytes encode_control(const ControlMsg& m) {
  Bytes out;
  out.reserve(kControlHeaderBytes + m.payload.size() * 8);
  Writer w(out);
  w.put<uint32_t>(kWireMagic);
  w.put<uint16_t>(kWireVersion);
  w.put<uint16_t>(kKindControl);
  w.put<int32_t>(m.sender);
  w.put<uint32_t>(static_cast<uint32_t>(m.type));
  w.put<int64_t>(m.value);
  w.put<uint32_t>(static_cast<uint32_t>(m.payload.size()));
  w.put<uint32_t>(0);
  w.raw(m.payload.data(), m.payload.size() * 8);
  return out;
}

ControlMsg decode_control(std::span<const std::byte> d, int expected_sender) {
  check_common(d, kControlHeaderBytes, kKindControl, "control message");
  ControlMsg m;
  m.sender = get<int32_t>(d, 8);
  const auto type = get<uint32_t>(d, 12);
  m.value = get<int64_t>(d, 16);
  const auto n = get<uint32_t>(d, 24);
  if (expected_sender >= 0 && m.sender != expected_sender)
    throw CommError(fmt::format("control message: header names sender {} but it came from rank {}", m.sender,
                                expected_sender));
  if (type < 1 || type > 6) throw CommError(fmt::format("control message from rank {}: unknown type {}", m.sender, type));
  m.type = static_cast<ControlType>(type);
  if (d.size() != kControlHeaderBytes + size_t{n} * 8)
    throw CommError(fmt::format("control message from rank {}: {} bytes, header says {} payload words", m.sender,
                                d.size(), n));
  m.payload.resize(n);
  copy_bytes(m.payload.data(), d.data() + kControlHeaderBytes, size_t{n} * 8);
  return m;
}

}  // namespace sfb::comm
