// A plugin built for another ABI version: sfbd must refuse it before calling its factory.
#include <cstdint>

extern "C" __attribute__((visibility("default"))) int32_t sfb_plugin_abi_version() { return 999; }
extern "C" __attribute__((visibility("default"))) void* sfb_plugin_create(const void*) { return nullptr; }
extern "C" __attribute__((visibility("default"))) void sfb_plugin_destroy(void*) {}
