#pragma once
// Layer-wise profiles for MG-WFBP: layers in forward order with their parameter count (floats)
// and backward time t_b (microseconds); optional forward time t_f per layer.
//
// CSV format (docs/mgwfbp.md): header `name,params,t_b[,t_f][,sf,t_sf]`, one row per layer in
// forward order, times in microseconds, params in floats. Blank lines and lines starting with '#'
// are skipped. sf and t_sf describe a layer whose weight gradient is a sum of B outer products (a
// fully-connected layer: delta_b x_b^T): sf = the floats of one rank's factors, B (out + in), and
// t_sf = the time to rebuild the gradient from one rank's factors (a B-deep GEMM); 0 for a layer
// that can only travel dense. Its bias gradient is the sum of the deltas, rebuilt from them too.
#include <cstdint>
#include <string>
#include <vector>

#include "sfb/mgwfbp/cost_model.h"

namespace sfb::mgwfbp {

struct LayerTiming {
  std::string name;
  int64_t params = 0;     // floats
  double t_b_us = 0.0;    // backward time of this layer
  double t_f_us = 0.0;    // forward time (0 when unknown)
  int64_t sf_floats = 0;  // floats of one rank's sufficient factors (0: dense only)
  double t_sf_us = 0.0;   // rebuilding the gradient from one rank's factors
};

struct Profile {
  std::string source;
  std::vector<LayerTiming> layers;  // forward order: layers[0] is the input layer
  double forward_us = 0.0;          // whole forward pass

  int size() const { return static_cast<int>(layers.size()); }
  double backward_us() const;
  int64_t total_params() const;
  // Whether some layer has sufficient factors (sf_floats > 0): the hybrid planners apply.
  bool has_factors() const;
};

Profile read_profile_csv(const std::string& path);

// A profile computed from a network's public layer shapes, for networks we have no run of:
// "alexnet" (torchvision's single-tower AlexNet, 224 x 224) or "vgg16" (configuration D), at
// `batch` images per rank. Times come from FLOPs at `gflops` GFLOP/s: t_f = forward FLOPs, t_b =
// 2 x forward FLOPs (gradients of the input and of the weights); every fully-connected layer has
// sufficient factors, sf = batch (out + in), rebuilt in t_sf = 2 batch out in FLOPs. Layers
// without parameters (ReLU, pooling) are left out.
Profile reference_profile(const std::string& model, int64_t batch, double gflops);
// `comment` (lines) goes first, each line as a '#' comment.
void write_profile_csv(const std::string& path, const Profile& p, const std::string& comment = "");

// B-Caffe `DistManager::print_overheads` glog lines "[param_id, size, compute_us, comm_us(, merged)]":
// the last block of 128 rows, weight (even id) and bias (odd id) of one layer merged into one
// layer with params = weight + bias and t_b = the layer's compute time. The forward time is not
// in the log: forward_us is left 0 for the caller to set.
Profile read_bcaffe_log(const std::string& path);

// The same log's measured per-layer communication times (GPU->host copy, MPI_Allreduce, copy
// back) as (bytes of weight + bias, microseconds) samples, for fitting T = a + b*M in situ.
std::vector<Sample> read_bcaffe_comm(const std::string& path);

}  // namespace sfb::mgwfbp
