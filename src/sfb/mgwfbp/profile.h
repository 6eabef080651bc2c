#pragma once
// Layer-wise profiles for MG-WFBP: layers in forward order with their parameter count (floats)
// and backward time t_b (microseconds); optional forward time t_f per layer.
//
// CSV format (docs/mgwfbp.md): header `name,params,t_b` or `name,params,t_b,t_f`, one row per
// layer in forward order, times in microseconds, params in floats. Blank lines and lines starting
// with '#' are skipped.
#include <cstdint>
#include <string>
#include <vector>

#include "sfb/mgwfbp/cost_model.h"

namespace sfb::mgwfbp {

struct Layer {
  std::string name;
  int64_t params = 0;   // floats
  double t_b_us = 0.0;  // backward time of this layer
  double t_f_us = 0.0;  // forward time (0 when unknown)
};

struct Profile {
  std::string source;
  std::vector<Layer> layers;  // forward order: layers[0] is the input layer
  double forward_us = 0.0;    // whole forward pass

  int size() const { return static_cast<int>(layers.size()); }
  double backward_us() const;
  int64_t total_params() const;
};

Profile read_profile_csv(const std::string& path);
void write_profile_csv(const std::string& path, const Profile& p);

// B-Caffe `DistManager::print_overheads` glog lines "[param_id, size, compute_us, comm_us(, merged)]":
// the last block of 128 rows, weight (even id) and bias (odd id) of one layer merged into one
// layer with params = weight + bias and t_b = the layer's compute time. The forward time is not
// in the log: forward_us is left 0 for the caller to set.
Profile read_bcaffe_log(const std::string& path);

// The same log's measured per-layer communication times (GPU->host copy, MPI_Allreduce, copy
// back) as (bytes of weight + bias, microseconds) samples, for fitting T = a + b*M in situ.
std::vector<Sample> read_bcaffe_comm(const std::string& path);

}  // namespace sfb::mgwfbp
