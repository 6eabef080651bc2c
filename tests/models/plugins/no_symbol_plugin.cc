// A shared library that is not an sfb plugin: it exports none of the plugin symbols.
extern "C" __attribute__((visibility("default"))) int not_a_plugin() { return 1; }
