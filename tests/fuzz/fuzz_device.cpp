#include <cstdio>
#include <cstdlib>

#include "fuzz_util.h"
#include "runtime/context.h"

// No leak check at exit: LeakSanitizer dies there once the sim plugin's
// threads are up ("Tracer caught signal 11"), and the device is kept for the
// whole process on purpose.
extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }

namespace spora::fuzz {

Device* device() {
  static Device* d = []() -> Device* {
    const char* dir = std::getenv("SPORA_FUZZ_PLUGIN_DIR");
    if (!dir || !*dir) return nullptr;
    setenv("SPORA_PLUGIN_SANDBOX", "0", 1);
    auto* c = new Context;  // lives as long as the process, like libspora's
    c->add_plugin_path(dir);
    try {
      return c->find_device("sim");
    } catch (const Error& e) {
      std::fprintf(stderr, "spora fuzz: no sim device in %s (%s); device steps are skipped\n", dir, e.what());
      return nullptr;
    }
  }();
  return d;
}

}  // namespace spora::fuzz
