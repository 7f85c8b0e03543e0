// The one place exceptions stop: every extern "C" function runs its body in
// guard(), which maps exceptions to a status and records the message as the
// thread's last error.
#pragma once
#include <spora/spora.h>

#include <mutex>
#include <new>
#include <vector>

#include "ir/graph.h"
#include "ops/attrs.h"
#include "runtime/context.h"
#include "runtime/tensor.h"
#include "support/error.h"

struct spora_context {
  spora::Context ctx;
};
struct spora_tensor {
  spora::Tensor t;
};
struct spora_attrs {
  spora::Attrs attrs;
};
struct spora_graph {
  spora::ir::Graph g;
  std::string text;  // backs the strings returned by to_text/to_json
};

namespace spora::abi {

void set_last_error(const char* message);

template <class Fn>
spora_status_t guard(Fn&& fn) noexcept {
  try {
    fn();
    return SPORA_OK;
  } catch (const Error& e) {
    set_last_error(e.what());
    return static_cast<spora_status_t>(e.code());
  } catch (const std::bad_alloc&) {
    set_last_error("out of memory");
    return SPORA_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    set_last_error(e.what());
    return SPORA_ERROR_INTERNAL;
  } catch (...) {
    set_last_error("unknown internal error");
    return SPORA_ERROR_INTERNAL;
  }
}

// Fails with a message naming the function when a required pointer is null.
template <class T>
T* need(T* p, const char* fn, const char* arg) {
  if (!p) fail(Code::kInvalidArgument, "[{}] {} is null", fn, arg);
  return p;
}

// Handles for process-wide objects are their internal pointers.
inline spora_device_t* to_handle(Device* d) { return reinterpret_cast<spora_device_t*>(d); }
inline Device* from_handle(spora_device_t* d) { return reinterpret_cast<Device*>(d); }
inline const Device* from_handle(const spora_device_t* d) { return reinterpret_cast<const Device*>(d); }
inline spora_plugin_t* to_handle(PluginEntry* p) { return reinterpret_cast<spora_plugin_t*>(p); }
inline const PluginEntry* from_handle(const spora_plugin_t* p) { return reinterpret_cast<const PluginEntry*>(p); }

}  // namespace spora::abi
