// The one place exceptions stop: every extern "C" function runs its body in
// guard(), which maps exceptions to a status and records the message as the
// thread's last error.
#pragma once
#include <spora/spora.h>

#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/attrs.h"
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

// The value a C caller passed for a dtype. C lets any int through an enum
// parameter, but in C++ loading an enum object whose value lies outside the
// enum's range is undefined (UBSan: "load of value 99, which is not a valid
// value for type 'spora_dtype'"): its bytes are read as an int, and only a
// valid value is used as the enum.
inline int32_t dtype_arg(const spora_dtype_t& dtype) {
  static_assert(sizeof(spora_dtype_t) == sizeof(int32_t), "spora_dtype_t is a 32-bit C enum");
  int32_t v = 0;
  std::memcpy(&v, &dtype, sizeof v);
  return v;
}

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

// Hands `ts` to the caller as new handles in out[0, ts.size()): all of them,
// or none when allocating one fails.
inline void publish(std::vector<Tensor>& ts, spora_tensor_t** out) {
  std::vector<spora_tensor_t*> handles(ts.size(), nullptr);
  try {
    for (size_t i = 0; i < ts.size(); ++i) handles[i] = new spora_tensor{std::move(ts[i])};
  } catch (...) {
    for (auto* h : handles) delete h;
    throw;
  }
  for (size_t i = 0; i < handles.size(); ++i) out[i] = handles[i];
}

// The body of the C API's graph and model runs: checks the argument arrays
// (a null `params` array, named `what`; the output count, `who` naming the
// graph or model), runs `run` on the params' tensors and publishes its
// results. A null handle inside `params` reaches `run` as null, for the
// runner to name the input it binds.
template <class Run>
void run_and_publish(const char* fn, const char* what, const std::string& who, size_t graph_outputs,
                     spora_tensor_t* const* params, size_t num_params, spora_tensor_t** outputs,
                     size_t num_outputs, Run&& run) {
  if (num_params) need(params, fn, what);
  if (num_outputs != graph_outputs)
    fail(Code::kInvalidArgument, "{} has {} outputs, caller asked for {}", who, graph_outputs, num_outputs);
  if (num_outputs) need(outputs, fn, "outputs");
  std::vector<const Tensor*> in(num_params);
  for (size_t i = 0; i < num_params; ++i) in[i] = params[i] ? &params[i]->t : nullptr;
  std::vector<Tensor> outs = run(in);
  publish(outs, outputs);
}

}  // namespace spora::abi
