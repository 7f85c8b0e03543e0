// C API: process-wide options (runtime/options.h).
#include "abi/abi.h"
#include "runtime/options.h"

using spora::abi::guard;
using spora::abi::need;

extern "C" {

spora_status_t spora_set_option(const char* key, const char* value) {
  return guard([&] {
    need(key, "spora_set_option", "key");
    need(value, "spora_set_option", "value");
    spora::set_option(key, value);
  });
}

spora_status_t spora_get_option(const char* key, const char** out) {
  return guard([&] {
    need(key, "spora_get_option", "key");
    *need(out, "spora_get_option", "out") = spora::get_option(key);
  });
}

}  // extern "C"
