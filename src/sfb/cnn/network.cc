#include "sfb/cnn/network.h"

#include "sfb/cnn/layer_parts.h"

#include <charconv>
#include <chrono>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "sfb/core/error.h"
#include "sfb/core/strings.h"

namespace sfb::cnn {
namespace {

// Every number of a layer spec is bounded before any layer computes with it in int: the layers'
// own arithmetic (offsets, shapes) then cannot overflow, and a 0 never reaches a division.
constexpr int kMaxChannels = 1 << 16, kMaxKernel = 1 << 10;
constexpr int64_t kMaxActivations = int64_t{1} << 28;  // floats per sample after any layer
constexpr int64_t kMaxParams = int64_t{1} << 31;       // of one layer

int number(const std::string& layer, const std::string& text, int lo, int hi, const char* what) {
  int v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc() && end == text.data() + text.size() && v >= lo && v <= hi) return v;
  if (ec == std::errc() && end == text.data() + text.size())
    throw InvalidArgument(
        fmt::format("cnn.layers: \"{}\": {} must be in [{}, {}], got {}", excerpt(layer), what, lo, hi, v));
  throw InvalidArgument(
      fmt::format("cnn.layers: \"{}\": \"{}\" is not a non-negative integer", excerpt(layer), excerpt(text)));
}

// Weights and bias of a layer with `outputs` outputs of `fan_in` inputs each, checked before the
// layer allocates them.
void check_params(const std::string& item, int64_t outputs, int64_t fan_in) {
  const int64_t params = outputs * fan_in + outputs;  // both factors are bounded: no overflow
  SFB_CHECK(params <= kMaxParams, "cnn.layers: \"{}\" would have {} parameters (more than 2^31)", excerpt(item),
            params);
}

// What one item of the spec is on input `s`, every number checked, nothing allocated.
LayerInfo parse_layer(const std::string& item, Shape s) {
  const auto f = split_trimmed(item, ':');
  SFB_CHECK(!f.empty() && !f[0].empty(), "cnn.layers: an empty layer (two commas in a row, or a comma at an end)");
  if (f[0] == "conv" && (f.size() == 3 || f.size() == 4)) {
    const int c = number(item, f[1], 1, kMaxChannels, "channels"), k = number(item, f[2], 1, kMaxKernel, "kernel");
    const int pad = f.size() == 4 ? number(item, f[3], 0, kMaxKernel, "pad") : 0;
    check_params(item, c, int64_t{s.c} * k * k);
    return {LayerInfo::Kind::kConv, s, detail::conv_out(s, c, k, pad), k, pad};
  }
  if (f[0] == "relu" && f.size() == 1) return {LayerInfo::Kind::kRelu, s, s, 0, 0};
  if (f[0] == "pool" && f.size() == 2) {
    const int k = number(item, f[1], 1, kMaxKernel, "pool size");
    return {LayerInfo::Kind::kPool, s, detail::pool_out(s, k), k, 0};
  }
  if (f[0] == "fc" && f.size() == 2) {
    const int outputs = number(item, f[1], 1, 1 << 24, "outputs");
    check_params(item, outputs, s.size());
    return {LayerInfo::Kind::kLinear, s, detail::fc_out(outputs), 0, 0};
  }
  throw InvalidArgument(
      fmt::format("cnn.layers: unknown layer \"{}\"; layers are conv:<channels>:<kernel>[:<pad>], relu, pool:<k>, "
                  "fc:<outputs>",
                  excerpt(item)));
}

std::unique_ptr<Layer> make_layer(const LayerInfo& li, Kernels kernels) {
  switch (li.kind) {
    case LayerInfo::Kind::kConv: return make_conv2d(li.in, li.out.c, li.kernel, li.pad, kernels);
    case LayerInfo::Kind::kRelu: return make_relu(li.in, kernels);
    case LayerInfo::Kind::kPool: return make_maxpool(li.in, li.kernel, kernels);
    case LayerInfo::Kind::kLinear: break;
  }
  return make_linear(li.in, li.out.c, kernels);
}

const char* kind_name(LayerInfo::Kind k) {
  switch (k) {
    case LayerInfo::Kind::kConv: return "conv";
    case LayerInfo::Kind::kRelu: return "relu";
    case LayerInfo::Kind::kPool: return "pool";
    case LayerInfo::Kind::kLinear: return "fc";
  }
  return "?";
}

// Which kinds of layer have sufficient factors: fully connected ones (dW = delta^T input).
bool kind_has_factors(LayerInfo::Kind k) { return k == LayerInfo::Kind::kLinear; }

}  // namespace

