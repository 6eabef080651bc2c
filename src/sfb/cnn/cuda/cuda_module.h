#pragma once
// The table the CUDA module (libsfb_cuda.so, built from cuda_backend.cu) hands the loader
// (cuda_backend_loader.cc). The module is loaded on first use, so a process that never asks for a
// CUDA device never maps cuBLAS, cuBLASLt, cuDNN or the CUDA runtime: their load and static
// initialisation cost about 0.7 s of CPU and 200 MB of RSS per process (docs/performance.md),
// which every rank of every job and every test used to pay.
//
// The module resolves the sfb symbols it uses (Network, Layer, the error types) from the executable
// that loads it: executables that link sfb::cnn export sfb's C++ symbols (cuda_exports.list).
#include <memory>
#include <string>

#include "sfb/cnn/network.h"

namespace sfb::cnn::cuda {

// Raised whenever the table or the functions' meaning change: a module from another build is refused.
inline constexpr int kModuleAbi = 1;

struct ModuleTable {
  int abi = kModuleAbi;
  int (*device_count)(std::string* why) = nullptr;
  std::string (*library_versions)() = nullptr;
  std::unique_ptr<DeviceBackend> (*make_backend)(Network& net, int local_rank) = nullptr;
};

}  // namespace sfb::cnn::cuda

// The module's one entry point (C linkage: found by dlsym under this name).
extern "C" const sfb::cnn::cuda::ModuleTable* sfb_cuda_module();
