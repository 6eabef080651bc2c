#pragma once
// The CNN mode's model file (output.model) and checkpoint (checkpoint.path): one documented
// little-endian format (docs/formats.md) in two kinds.
//
//   offset  size  field
//   0       8     magic "SFBCNNMD" (model) or "SFBCNNCK" (checkpoint)
//   8       4     u32 format version (1)
//   12      4     u32 dtype (1 = float32)
//   16      8     u64 training fingerprint (Config::cnn_fingerprint of the job that wrote it)
//   24      8     u64 job seed
//   32      8     i64 iteration: the iterations done (a resumed run continues with this one)
//   40      4     i32 ranks of the job that wrote it
//   44      4     u32 CRC-32 (zlib) of the whole file with this field as 0
//   48      8     i64 N: parameters (floats)
//   56      8     u64 offset of the parameters in the file (for readers that skip the rest)
//   64            the network: str input ("1x28x28"), u32 layers, per layer: str label ("conv1"),
//                 str spec ("conv:16:5:2"), u32 tensors, per tensor i64 rows, i64 cols
//                 (str = u32 length, then the bytes)
//   offset        N float32 parameters: param layers in forward order, each layer's tensors in
//                 order (weights, then bias), row-major
//   checkpoint:   N float32 momentum buffers (the same order); u32 1 when a plan follows (0: none):
//                 the plan and its cost model (the plan message, plan_codec.h), then the
//                 profile it was made from (u32 layers, per layer str name, i64 params, f64 t_b_us,
//                 f64 t_f_us, i64 sf_floats, f64 t_sf_us; f64 forward_us); then, in checkpoints
//                 written since issue 69, f64 lr: the rate optimizer.lr = "auto" resolved to (0: the
//                 config gave it), which a resumed run reuses instead of searching again
//
// Written to a temporary file, fsynced and renamed, never with non-finite values. The samplers
// are a function of (seed, rank, ranks, iteration): no other RNG state is needed.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sfb/cnn/network.h"
#include "sfb/core/bytes.h"
#include "sfb/mgwfbp/planner.h"

namespace sfb::cnn {

// One layer of the network a file belongs to.
struct LayerEntry {
  std::string label;                                // "conv1"
  std::string spec;                                 // "conv:16:5:2"
  std::vector<std::pair<int64_t, int64_t>> shapes;  // of its parameter tensors
  bool operator==(const LayerEntry&) const = default;
};

struct NetworkSpec {
  std::string input;  // cnn.input
  std::vector<LayerEntry> layers;
};

// What the planner knew: restored on a resume with the same number of ranks.
struct PlanState {
  mgwfbp::Plan plan;
  mgwfbp::CostModel cost;
  mgwfbp::Profile profile;
};

struct CnnFile {
  bool checkpoint = false;
  uint64_t fingerprint = 0;
  uint64_t seed = 0;
  int64_t iteration = 0;
  int32_t ranks = 1;
  NetworkSpec network;
  std::vector<float> params;
  std::vector<float> velocity;    // checkpoint: the momentum buffers
  std::optional<PlanState> plan;  // checkpoint: the plan in use (none while still profiling)
  double lr = 0;                  // checkpoint: the rate "auto" resolved to (0: none)
};

// The network's description as a file stores it.
NetworkSpec network_spec(Network& net, const std::string& input);
// Throws DataError naming `what` and the first layer where `file` and `net` differ ("layer 5
// (fc1): the file has fc:256 (W 256 x 800, b 1 x 256), this network has fc:128 (...)").
void check_same_network(const NetworkSpec& file, const NetworkSpec& net, const std::string& what);

// Every parameter of `net` (the file order) and back; set_params throws DataError on a size mismatch.
std::vector<float> get_params(Network& net);
void set_params(Network& net, std::span<const float> params, const std::string& what);

Bytes encode_cnn_file(const CnnFile& f);
// Throws DataError naming `name` and the field that is wrong (magic, version, size, CRC, values).
CnnFile decode_cnn_file(std::span<const std::byte> bytes, const std::string& name);
// Atomic (temporary, fsync, rename); refuses non-finite parameters or momentum (DataError).
void write_cnn_file(const std::string& path, const CnnFile& f);
// `expect_checkpoint`: the kind the caller needs (a model file where a checkpoint is wanted, or
// the other way round, is an error naming both); nullopt takes either (--evaluate).
CnnFile read_cnn_file(const std::string& path, std::optional<bool> expect_checkpoint);

}  // namespace sfb::cnn
