#include "sfb/models/plugin_loader.h"

#include <dlfcn.h>

#include <filesystem>

#include "sfb/core/error.h"
#include "sfb/core/strings.h"
#include "sfb/models/guarded_model.h"

namespace sfb::models {

ModelPtr load_plugin(const std::string& given, const api::ModelContext& ctx) {
  for (const auto& part : std::filesystem::path(given))
    SFB_CHECK(part.native().size() <= 255, "model.plugin: a file name of {} characters (at most 255): {}",
              part.native().size(), excerpt(given));
  std::error_code ec;
  // Messages name the absolute path: which file a relative path meant is the usual question.
  const std::filesystem::path abs = std::filesystem::absolute(given, ec).lexically_normal();
  const std::string path = ec ? given : abs.string();
  SFB_CHECK(std::filesystem::exists(path, ec), "model.plugin: no such file: {}{}", excerpt(path, 300),
            path == given ? "" : fmt::format(" (model.plugin = {})", excerpt(given, 300)));
  SFB_CHECK(!std::filesystem::is_directory(path, ec), "model.plugin: {} is a directory, not a shared library", path);
  // A path without a slash would make dlopen search the library path instead of this file.
  const std::string open_path = path.find('/') == std::string::npos ? "./" + path : path;
  void* raw = dlopen(open_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!raw) throw InvalidArgument(fmt::format("model.plugin: cannot load {}: {}", path, dlerror()));
  std::shared_ptr<void> lib(raw, [](void* h) { dlclose(h); });
  auto symbol = [&](const char* name) {
    dlerror();
    void* s = dlsym(lib.get(), name);
    if (!s)
      throw InvalidArgument(
          fmt::format("model.plugin: {} does not export {}(); a plugin defines its model with "
                      "SFB_DEFINE_PLUGIN(Class) from <sfb/api/plugin.h>",
                      path, name));
    return s;
  };
  auto version = reinterpret_cast<api::PluginAbiVersionFn>(symbol(api::kPluginAbiVersionSymbol));
  auto create = reinterpret_cast<api::PluginCreateFn>(symbol(api::kPluginCreateSymbol));
  auto destroy = reinterpret_cast<api::PluginDestroyFn>(symbol(api::kPluginDestroySymbol));
  const int32_t v = version();
  SFB_CHECK(v == api::kPluginAbiVersion,
            "model.plugin: {} was built for plugin ABI version {} ({:#x}), this sfbd speaks version {} ({:#x}, see "
            "sfbd --version); rebuild the plugin against this sfb's headers",
            path, v, v, api::kPluginAbiVersion, api::kPluginAbiVersion);
  api::Model* m = nullptr;
  guard_plugin_call(path, "its constructor", [&] { m = create(&ctx); });
  SFB_CHECK(m != nullptr, "model.plugin: {}: sfb_plugin_create returned no model", path);
  ModelPtr inner(m, ModelDeleter{destroy, std::move(lib)});
  return ModelPtr(new GuardedModel(std::move(inner), path));
}

}  // namespace sfb::models
