// Last-error storage, status names, versions, dtype helpers.
#include <string>

#include "abi/abi.h"
#include "ir/dtype.h"

namespace spora::abi {
namespace {
thread_local std::string t_last_error;
}

void set_last_error(const char* message) {
  try {
    t_last_error = message;
  } catch (...) {
    // Out of memory while recording: keep the previous message.
  }
}

}  // namespace spora::abi

extern "C" {

const char* spora_last_error(void) { return spora::abi::t_last_error.c_str(); }

const char* spora_status_string(spora_status_t s) {
  switch (s) {
    case SPORA_OK: return "ok";
    case SPORA_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case SPORA_ERROR_NOT_FOUND: return "not found";
    case SPORA_ERROR_UNAVAILABLE: return "unavailable";
    case SPORA_ERROR_UNIMPLEMENTED: return "unimplemented";
    case SPORA_ERROR_OUT_OF_MEMORY: return "out of memory";
    case SPORA_ERROR_TIMEOUT: return "timeout";
    case SPORA_ERROR_ABORTED: return "aborted";
    case SPORA_ERROR_INTERNAL: return "internal error";
    case SPORA_ERROR_IO: return "i/o error";
    default: return "unknown status";
  }
}

spora_status_t spora_version(int32_t* major, int32_t* minor, int32_t* patch) {
  return spora::abi::guard([&] {
    if (major) *major = SPORA_VERSION_MAJOR;
    if (minor) *minor = SPORA_VERSION_MINOR;
    if (patch) *patch = SPORA_VERSION_PATCH;
  });
}

size_t spora_dtype_size(spora_dtype_t dtype) {
  const int32_t v = spora::abi::dtype_arg(dtype);
  return spora::dtype_valid(v) ? spora::dtype_size(static_cast<spora::DType>(v)) : 0;
}
const char* spora_dtype_name(spora_dtype_t dtype) {
  const int32_t v = spora::abi::dtype_arg(dtype);
  return spora::dtype_valid(v) ? spora::dtype_name(static_cast<spora::DType>(v)) : "invalid";
}

}  // extern "C"
