#pragma once
// Little-endian binary encoding shared by every format sfb writes: wire messages (comm), the
// parameter-server messages (baselines), checkpoints and model files (io), the CNN plan broadcast.
//
//  * ByteWriter appends fixed-size fields (integers, floats, enums) and arrays of them, and can
//    patch a field written earlier (a CRC over the finished bytes).
//  * ByteReader reads them back with a bounds check on every field: a short or corrupt input
//    throws the caller's error type (CommError for messages, DataError for files) naming the
//    input, the field and the offset, never reads past the end.
//
// Field order and widths are the format; docs/formats.md documents each one, and
// tests/comm/wire_golden_test.cc pins the bytes.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "sfb/core/error.h"

namespace sfb {

static_assert(std::endian::native == std::endian::little, "sfb's binary formats are little-endian, so is the host");

using Bytes = std::vector<std::byte>;

template <typename T>
concept Scalar = std::is_arithmetic_v<T> || std::is_enum_v<T>;

class ByteWriter {
 public:
  ByteWriter() = default;
  explicit ByteWriter(size_t reserve) { out_.reserve(reserve); }

  template <Scalar T>
  void put(T v) {
    put_raw(&v, sizeof(T));
  }
  template <Scalar T>
  void put_array(std::span<const T> v) {
    put_raw(v.data(), v.size_bytes());
  }
  template <Scalar T>
  void put_array(const T* p, size_t n) {
    put_raw(p, n * sizeof(T));
  }
  void put_raw(const void* p, size_t n) {
    if (n == 0) return;  // p may be null for an empty array
    const auto* b = static_cast<const std::byte*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  // Overwrites the field at `offset`, written earlier (e.g. a CRC computed over the result).
  template <Scalar T>
  void put_at(size_t offset, T v) {
    SFB_ENFORCE(offset + sizeof(T) <= out_.size(), "put_at({}) past the {} bytes written", offset, out_.size());
    std::memcpy(out_.data() + offset, &v, sizeof(T));
  }

  size_t size() const { return out_.size(); }
  std::span<const std::byte> bytes() const { return out_; }
  Bytes take() { return std::move(out_); }

 private:
  Bytes out_;
};

class ByteReader {
 public:
  enum class Source { kMessage, kFile };  // throws CommError or DataError
  // `what` names the input in every error: "SF batch from rank 2", "runs/x/ck.bin".
  ByteReader(std::span<const std::byte> data, std::string what, Source source)
      : data_(data), what_(std::move(what)), source_(source) {}

  template <Scalar T>
  T get(const char* field) {
    T v;
    std::memcpy(&v, take(sizeof(T), field).data(), sizeof(T));
    return v;
  }
  template <Scalar T>
  void get_array(T* dst, size_t n, const char* field) {
    SFB_ENFORCE(n <= SIZE_MAX / sizeof(T), "array of {} elements", n);
    const auto b = take(n * sizeof(T), field);
    if (n > 0) std::memcpy(dst, b.data(), b.size());
  }
  // The next n bytes, without copying.
  std::span<const std::byte> take(size_t n, const char* field) {
    if (n > remaining())
      fail(fmt::format("{}: truncated: {} needs {} bytes at offset {}, only {} left", what_, field, n, offset_,
                       remaining()));
    const auto b = data_.subspan(offset_, n);
    offset_ += n;
    return b;
  }
  void skip(size_t n, const char* field) { take(n, field); }
  // Throws unless every byte has been read.
  void expect_end() const {
    if (remaining() != 0) fail(fmt::format("{}: {} trailing bytes after offset {}", what_, remaining(), offset_));
  }

  size_t offset() const { return offset_; }
  size_t remaining() const { return data_.size() - offset_; }
  const std::string& what() const { return what_; }
  // Throws the error type of this input with `message` (which should name what_).
  [[noreturn]] void fail(const std::string& message) const {
    if (source_ == Source::kMessage) throw CommError(message);
    throw DataError(message);
  }

 private:
  std::span<const std::byte> data_;
  std::string what_;
  Source source_;
  size_t offset_ = 0;
};

}  // namespace sfb