std::vector<LayerInfo> Network::plan(const std::string& spec, Shape input) {
  Shape s = input;
  SFB_CHECK(s.size() <= kMaxActivations, "cnn.input {}x{}x{} has more than 2^28 values", s.c, s.h, s.w);
  SFB_CHECK(trim(spec).empty() || trim(spec).back() != ',',
            "cnn.layers: an empty layer (two commas in a row, or a comma at an end)");
  std::vector<LayerInfo> out;
  for (const auto& item : split_trimmed(spec, ',')) {
    // The input of a layer is known to be within bounds; so are its numbers (parse_layer).
    out.push_back(parse_layer(item, s));
    s = out.back().out;
    SFB_CHECK(s.size() <= kMaxActivations, "cnn.layers: \"{}\" makes {}x{}x{} values per sample (more than 2^28)",
              excerpt(item), s.c, s.h, s.w);
  }
  return out;
}

int64_t Network::param_count(const LayerInfo& li) {
  if (li.kind == LayerInfo::Kind::kConv) return int64_t{li.out.c} * li.in.c * li.kernel * li.kernel + li.out.c;
  if (li.kind == LayerInfo::Kind::kLinear) return li.out.size() * li.in.size() + li.out.size();
  return 0;
}

Network::Network(const std::string& spec, Shape input, Kernels kernels) {
  for (const LayerInfo& li : plan(spec, input)) layers_.push_back(make_layer(li, kernels));
  SFB_CHECK(!layers_.empty(), "cnn.layers is empty");
  // A parameterless layer's backward runs just before the backward of the nearest param layer
  // below it (forward order): its time counts towards that layer's readiness.
  for (int i = 0; i < layers(); ++i) {
    if (!layers_[static_cast<size_t>(i)]->params().empty()) param_layer_.push_back(i);
    owner_.push_back(static_cast<int>(param_layer_.size()) - 1);
  }
  SFB_CHECK(!param_layer_.empty(), "cnn.layers \"{}\" has no layer with parameters", spec);
  std::map<std::string, int> seen;  // layers of each kind so far
  for (const auto& l : layers_) {
    const std::string kind = kind_name(l->info().kind);
    labels_.push_back(fmt::format("{}{}", kind, ++seen[kind]));
  }
  acts_.resize(layers_.size() + 1);
  grads_.resize(layers_.size() + 1);
  factor_layer_.assign(layers_.size(), 0);
}

void Network::set_backend(std::unique_ptr<DeviceBackend> backend) {
  backend_ = std::move(backend);
  if (backend_) backend_->set_factor_layers(factor_layer_);
}

bool Network::has_factors(int p) const { return kind_has_factors(param_layer(p).info().kind); }

bool Network::spec_has_factors(const std::string& layer_spec) {
  // A layer with parameters is spelled <kind>:<numbers> (layer_spec()).
  for (const auto k :
       {LayerInfo::Kind::kConv, LayerInfo::Kind::kRelu, LayerInfo::Kind::kPool, LayerInfo::Kind::kLinear})
    if (layer_spec.starts_with(std::string(kind_name(k)) + ":")) return kind_has_factors(k);
  return false;
}

int64_t Network::factor_floats(int p) {
  const LayerInfo li = param_layer(p).info();
  return has_factors(p) ? li.out.size() + li.in.size() : 0;
}

