// The CUDA backend's functions in a build without CUDA (SFB_WITH_CUDA off or nvcc not found).
#include "sfb/cnn/cuda/cuda_backend.h"

#include "sfb/core/error.h"

namespace sfb::cnn::cuda {

bool built() { return false; }

int device_count(std::string* why) {
  if (why) *why = "this sfb was built without CUDA (configure with -DSFB_WITH_CUDA=ON where nvcc is installed)";
  return 0;
}

std::string library_versions() { return {}; }

std::unique_ptr<DeviceBackend> make_backend(Network&, int) {
  std::string why;
  device_count(&why);
  throw InvalidArgument("device = \"cuda\": " + why);
}

}  // namespace sfb::cnn::cuda
