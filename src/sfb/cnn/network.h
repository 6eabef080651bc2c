#pragma once
// A feed-forward network of Layers described by a spec string, e.g. the default LeNet-like
//   "conv:16:5:2,relu,pool:2,conv:32:5:2,relu,pool:2,fc:128,relu,fc:10"
// (conv:<channels>:<kernel>[:<pad>], relu, pool:<k>, fc:<outputs>); the loss is softmax
// cross-entropy on the last layer's outputs.
//
// For MG-WFBP the network is seen as its layers with parameters ("param layers", forward order):
// backward() calls on_ready(p) as soon as param layer p's gradients are final. A parameterless
// layer's backward time is folded into the next param layer of the backward pass (the one that
// precedes it in forward order), as MG-WFBP's profile expects.
//
// Threads: the training thread; grads of param layer p may be read by another thread once
// on_ready(p) has been called, until the next backward().
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sfb/cnn/layer.h"

namespace sfb::cnn {

// A fully connected layer's gradient over a batch of n samples as its sufficient factors:
// dW = delta^T input and db = the column sums of delta.
struct Factors {
  const Matrix* delta = nullptr;  // n x out: the loss gradient w.r.t. the layer's outputs
  const Matrix* input = nullptr;  // n x in: the layer's inputs
};

// Runs the layers of a Network on another device (sfb/cnn/cuda/): the Network keeps the host
// copies of parameters and gradients (what the communication thread and the update use); the
// backend uploads parameters after params_changed() and downloads each param layer's gradients
// before reporting it ready.
class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  virtual std::string name() const = 0;
  virtual const Matrix& forward(const Matrix& x) = 0;
  virtual double backward(const std::vector<int32_t>& labels, const std::function<void(int)>& on_ready,
                          std::vector<double>* layer_us) = 0;
  virtual void params_changed() = 0;
  // Layers (by layer index) whose gradients travel as factors: backward computes and downloads
  // their factors (host copies, factors()) instead of their parameter gradients.
  virtual void set_factor_layers(const std::vector<char>& by_layer) = 0;
  virtual Factors factors(int layer) const = 0;
};

class Network {
 public:
  Network(const std::string& spec, Shape input, Kernels kernels = Kernels::kOneDnn);
  // The layers `spec` describes on `input`, every number and shape checked as the constructor
  // checks them, nothing allocated: what memory estimates read before a network is built.
  static std::vector<LayerInfo> plan(const std::string& spec, Shape input);
  // Parameters (weights and biases) of a layer of plan().
  static int64_t param_count(const LayerInfo& li);
  void init(Rng& rng);

  // Forward pass over a batch (N x input.size()); returns the logits.
  const Matrix& forward(const Matrix& x);
  // Backward from the mean cross-entropy of the last forward(); returns the loss. on_ready(p) is
  // called per param layer p, in backward order; layer_us (when not null) gets each layer's
  // backward time (microseconds, all layers, forward order).
  double backward(const std::vector<int32_t>& labels, const std::function<void(int)>& on_ready,
                  std::vector<double>* layer_us = nullptr);
  // Class predictions of a batch.
  std::vector<int32_t> predict(const Matrix& x);

  int layers() const { return static_cast<int>(layers_.size()); }
  Layer& layer(int i) { return *layers_[static_cast<size_t>(i)]; }
  int param_layers() const { return static_cast<int>(param_layer_.size()); }
  int param_layer_index(int p) const { return param_layer_[static_cast<size_t>(p)]; }
  // Param layer p itself: the one way from a param layer to its Layer.
  Layer& param_layer(int p) { return layer(param_layer_index(p)); }
  const Layer& param_layer(int p) const { return *layers_[static_cast<size_t>(param_layer_index(p))]; }
  // Parameters (floats) of param layer p.
  int64_t param_floats(int p);
  int64_t total_params();
  // Whether param layer p's gradient has sufficient factors (dW = delta^T input: a fully connected
  // layer's; a convolution's has none), so that it may travel as them. The one rule: plans, the
  // profile and the communicator ask it here.
  bool has_factors(int p) const;
  // The same rule for a layer known only by its spec as layer_spec() spells it ("fc:128"): a
  // file's network.
  static bool spec_has_factors(const std::string& layer_spec);
  // Floats per sample of param layer p's sufficient factors (out + in); 0 for a layer without them.
  int64_t factor_floats(int p);
  // Which param layers' gradients travel as sufficient factors from the next backward() on (one
  // flag per param layer; each flagged one must have factors): they skip their parameter
  // gradients, which the receiver rebuilds from everyone's factors.
  void set_factor_layers(const std::vector<char>& sf);
  // Param layer p's factors from the last backward(): valid from on_ready(p) until the next
  // forward(). Only for a layer flagged by set_factor_layers.
  Factors factors(int p);
  // The param layer that a layer's backward time is attributed to (see the class comment); -1
  // for parameterless layers before the first param layer (their time is still backward time).
  int owner_param_layer(int layer) const { return owner_[static_cast<size_t>(layer)]; }
  std::string describe() const;
  // "conv1", "relu2", "pool1", "fc2": the layer's kind and its number among the layers of that
  // kind (what logs, traces, the summary and profiles call it).
  const std::string& layer_label(int i) const { return labels_[static_cast<size_t>(i)]; }
  std::string param_label(int p) const;
  // The layer as cnn.layers spells it, normalised: "conv:16:5:2", "relu", "pool:2", "fc:128".
  std::string layer_spec(int i) const;
  // Moves the computation to a device backend (null: back to the CPU layers).
  void set_backend(std::unique_ptr<DeviceBackend> backend);
  DeviceBackend* backend() { return backend_.get(); }
  // The host parameters changed (after an update): a device backend uploads them.
  void params_changed() {
    if (backend_) backend_->params_changed();
  }

 private:
  std::unique_ptr<DeviceBackend> backend_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<std::string> labels_;  // layer -> "conv1"
  std::vector<int> param_layer_;     // param layer p -> layer index
  std::vector<int> owner_;           // layer -> param layer
  std::vector<char> factor_layer_;   // by layer index: its gradient travels as factors
  std::vector<Matrix> acts_;         // acts_[0] = input, acts_[i + 1] = output of layer i
  std::vector<Matrix> grads_;        // grads_[i]: the loss gradient w.r.t. acts_[i]
};

}  // namespace sfb::cnn
