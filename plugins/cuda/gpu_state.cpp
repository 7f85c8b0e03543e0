#include "gpu_state.h"

#include <mutex>
#include <string>

#include "error.h"
#if !defined(SPORA_GPU_HIP)
#include "gpu_blas.h"
#include "gpu_dnn.h"
#include "gpu_nvrtc.h"
#endif

namespace spora::gpu {

std::atomic<const spora_host_t*> g_host{nullptr};

namespace {

// Created by initialize (host thread, once), deleted by shutdown (host
// thread, at exit); table functions only read the pointer.
std::atomic<State*> g_state{nullptr};

// The device's first sticky error ("" while healthy): once the context has
// one, every runtime call returns it until the process exits.
std::mutex g_failed_mu;
std::string g_failed;

int32_t code_of(cudaError_t e) {
  if (is_sticky(e)) return SPORA_PLUGIN_UNAVAILABLE;
  switch (e) {
    case cudaErrorMemoryAllocation: return SPORA_PLUGIN_OUT_OF_MEMORY;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver: return SPORA_PLUGIN_UNAVAILABLE;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevice: return SPORA_PLUGIN_INVALID_ARGUMENT;
    default: return SPORA_PLUGIN_INTERNAL;
  }
}

std::string arch_of(const cudaDeviceProp& p) {
#if defined(SPORA_GPU_HIP)
  // "gfx90a:sramecc+:xnack-": the target id without its feature flags.
  const std::string id = p.gcnArchName;
  return id.substr(0, id.find(':'));
#else
  return "sm_" + std::to_string(p.major) + std::to_string(p.minor);
#endif
}

}  // namespace

void host_log(int32_t level, const std::string& message) {
  const spora_host_t* host = g_host.load(std::memory_order_acquire);
  if (host && SPORA_STRUCT_HAS(host, spora_host_t, services) && host->services &&
      SPORA_STRUCT_HAS(host->services, spora_host_services_t, log) && host->services->log)
    host->services->log(host->services->ctx, level, kPluginName, message.c_str());
}

spora_plugin_error_t* plugin_error(int32_t code, const std::string& message) {
  return spora::plugin::make_error(code, std::string("[") + kPluginName + "] " + message);
}

bool is_sticky(cudaError_t e) {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
#if !defined(SPORA_GPU_HIP)
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
#endif
      return true;
    default: return false;
  }
}

spora_plugin_error_t* runtime_error(const std::string& what, cudaError_t e) {
  std::string msg = what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
  if (is_sticky(e)) {
    // Reported by whichever call meets it first, which is rarely the call
    // that caused it (kernels run asynchronously).
    msg += "; the device has failed (a sticky error: every later call fails the same way) -- restart the process";
    std::lock_guard<std::mutex> lock(g_failed_mu);
    if (g_failed.empty()) {
      g_failed = msg;
      host_log(SPORA_LOG_ERROR, "device failed: " + msg);
    }
  }
  return plugin_error(code_of(e), msg);
}

spora_plugin_error_t* failed_error(const std::string& what) {
  std::lock_guard<std::mutex> lock(g_failed_mu);
  if (g_failed.empty()) return nullptr;
  return plugin_error(SPORA_PLUGIN_UNAVAILABLE, what + ": the device failed earlier: " + g_failed);
}

cudaError_t take_stale_error(const char* what) {
  const cudaError_t prior = cudaGetLastError();
  if (prior != cudaSuccess && !is_sticky(prior))
    host_log(SPORA_LOG_DEBUG, std::string(what) + ": cleared an earlier call's error " + cudaGetErrorName(prior));
  return is_sticky(prior) ? prior : cudaSuccess;
}

spora_plugin_error_t* create_state() {
  if (g_state.load(std::memory_order_acquire)) return nullptr;  // initialize is called once; be idempotent anyway
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) return runtime_error(std::string("no device: cudaGetDeviceCount failed"), e);
  if (count <= 0)
    return plugin_error(SPORA_PLUGIN_UNAVAILABLE, std::string("no device: the ") + kRuntimeName + " runtime found 0 devices");
  auto state = std::make_unique<State>();
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop{};
    if (cudaError_t pe = cudaGetDeviceProperties(&prop, d); pe != cudaSuccess)
      return runtime_error("cudaGetDeviceProperties(" + std::to_string(d) + ")", pe);
    Device dev;
    dev.name = prop.name;
    dev.arch = arch_of(prop);
    dev.memory_bytes = prop.totalGlobalMem;
    dev.compute_units = prop.multiProcessorCount;
    state->devices.push_back(std::move(dev));
  }
  host_log(SPORA_LOG_INFO, std::string(kRuntimeName) + ": " + std::to_string(count) + " device(s), first " +
                               state->devices[0].name + " (" + state->devices[0].arch + ")");
