#include "error.h"

#include <new>

namespace spora::plugin {
namespace {

struct OwnedError : spora_plugin_error_t {
  std::string text;
};

void destroy_owned(spora_plugin_error_t* e) { delete static_cast<OwnedError*>(e); }
void destroy_static(spora_plugin_error_t*) {}

spora_plugin_error_t oom_error = {sizeof(spora_plugin_error_t), SPORA_PLUGIN_OUT_OF_MEMORY,
                                  "[plugin] out of memory while reporting an error", destroy_static};

}  // namespace

spora_plugin_error_t* make_error(int32_t code, std::string message) {
  auto* e = new (std::nothrow) OwnedError;
  if (!e) return &oom_error;
  try {
    e->text = std::move(message);
  } catch (...) {
    delete e;
    return &oom_error;
  }
  e->struct_size = sizeof(spora_plugin_error_t);
  e->code = code;
  e->message = e->text.c_str();
  e->destroy = destroy_owned;
  return e;
}

spora_plugin_error_t* make_error(int32_t code, const char* message) noexcept {
  try {
    return make_error(code, std::string(message ? message : ""));
  } catch (...) {
    return &oom_error;
  }
}

}  // namespace spora::plugin
