// The CUDA backend's functions (cuda_backend.h) for every build: where the CUDA layers were built
// (SFB_CUDA_MODULE), they load libsfb_cuda.so on first use (cuda_module.h says why); otherwise
// they report that this build has no CUDA.
#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <mutex>
#include <string>

#include <fmt/format.h>

#include "sfb/cnn/cuda/cuda_backend.h"
#include "sfb/cnn/cuda/cuda_module.h"
#include "sfb/core/error.h"

namespace sfb::cnn::cuda {

namespace {

#ifdef SFB_CUDA_MODULE
// The module sits in lib/sfb/ beside the executables' directory: build/apps or build/tests and
// build/lib/sfb in the build tree, bin and lib/sfb where installed.
std::string module_path() {
  char exe[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  std::string dir = n > 0 ? std::string(exe, static_cast<size_t>(n)) : std::string();
  dir = dir.substr(0, dir.find_last_of('/') + 1);
  return dir + "../lib/sfb/" SFB_CUDA_MODULE;
}

// The table, or null with the reason in `why`. Loaded once per process; a module that cannot be
// loaded is not tried again.
const ModuleTable* module(std::string* why) {
  static std::once_flag once;
  static const ModuleTable* table = nullptr;
  static std::string error;
  std::call_once(once, [] {
    const std::string path = module_path();
    void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = ::dlerror();
      error = fmt::format("this sfb was built with CUDA, but its CUDA module {} does not load: {}", path,
                          e ? e : "no reason given");
      return;
    }
    auto entry = reinterpret_cast<const ModuleTable* (*)()>(::dlsym(h, "sfb_cuda_module"));
    const ModuleTable* t = entry ? entry() : nullptr;
    if (!t || t->abi != kModuleAbi) {
      error = fmt::format("the CUDA module {} is from another build of sfb (module table {}, this sfbd {})", path,
                          t ? t->abi : 0, kModuleAbi);
      return;
    }
    table = t;
  });
  if (!table && why) *why = error;
  return table;
}
#else
const ModuleTable* module(std::string* why) {
  if (why) *why = "this sfb was built without CUDA (configure with -DSFB_WITH_CUDA=ON where nvcc is installed)";
  return nullptr;
}
#endif

}  // namespace

bool built() {
#ifdef SFB_CUDA_MODULE
  return true;
#else
  return false;
#endif
}

int device_count(std::string* why) {
  const ModuleTable* m = module(why);
  return m ? m->device_count(why) : 0;
}

std::string library_versions() {
  std::string why;
  const ModuleTable* m = module(&why);
  return m ? m->library_versions() : built() ? why : std::string();
}

std::unique_ptr<DeviceBackend> make_backend(Network& net, int local_rank) {
  std::string why;
  const ModuleTable* m = module(&why);
  if (!m) throw InvalidArgument("device = \"cuda\": " + why);
  return m->make_backend(net, local_rank);
}

}  // namespace sfb::cnn::cuda
