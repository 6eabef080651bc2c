#pragma once
// The plugin ABI. A user model is a shared library that implements sfb::api::Model and exports
// three C functions, all written by one macro:
//
//   #include <sfb/api/plugin.h>
//   class MyModel : public sfb::api::Model { ... explicit MyModel(const sfb::api::ModelContext&); };
//   SFB_DEFINE_PLUGIN(MyModel)
//
// and is named in the config: `model.plugin = "path/libmy_model.so"`. sfbd checks
// sfb_plugin_abi_version() against kPluginAbiVersion before calling anything else; the model is
// destroyed by the library that made it. Everything a plugin calls in sfb is virtual or inline, so
// the library links nothing of sfb (find_package(sfb) gives the headers as sfb::api).
//
// kPluginAbiVersion (sfb/api/abi_id.h) is computed at build time from the API headers
// themselves: any change to Model, ModelContext, SfWriter, MiniBatch, Weights, the errors or the
// data types they use gives another id, and sfbd refuses a plugin built against other headers.
#include <cstdint>

#include "sfb/api/abi_id.h"
#include "sfb/api/model.h"

namespace sfb::api {

extern "C" {
using PluginAbiVersionFn = int32_t (*)();
using PluginCreateFn = Model* (*)(const ModelContext*);
using PluginDestroyFn = void (*)(Model*);
}

inline constexpr const char* kPluginAbiVersionSymbol = "sfb_plugin_abi_version";
inline constexpr const char* kPluginCreateSymbol = "sfb_plugin_create";
inline constexpr const char* kPluginDestroySymbol = "sfb_plugin_destroy";

}  // namespace sfb::api

// Exports the plugin's factory for `ModelClass` (constructible from const ModelContext&).
#define SFB_DEFINE_PLUGIN(ModelClass)                                                     \
  extern "C" __attribute__((visibility("default"))) int32_t sfb_plugin_abi_version() {    \
    return ::sfb::api::kPluginAbiVersion;                                                 \
  }                                                                                       \
  extern "C" __attribute__((visibility("default"))) ::sfb::api::Model* sfb_plugin_create( \
      const ::sfb::api::ModelContext* ctx) {                                              \
    return new ModelClass(*ctx);                                                          \
  }                                                                                       \
  extern "C" __attribute__((visibility("default"))) void sfb_plugin_destroy(::sfb::api::Model* m) { delete m; }