#if !defined(SPORA_GPU_HIP)
  // Optional: cuBLASLt serves matmul and linear (blas::load logs it); cuBLAS
  // is its f32/f64 fallback, the own GEMM the last one.
  if (const std::string why = blas::load(); !why.empty())
    host_log(SPORA_LOG_WARN, "cuBLAS not loaded (" + why + "): where cuBLASLt takes no form of a matmul, the plugin's own GEMM runs");
  else
    host_log(SPORA_LOG_INFO, "cuBLAS loaded: the f32/f64 fallback where cuBLASLt takes no form of a matmul");
  // Optional: without cuDNN, convolution, pooling and batch norm run elsewhere.
  if (const std::string why = dnn::load(); !why.empty())
    host_log(SPORA_LOG_WARN, "cuDNN not loaded (" + why + "): convolution, pooling and batch norm are unsupported");
  else
    host_log(SPORA_LOG_INFO, "cuDNN loaded: convolution, pooling and batch norm use it");
  // Optional: without NVRTC, fused_elementwise regions are unsupported (their ops run unfused).
  if (const std::string why = rtc::load(); !why.empty())
    host_log(SPORA_LOG_WARN, "NVRTC not loaded (" + why + "): fused_elementwise is unsupported");
  else
    host_log(SPORA_LOG_INFO, "NVRTC loaded: fused_elementwise regions are compiled at plan time");
#endif
  g_state.store(state.release(), std::memory_order_release);
  return nullptr;
}

void destroy_state() {
  State* state = g_state.exchange(nullptr, std::memory_order_acq_rel);
  if (!state) return;
  // Streams first (their work may use events and kernels' buffers).
  for (const auto& s : state->streams.all()) {
    (void)cudaSetDevice(s->device);  // a failure shows in the calls below
    (void)cudaStreamSynchronize(s->stream);  // at exit: nothing left to report to
    (void)cudaStreamDestroy(s->stream);
  }
  for (const auto& ev : state->events.all()) {
    (void)cudaSetDevice(ev->device);  // a failure shows in the call below
    (void)cudaEventDestroy(ev->event);
  }
#if !defined(SPORA_GPU_HIP)
  blas::unload();
  dnn::unload();
  rtc::unload();
#endif
  delete state;
}

spora_plugin_error_t* get_state(State** out) {
  State* state = g_state.load(std::memory_order_acquire);
  if (!state) return plugin_error(SPORA_PLUGIN_UNAVAILABLE, "not initialized (initialize failed or was not called)");
  *out = state;
  return nullptr;
}

spora_plugin_error_t* use_device(const char* what, int32_t device) {
  State* state = nullptr;
  if (auto* err = get_state(&state)) return err;
  if (device < 0 || device >= static_cast<int32_t>(state->devices.size()))
    return plugin_error(SPORA_PLUGIN_NOT_FOUND, std::string(what) + ": no device " + std::to_string(device) + " (" +
                                                    std::to_string(state->devices.size()) + " present)");
  if (auto* err = failed_error(what)) return err;
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) return runtime_error(std::string(what) + ": cudaSetDevice", e);
  return nullptr;
}

spora_plugin_error_t* get_stream(const char* what, spora_stream_t* handle, std::shared_ptr<Stream>* out) {
  State* state = nullptr;
  if (auto* err = get_state(&state)) return err;
  auto s = state->streams.find(handle);
  if (!s) return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, std::string(what) + ": " + (handle ? "unknown or destroyed stream" : "stream is NULL"));
  if (auto* err = failed_error(what)) return err;
  if (cudaError_t e = cudaSetDevice(s->device); e != cudaSuccess) return runtime_error(std::string(what) + ": cudaSetDevice", e);
  *out = std::move(s);
  return nullptr;
}

spora_plugin_error_t* get_event(const char* what, spora_event_t* handle, std::shared_ptr<Event>* out) {
  State* state = nullptr;
  if (auto* err = get_state(&state)) return err;
  auto ev = state->events.find(handle);
  if (!ev) return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, std::string(what) + ": " + (handle ? "unknown or destroyed event" : "event is NULL"));
  if (cudaError_t e = cudaSetDevice(ev->device); e != cudaSuccess) return runtime_error(std::string(what) + ": cudaSetDevice", e);
  *out = std::move(ev);
  return nullptr;
}

}  // namespace spora::gpu
