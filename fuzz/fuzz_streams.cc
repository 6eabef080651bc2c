// Fuzzes the streaming readers of checkpoints and model files through a real file, both passes: the
// first reads and seals (FileSeal), the second must hand out exactly the rows the first verified,
// and a file rewritten in between (the input with one byte changed) is refused (FileChanged, a
// DataError), never read past the shape it was given. Blocks are small (64 bytes) so the
// row-block arithmetic runs on every input.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "sfb/core/error.h"
#include "sfb/core/files.h"
#include "sfb/io/checkpoint.h"
#include "sfb/io/model_file.h"

namespace {

const std::string& path() {
  static const std::string p = "/tmp/sfb_fuzz_streams." + std::to_string(::getpid());
  return p;
}

void write(const uint8_t* data, size_t size, int flip) {
  std::FILE* f = std::fopen(path().c_str(), "wb");
  if (!f) __builtin_trap();
  std::vector<uint8_t> b(data, data + size);
  if (flip >= 0 && !b.empty()) b[static_cast<size_t>(flip) % b.size()] ^= 0x5a;
  if (!b.empty()) std::fwrite(b.data(), 1, b.size(), f);
  std::fclose(f);
}

// Rows in bounds of the shape the reader was given, their floats summed (bit patterns) for comparison.
struct Collect {
  int64_t rows = 0, cols = 0, seen = 0;
  uint64_t sum = 0;
  sfb::RowSink sink() {
    return [this](int64_t r0, int64_t n, const float* d) {
      if (r0 != seen || n <= 0 || r0 + n > rows) __builtin_trap();
      for (int64_t i = 0; i < n * cols; ++i) {
        uint32_t bits;  // the float's bit pattern: a file's NaN or 1e30 must not overflow a conversion
        std::memcpy(&bits, d + i, sizeof bits);
        sum = sum * 31 + bits;
      }
      seen += n;
    };
  }
};

template <typename Read>
void two_passes(const uint8_t* data, size_t size, const Read& read) {
  write(data, size, -1);
  sfb::FileSeal seal;
  Collect first;
  try {
    read(first, &seal);
  } catch (const sfb::DataError&) {
    return;
  }
  if (first.seen != first.rows) __builtin_trap();
  Collect second;
  read(second, &seal);  // the same file: must pass, with the same rows
  if (second.seen != first.seen || second.sum != first.sum) __builtin_trap();
  write(data, size, static_cast<int>(size / 2));  // rewritten: another mtime
  Collect third;
  try {
    read(third, &seal);
  } catch (const sfb::DataError&) {  // FileChanged among them
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  two_passes(data, size, [](Collect& c, sfb::FileSeal* seal) {
    sfb::io::read_checkpoint(
        path(),
        [&c](const sfb::io::CheckpointInfo& i) {
          c.rows = i.rows, c.cols = i.cols;
          if (i.rows * i.cols > (int64_t{1} << 22)) throw sfb::DataError("too large for the fuzzer");
          return c.sink();
        },
        64, seal);
  });
  two_passes(data, size, [](Collect& c, sfb::FileSeal* seal) {
    sfb::io::read_model(
        path(),
        [&c](int64_t rows, int64_t cols) {
          c.rows = rows, c.cols = cols;
          if (rows * cols > (int64_t{1} << 22)) throw sfb::DataError("too large for the fuzzer");
          return c.sink();
        },
        nullptr, seal);
  });
  std::remove(path().c_str());
  return 0;
}