void Network::set_factor_layers(const std::vector<char>& sf) {
  SFB_ENFORCE(static_cast<int>(sf.size()) == param_layers(), "{} factor flags for {} param layers", sf.size(),
              param_layers());
  std::vector<char> by_layer(layers_.size(), 0);
  for (int p = 0; p < param_layers(); ++p) {
    const int i = param_layer_index(p);
    SFB_ENFORCE(!sf[static_cast<size_t>(p)] || has_factors(p), "layer {} ({}) has no sufficient factors", i,
                layer(i).name());
    by_layer[static_cast<size_t>(i)] = sf[static_cast<size_t>(p)];
  }
  if (by_layer == factor_layer_) return;
  factor_layer_ = by_layer;
  for (size_t i = 0; i < layers_.size(); ++i) layers_[i]->set_param_grads(!factor_layer_[i]);
  if (backend_) backend_->set_factor_layers(factor_layer_);
}

Factors Network::factors(int p) {
  const int i = param_layer_index(p);
  SFB_ENFORCE(factor_layer_[static_cast<size_t>(i)], "layer {} ({}) does not send factors", i, layer(i).name());
  if (backend_) return backend_->factors(i);
  return {&grads_[static_cast<size_t>(i) + 1], &acts_[static_cast<size_t>(i)]};
}

void Network::init(Rng& rng) {
  for (auto& l : layers_) l->init(rng);
}

const Matrix& Network::forward(const Matrix& x) {
  if (backend_) return backend_->forward(x);
  acts_[0] = x;
  for (size_t i = 0; i < layers_.size(); ++i) layers_[i]->forward(acts_[i], acts_[i + 1]);
  return acts_.back();
}

double Network::backward(const std::vector<int32_t>& labels, const std::function<void(int)>& on_ready,
                         std::vector<double>* layer_us) {
  if (backend_) return backend_->backward(labels, on_ready, layer_us);
  // grads_[i]: the loss gradient w.r.t. acts_[i]; each keeps its storage from step to step (a
  // batch of activations is megabytes: reallocating it would page-fault it in every step).
  const double loss = softmax_cross_entropy(acts_.back(), labels, &grads_.back());
  if (layer_us) layer_us->assign(layers_.size(), 0.0);
  for (int i = layers() - 1; i >= 0; --i) {
    const auto u = static_cast<size_t>(i);
    const auto t0 = std::chrono::steady_clock::now();
    // The first layer needs no input gradient.
    layers_[u]->backward(acts_[u], acts_[u + 1], grads_[u + 1], i > 0 ? &grads_[u] : nullptr);
    if (layer_us)
      (*layer_us)[u] = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    if (!layers_[u]->params().empty() && on_ready) on_ready(owner_[u]);
  }
  return loss;
}

std::vector<int32_t> Network::predict(const Matrix& x) {
  const Matrix& logits = forward(x);
  std::vector<int32_t> out(static_cast<size_t>(logits.rows()));
  for (Eigen::Index i = 0; i < logits.rows(); ++i) {
    Eigen::Index arg = 0;
    logits.row(i).maxCoeff(&arg);
    out[static_cast<size_t>(i)] = static_cast<int32_t>(arg);
  }
  return out;
}

int64_t Network::param_floats(int p) { return param_layer(p).param_count(); }

int64_t Network::total_params() {
  int64_t n = 0;
  for (int p = 0; p < param_layers(); ++p) n += param_floats(p);
  return n;
}

std::string Network::describe() const {
  std::string s;
  for (int i = 0; i < layers(); ++i) {
    const Shape o = layers_[static_cast<size_t>(i)]->out_shape();
    s += fmt::format("{}{} {} ({}x{}x{})", s.empty() ? "" : " -> ", labels_[static_cast<size_t>(i)], layer_spec(i), o.c,
                     o.h, o.w);
  }
  return s;
}

}  // namespace sfb::cnn

namespace sfb::cnn {

std::string Network::layer_spec(int i) const {
  const LayerInfo li = layers_[static_cast<size_t>(i)]->info();
  switch (li.kind) {
    case LayerInfo::Kind::kConv: return fmt::format("conv:{}:{}:{}", li.out.c, li.kernel, li.pad);
    case LayerInfo::Kind::kPool: return fmt::format("pool:{}", li.kernel);
    case LayerInfo::Kind::kLinear: return fmt::format("fc:{}", li.out.c);
    case LayerInfo::Kind::kRelu: break;
  }
  return "relu";
}

std::string Network::param_label(int p) const { return layer_label(param_layer_index(p)); }

}  // namespace sfb::cnn
