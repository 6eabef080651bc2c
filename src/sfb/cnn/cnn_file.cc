#include "sfb/cnn/cnn_file.h"

#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "sfb/cnn/plan_codec.h"
#include "sfb/core/config.h"
#include "sfb/core/error.h"
#include "sfb/core/files.h"
#include "sfb/core/hash.h"
#include "sfb/core/strings.h"

namespace sfb::cnn {
namespace {

constexpr char kModelMagic[8] = {'S', 'F', 'B', 'C', 'N', 'N', 'M', 'D'};
constexpr char kCheckpointMagic[8] = {'S', 'F', 'B', 'C', 'N', 'N', 'C', 'K'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 64, kCrcOffset = 44;
constexpr uint32_t kMaxString = 1 << 20, kMaxLayers = 1 << 16, kMaxTensors = 16;

void put_string(ByteWriter& w, const std::string& s) {
  w.put<uint32_t>(static_cast<uint32_t>(s.size()));
  w.put_raw(s.data(), s.size());
}

std::string get_string(ByteReader& r, const std::string& name, const char* field) {
  const auto n = r.get<uint32_t>(field);
  SFB_CHECK_DATA(n <= kMaxString, "{}: {} of {} bytes (at most {})", name, field, n, kMaxString);
  const auto b = r.take(n, field);
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

uint32_t checksum(std::span<const std::byte> file) {
  std::byte h[kHeaderBytes];
  std::memcpy(h, file.data(), kHeaderBytes);
  std::memset(h + kCrcOffset, 0, 4);
  return crc32(file.subspan(kHeaderBytes), crc32(std::span<const std::byte>(h, kHeaderBytes)));
}

std::string describe_entry(const LayerEntry& e) {
  std::string s = e.spec;
  for (size_t k = 0; k < e.shapes.size(); ++k)
    s += fmt::format("{}{} {} x {}", k == 0 ? " (" : ", ", k == 0 ? "W" : "b", e.shapes[k].first, e.shapes[k].second);
  return e.shapes.empty() ? s : s + ")";
}

void put_profile(ByteWriter& w, const mgwfbp::Profile& p) {
  w.put<uint32_t>(static_cast<uint32_t>(p.layers.size()));
  for (const auto& l : p.layers) {
    put_string(w, l.name);
    w.put<int64_t>(l.params);
    w.put<double>(l.t_b_us);
    w.put<double>(l.t_f_us);
    w.put<int64_t>(l.sf_floats);
    w.put<double>(l.t_sf_us);
  }
  w.put<double>(p.forward_us);
}

mgwfbp::Profile get_profile(ByteReader& r, const std::string& name) {
  mgwfbp::Profile p;
  p.source = "checkpoint";
  const auto n = r.get<uint32_t>("profile layers");
  SFB_CHECK_DATA(n <= kMaxLayers, "{}: a profile of {} layers", name, n);
  for (uint32_t i = 0; i < n; ++i) {
    mgwfbp::LayerTiming& l = p.layers.emplace_back();
    l.name = get_string(r, name, "profile layer name");
    l.params = r.get<int64_t>("profile params");
    l.t_b_us = r.get<double>("profile t_b_us");
    l.t_f_us = r.get<double>("profile t_f_us");
    l.sf_floats = r.get<int64_t>("profile sf_floats");
    l.t_sf_us = r.get<double>("profile t_sf_us");
    SFB_CHECK_DATA(l.params >= 0 && l.sf_floats >= 0 && std::isfinite(l.t_b_us) && std::isfinite(l.t_f_us) &&
                       std::isfinite(l.t_sf_us) && l.t_b_us >= 0 && l.t_sf_us >= 0,
                   "{}: the profile's layer {} ({}) has invalid values", name, i, excerpt(l.name));
  }
  p.forward_us = r.get<double>("profile forward_us");
  SFB_CHECK_DATA(std::isfinite(p.forward_us) && p.forward_us >= 0, "{}: profile forward_us {}", name, p.forward_us);
  return p;
}

// The tensors' shapes, each checked as it is read: the running total of floats is bounded by what
// the file holds (4 bytes each), computed without overflow (2^31 x 2^31 tensors once wrapped and
// reached an allocation).
NetworkSpec get_network(ByteReader& r, const std::string& name) {
  NetworkSpec n;
  const uint64_t file_floats = r.remaining() / 4;
  uint64_t total = 0;
  n.input = get_string(r, name, "input");
  const auto layers = r.get<uint32_t>("layers");
  SFB_CHECK_DATA(layers >= 1 && layers <= kMaxLayers, "{}: {} layers (1 to {})", name, layers, kMaxLayers);
  for (uint32_t i = 0; i < layers; ++i) {
    LayerEntry& e = n.layers.emplace_back();
    e.label = get_string(r, name, "layer label");
    e.spec = get_string(r, name, "layer spec");
    const auto tensors = r.get<uint32_t>("tensors");
    SFB_CHECK_DATA(tensors <= kMaxTensors, "{}: layer {} has {} tensors", name, i, tensors);
    for (uint32_t k = 0; k < tensors; ++k) {
      const auto rows = r.get<int64_t>("tensor rows"), cols = r.get<int64_t>("tensor cols");
      SFB_CHECK_DATA(rows >= 0 && cols >= 0 && rows <= (int64_t{1} << 31) && cols <= (int64_t{1} << 31),
                     "{}: layer {} ({}): implausible tensor {} x {}", name, i, excerpt(e.label), rows, cols);
      uint64_t floats = 0;
      SFB_CHECK_DATA(!__builtin_mul_overflow(static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), &floats) &&
                         !__builtin_add_overflow(total, floats, &total) && total <= file_floats,
                     "{}: layer {} ({}): a {} x {} tensor brings the network to more floats than the file's {} "
                     "bytes hold",
                     name, i, excerpt(e.label), rows, cols, file_floats * 4);
      e.shapes.emplace_back(rows, cols);
    }
  }
  return n;
}

int64_t tensor_floats(const NetworkSpec& n) {
  int64_t total = 0;
  for (const auto& e : n.layers)
    for (const auto& [r, c] : e.shapes) total += r * c;  // decoded shapes are bounded by their file (get_network)
  return total;
}

bool all_finite(const std::vector<float>& v) {
  for (float x : v)
    if (!std::isfinite(x)) return false;
  return true;
}

// A checkpoint's stored plan, checked against the file's own network (its param layers are the
// layers with tensors; which have factors, Network::spec_has_factors says), and its profile.
PlanState get_plan_state(ByteReader& r, const NetworkSpec& network, const std::string& name) {
  PlanState s;
  const auto bytes = r.get<uint32_t>("plan bytes");
  std::vector<char> has_factors;
  for (const auto& e : network.layers)
    if (!e.shapes.empty()) has_factors.push_back(Network::spec_has_factors(e.spec) ? 1 : 0);
  try {
    s.plan = decode_plan(r.take(bytes, "plan"), s.cost, static_cast<int>(has_factors.size()), has_factors);
  } catch (const CommError& e) {
    throw DataError(fmt::format("{}: the stored plan: {}", name, e.what()));
  }
  s.profile = get_profile(r, name);
  return s;
}

// What a checkpoint holds after the parameters: the momentum, the plan state, the rate.
void get_checkpoint_tail(ByteReader& r, CnnFile& f, const std::string& name) {
  f.velocity.resize(f.params.size());
  r.get_array(f.velocity.data(), f.params.size(), "momentum");
  const auto has_plan = r.get<uint32_t>("plan flag");
  SFB_CHECK_DATA(has_plan <= 1, "{}: plan flag {} (0 or 1)", name, has_plan);
  if (has_plan) f.plan = get_plan_state(r, f.network, name);
  if (r.remaining() > 0) f.lr = r.get<double>("lr");  // absent in checkpoints before issue 69
  SFB_CHECK_DATA(f.lr == 0 || (std::isfinite(f.lr) && f.lr > 0 && f.lr <= 1e6),
                 "{}: the learning rate {} it records is not a rate", name, f.lr);
}

}  // namespace

NetworkSpec network_spec(Network& net, const std::string& input) {
  NetworkSpec n{input, {}};
  for (int i = 0; i < net.layers(); ++i) {
    LayerEntry& e = n.layers.emplace_back();
    e.label = net.layer_label(i);
    e.spec = net.layer_spec(i);
    for (Matrix* m : net.layer(i).params()) e.shapes.emplace_back(m->rows(), m->cols());
  }
  return n;
}

void check_same_network(const NetworkSpec& file, const NetworkSpec& net, const std::string& what) {
  SFB_CHECK_DATA(file.input == net.input, "{}: the file's network takes input {}, cnn.input is {}", what,
                 excerpt(file.input), net.input);
  const size_t n = std::min(file.layers.size(), net.layers.size());
  for (size_t i = 0; i < n; ++i)
    SFB_CHECK_DATA(file.layers[i] == net.layers[i], "{}: layer {} differs: the file has {} {}, this network has {} {}",
                   what, i + 1, excerpt(file.layers[i].label), excerpt(describe_entry(file.layers[i])),
                   net.layers[i].label, describe_entry(net.layers[i]));
  SFB_CHECK_DATA(file.layers.size() == net.layers.size(),
                 "{}: the file's network has {} layers, this one {} (layer {}: {} is in only one of them)", what,
                 file.layers.size(), net.layers.size(), n + 1,
                 file.layers.size() > n ? excerpt(file.layers[n].label) : net.layers[n].label);
}

std::vector<float> get_params(Network& net) {
  std::vector<float> out;
  for (int p = 0; p < net.param_layers(); ++p)
    for (Matrix* m : net.param_layer(p).params()) out.insert(out.end(), m->data(), m->data() + m->size());
  return out;
}

void set_params(Network& net, std::span<const float> params, const std::string& what) {
  SFB_CHECK_DATA(static_cast<int64_t>(params.size()) == net.total_params(), "{}: {} parameters, the network has {}",
                 what, params.size(), net.total_params());
  size_t at = 0;
  for (int p = 0; p < net.param_layers(); ++p)
    for (Matrix* m : net.param_layer(p).params()) {
      std::memcpy(m->data(), params.data() + at, static_cast<size_t>(m->size()) * sizeof(float));
      at += static_cast<size_t>(m->size());
    }
  net.params_changed();
}

Bytes encode_cnn_file(const CnnFile& f) {
  const size_t n = f.params.size();
  SFB_ENFORCE(static_cast<int64_t>(n) == tensor_floats(f.network), "{} parameters for a network of {}", n,
              tensor_floats(f.network));
  SFB_ENFORCE(!f.checkpoint || f.velocity.size() == n, "{} momentum values for {} parameters", f.velocity.size(), n);
  ByteWriter w(kHeaderBytes + (f.checkpoint ? 8 : 4) * n + 4096);
  w.put_raw(f.checkpoint ? kCheckpointMagic : kModelMagic, 8);
  w.put<uint32_t>(kVersion);
  w.put<uint32_t>(1);  // float32
  w.put<uint64_t>(f.fingerprint);
  w.put<uint64_t>(f.seed);
  w.put<int64_t>(f.iteration);
  w.put<int32_t>(f.ranks);
  w.put<uint32_t>(0);  // CRC, below
  w.put<int64_t>(static_cast<int64_t>(n));
  w.put<uint64_t>(0);  // offset of the parameters, below
  put_string(w, f.network.input);
  w.put<uint32_t>(static_cast<uint32_t>(f.network.layers.size()));
  for (const auto& e : f.network.layers) {
    put_string(w, e.label);
    put_string(w, e.spec);
    w.put<uint32_t>(static_cast<uint32_t>(e.shapes.size()));
    for (const auto& [r, c] : e.shapes) {
      w.put<int64_t>(r);
      w.put<int64_t>(c);
    }
  }
  w.put_at<uint64_t>(56, w.size());
  w.put_array(f.params.data(), n);
  if (f.checkpoint) {
    w.put_array(f.velocity.data(), n);
    w.put<uint32_t>(f.plan ? 1 : 0);
    if (f.plan) {
      const Bytes plan = encode_plan(f.plan->plan, f.plan->cost);
      w.put<uint32_t>(static_cast<uint32_t>(plan.size()));
      w.put_raw(plan.data(), plan.size());
      put_profile(w, f.plan->profile);
    }
    w.put<double>(f.lr);
  }
  w.put_at<uint32_t>(kCrcOffset, checksum(w.bytes()));
  return w.take();
}

CnnFile decode_cnn_file(std::span<const std::byte> d, const std::string& name) {
  SFB_CHECK_DATA(d.size() >= kHeaderBytes, "{}: truncated: {} bytes, the header alone has {}", name, d.size(),
                 kHeaderBytes);
  ByteReader r(d, name, ByteReader::Source::kFile);
  CnnFile f;
  const auto magic = r.take(8, "magic");
  f.checkpoint = std::memcmp(magic.data(), kCheckpointMagic, 8) == 0;
  SFB_CHECK_DATA(f.checkpoint || std::memcmp(magic.data(), kModelMagic, 8) == 0,
                 "{}: bad magic: not an sfb CNN model or checkpoint{}", name,
                 std::memcmp(magic.data(), "SFB", 3) == 0 ? " (an SFB-mode file? job.mode = \"sfb\" reads those)" : "");
  const auto version = r.get<uint32_t>("version");
  SFB_CHECK_DATA(version == kVersion, "{}: format version {} is not supported (expected {})", name, version, kVersion);
  const auto dtype = r.get<uint32_t>("dtype");
  SFB_CHECK_DATA(dtype == 1, "{}: dtype {} is not supported (1 = float32)", name, dtype);
  f.fingerprint = r.get<uint64_t>("fingerprint");
  f.seed = r.get<uint64_t>("seed");
  f.iteration = r.get<int64_t>("iteration");
  f.ranks = r.get<int32_t>("ranks");
  const auto stored = r.get<uint32_t>("CRC");
  const auto n = r.get<int64_t>("parameters");
  const auto offset = r.get<uint64_t>("parameters offset");
  // The CRC before any field is judged: a corrupted header is reported as corruption.
  const uint32_t crc = checksum(d);
  SFB_CHECK_DATA(crc == stored, "{}: checksum mismatch (stored 0x{:08x}, computed 0x{:08x}): the file is corrupt", name,
                 stored, crc);
  SFB_CHECK_DATA(f.iteration >= 0 && f.iteration <= kMaxClock && f.ranks >= 1,
                 "{}: iteration {} / ranks {} are invalid (iterations are 0 to 2^53)", name, f.iteration, f.ranks);
  f.network = get_network(r, name);
  SFB_CHECK_DATA(n == tensor_floats(f.network) && offset == d.size() - r.remaining(),
                 "{}: the header says {} parameters at offset {}, the network has {} at {}", name, n, offset,
                 tensor_floats(f.network), d.size() - r.remaining());
  const size_t floats = static_cast<size_t>(n);
  SFB_CHECK_DATA(r.remaining() / 4 >= floats * (f.checkpoint ? 2 : 1), "{}: truncated: {} bytes left for {} floats",
                 name, r.remaining(), floats * (f.checkpoint ? 2 : 1));
  f.params.resize(floats);
  r.get_array(f.params.data(), floats, "parameters");
  if (f.checkpoint) get_checkpoint_tail(r, f, name);
  r.expect_end();
  SFB_CHECK_DATA(all_finite(f.params) && all_finite(f.velocity), "{}: non-finite parameters or momentum", name);
  return f;
}

void write_cnn_file(const std::string& path, const CnnFile& f) {
  SFB_CHECK_DATA(all_finite(f.params) && all_finite(f.velocity), "{}: not written: non-finite parameters", path);
  write_file_atomic(path, encode_cnn_file(f));
}

CnnFile read_cnn_file(const std::string& path, std::optional<bool> expect_checkpoint) {
  const char* want = !expect_checkpoint ? "model file or checkpoint" : *expect_checkpoint ? "checkpoint" : "model file";
  CnnFile f = decode_cnn_file(read_file(path, want), path);
  if (!expect_checkpoint) return f;
  SFB_CHECK_DATA(f.checkpoint == *expect_checkpoint, "{}: is a CNN {}, not a {}{}", path,
                 f.checkpoint ? "checkpoint" : "model file", want,
                 *expect_checkpoint ? " (--resume needs checkpoint.path's file)" : "");
  return f;
}

}  // namespace sfb::cnn
