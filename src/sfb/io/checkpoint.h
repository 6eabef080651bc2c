#pragma once
// Checkpoints: W plus what a resumed job needs to continue where it stopped. A documented
// little-endian binary format (docs/formats.md):
//
//   offset  size  field
//   0       8     magic "SFBCKPT1"
//   8       4     u32 format version (1)
//   12      4     u32 dtype (1 = float32)
//   16      8     u64 model fingerprint (Config::model_fingerprint of the job that wrote it)
//   24      8     u64 job seed
//   32      8     i64 clock: every replica had applied all batches of clocks < clock
//   40      4     i32 ranks of the job that wrote it
//   44      4     u32 low half of the f64 learning rate optimizer.lr = "auto" resolved to (0: the
//                 config gave the rate; checkpoints before issue 69 hold 0 here)
//   48      8     i64 rows (J)
//   56      8     i64 cols (D)
//   64      4     u32 CRC-32 of bytes 0..63 and of the data
//   68      4     u32 high half of that f64 (0 with the low half)
//   72      4*J*D float32 W, row-major
//
// Written to a temporary file, fsynced and renamed: a crash leaves the previous checkpoint or
// the new one, never half of one. The minibatch samplers are a function of (seed, rank, ranks,
// clock), so no RNG state beyond the seed and the clock needs to be stored. A job writes and reads
// checkpoints as streams of row blocks (core/row_blocks.h): W is never held twice.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "sfb/core/bytes.h"
#include "sfb/core/files.h"
#include "sfb/core/row_blocks.h"
#include "sfb/core/tensor.h"

namespace sfb::io {

inline constexpr size_t kCheckpointHeaderBytes = 72;

// Everything in a checkpoint but W's values.
struct CheckpointInfo {
  uint64_t fingerprint = 0;
  uint64_t seed = 0;
  int64_t clock = 0;
  int32_t ranks = 0;
  int64_t rows = 0, cols = 0;
  double lr = 0;  // what optimizer.lr = "auto" resolved to in the job that wrote it; 0: not "auto"
};

struct Checkpoint {
  uint64_t fingerprint = 0;
  uint64_t seed = 0;
  int64_t clock = 0;
  int32_t ranks = 0;
  Matrix W;
  double lr = 0;  // CheckpointInfo::lr
};

// The whole file in memory (tests, fuzzing, small matrices).
Bytes encode_checkpoint(const Checkpoint& c);
// Throws DataError naming `name` and the field that is wrong.
Checkpoint decode_checkpoint(std::span<const std::byte> bytes, const std::string& name);
void write_checkpoint(const std::string& path, const Checkpoint& c);
Checkpoint read_checkpoint(const std::string& path);

// The header, checked against the data bytes that follow it (`data_bytes`); throws DataError naming
// `name` and the field.
CheckpointInfo decode_checkpoint_header(std::span<const std::byte> header, uint64_t data_bytes,
                                        const std::string& name);
// Streams: W in row blocks from `W` (info's rows/cols are W's), written atomically.
void write_checkpoint(const std::string& path, CheckpointInfo info, const RowSource& W);
// The same in two steps: W's bytes written now (into the page cache), the fsync and the rename at
// the returned writer's commit(). A writer that holds W still while it is copied out (the monitor,
// in place) lets go of W before the disk has the file; a writer dropped uncommitted leaves nothing.
std::unique_ptr<AtomicFileWriter> begin_checkpoint(const std::string& path, CheckpointInfo info, const RowSource& W);
// Reads the header, calls open(info) (which may refuse the checkpoint by throwing, and returns where
// W's rows go), streams W into it block by block, then checks the CRC: on a mismatch it throws
// DataError, and what the sink received must be discarded.
// `block_bytes`: the blocks' size (rows_per_block(cols, block_bytes) rows each, the last fewer).
// A header that fails its structural checks (a shape the file's length cannot hold, a clock out of
// range) is reported as corrupt when its CRC fails too: no field of it is named as if trusted.
// `seal`: when empty, filled with what this read verified; when filled, the file must be that one
// (identity and header bytes, before open() is called) and must not change while it is streamed,
// else FileChanged naming it.
CheckpointInfo read_checkpoint(const std::string& path, const std::function<RowSink(const CheckpointInfo&)>& open,
                               int64_t block_bytes = kRowBlockBytes, FileSeal* seal = nullptr);

}  // namespace sfb::io
