// Plugin-owned error objects (see spora_plugin_error_t in spora/plugin.h).
#pragma once
#include <spora/plugin.h>

#include <string>

namespace spora::plugin {

// Returns a new error the receiver frees with err->destroy(err). Never NULL:
// if allocation fails, a static out-of-memory error with a no-op destroy.
spora_plugin_error_t* make_error(int32_t code, std::string message);
// The same for a C string; never throws (entry points use it).
spora_plugin_error_t* make_error(int32_t code, const char* message) noexcept;

// Runs `fn`, turning any C++ exception into an error object, so that no
// exception crosses the plugin boundary.
template <class Fn>
spora_plugin_error_t* guard(const char* what, Fn&& fn) noexcept {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return make_error(SPORA_PLUGIN_OUT_OF_MEMORY, std::string("[") + what + "] out of memory");
  } catch (const std::exception& e) {
    return make_error(SPORA_PLUGIN_INTERNAL, std::string("[") + what + "] " + e.what());
  } catch (...) {
    return make_error(SPORA_PLUGIN_INTERNAL, std::string("[") + what + "] unknown exception");
  }
}

}  // namespace spora::plugin
