#include "sfb/cnn/network.h"

#include <chrono>
#include <sstream>

#include <fmt/format.h>

#include "sfb/core/error.h"
#include "sfb/core/strings.h"

namespace sfb::cnn {
namespace {

int number(const std::string& layer, const std::string& text) {
  try {
    size_t used = 0;
    const int v = std::stoi(text, &used);
    if (used == text.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  throw InvalidArgument(fmt::format("cnn.layers: \"{}\": \"{}\" is not a non-negative integer", layer, text));
}

}  // namespace

Network::Network(const std::string& spec, Shape input) {
  Shape s = input;
  for (const auto& item : split_trimmed(spec, ',')) {
    const auto f = split_trimmed(item, ':');
    std::unique_ptr<Layer> l;
    if (f[0] == "conv" && (f.size() == 3 || f.size() == 4)) {
      l = make_conv2d(s, number(item, f[1]), number(item, f[2]), f.size() == 4 ? number(item, f[3]) : 0);
    } else if (f[0] == "relu" && f.size() == 1) {
      l = make_relu(s);
    } else if (f[0] == "pool" && f.size() == 2) {
      l = make_maxpool(s, number(item, f[1]));
    } else if (f[0] == "fc" && f.size() == 2) {
      l = make_linear(s, number(item, f[1]));
    } else {
      throw InvalidArgument(
          fmt::format("cnn.layers: unknown layer \"{}\"; layers are conv:<channels>:<kernel>[:<pad>], "
                      "relu, pool:<k>, fc:<outputs>",
                      item));
    }
    s = l->out_shape();
    layers_.push_back(std::move(l));
  }
  SFB_CHECK(!layers_.empty(), "cnn.layers is empty");
  // A parameterless layer's backward runs just before the backward of the nearest param layer
  // below it (forward order): its time counts towards that layer's readiness.
  for (int i = 0; i < layers(); ++i) {
    if (!layers_[static_cast<size_t>(i)]->params().empty()) param_layer_.push_back(i);
    owner_.push_back(static_cast<int>(param_layer_.size()) - 1);
  }
  SFB_CHECK(!param_layer_.empty(), "cnn.layers \"{}\" has no layer with parameters", spec);
  acts_.resize(layers_.size() + 1);
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
  const double loss = softmax_cross_entropy(acts_.back(), labels, &grad_);
  if (layer_us) layer_us->assign(layers_.size(), 0.0);
  for (int i = layers() - 1; i >= 0; --i) {
    const auto t0 = std::chrono::steady_clock::now();
    // The first layer needs no input gradient.
    layers_[static_cast<size_t>(i)]->backward(acts_[static_cast<size_t>(i)], acts_[static_cast<size_t>(i) + 1], grad_,
                                              i > 0 ? &grad_next_ : nullptr);
    if (layer_us)
      (*layer_us)[static_cast<size_t>(i)] =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    if (!layers_[static_cast<size_t>(i)]->params().empty() && on_ready) on_ready(owner_[static_cast<size_t>(i)]);
    if (i > 0) grad_.swap(grad_next_);
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

int64_t Network::param_floats(int p) {
  return layers_[static_cast<size_t>(param_layer_[static_cast<size_t>(p)])]->param_count();
}

int64_t Network::total_params() {
  int64_t n = 0;
  for (int p = 0; p < param_layers(); ++p) n += param_floats(p);
  return n;
}

std::string Network::describe() const {
  std::string s;
  for (const auto& l : layers_) {
    const Shape o = l->out_shape();
    s += fmt::format("{}{}({}x{}x{})", s.empty() ? "" : " -> ", l->name(), o.c, o.h, o.w);
  }
  return s;
}

}  // namespace sfb::cnn
