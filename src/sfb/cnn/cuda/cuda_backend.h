#pragma once
// The CUDA backend of the MG-WFBP network (DeviceBackend): convolution, bias, max pooling and
// ReLU through cuDNN, fully connected layers through cuBLAS, one softmax cross-entropy kernel. Built when CMake finds
// nvcc (SFB_WITH_CUDA) into its own module, libsfb_cuda.so, which these functions load on first use
// (cuda_backend_loader.cc; cuda_module.h says why); in a build without CUDA they report that.
#include <memory>
#include <string>

#include "sfb/cnn/network.h"

namespace sfb::cnn::cuda {

// Whether this build has the CUDA layers (says nothing about a device being present).
bool built();
// Number of CUDA devices that answer (0 without CUDA or without a device); `why` gets the reason
// when there are none.
int device_count(std::string* why = nullptr);
// "CUDA runtime X.Y, cuDNN N" for logs (empty in a build without CUDA; why the module does not load
// where it does not).
std::string library_versions();
// A backend for `net` on device (local_rank % device count). Throws InvalidArgument naming the
// reason when this build has no CUDA or no device answers.
std::unique_ptr<DeviceBackend> make_backend(Network& net, int local_rank);

}  // namespace sfb::cnn::cuda
