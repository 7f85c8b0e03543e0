// Exported entry points, the device table, and the lifecycle/device queries
// of the CUDA plugin (and, through gpu_runtime.h, the ROCm plugin).
//
// The probe decides "can this run here?" without starting a driver: it
// checks that the driver is installed (libcuda.so.1 / /dev/kfd). Only when
// it is not does it ask the runtime for the device count -- with no driver
// there is nothing for the runtime to start -- so the reason carries the
// runtime's own error ("cudaErrorInsufficientDriver", "hipErrorNoDevice").
#include <dlfcn.h>
#include <unistd.h>

#include <string>

#include "error.h"
#include "gpu_api.h"
#include "gpu_state.h"

namespace spora::gpu {
namespace {

using spora::plugin::guard;

#if defined(__clang__)
#define SPORA_GPU_HOST_CC "clang " __clang_version__
#elif defined(__GNUC__)
#define SPORA_GPU_HOST_CC "g++ " __VERSION__
#else
#define SPORA_GPU_HOST_CC "unknown compiler"
#endif
#ifndef SPORA_GPU_ARCHS
#define SPORA_GPU_ARCHS "unknown"
#endif
#if defined(SPORA_GPU_HIP)
constexpr const char* kBuild = "HIP " SPORA_GPU_ARCHS ", host " SPORA_GPU_HOST_CC;
#else
constexpr const char* kBuild = "CUDA " SPORA_GPU_ARCHS " (cudart static), host " SPORA_GPU_HOST_CC;
#endif

constexpr spora_device_api_t kTable = SPORA_SDK_TABLE(spora_device_api_t, SPORA_GPU_DEVICE_FUNCTIONS);

// Fills `reason` and returns the probe score.
int32_t probe(std::string* reason) {
#if defined(SPORA_GPU_HIP)
  if (access("/dev/kfd", R_OK | W_OK) == 0) return 100;
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  *reason = std::string("no device: hipGetDeviceCount returned ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
            "); /dev/kfd is missing: no amdgpu kernel driver or no AMD GPU";
  return 0;
#else
  if (void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL)) {
    // Installed: check it is new enough for this runtime (no driver start).
    using GetVersion = int (*)(int*);
    int version = 0;
    auto get = reinterpret_cast<GetVersion>(dlsym(lib, "cuDriverGetVersion"));
    const bool ok = get && get(&version) == 0;
    dlclose(lib);
    if (ok && version < CUDART_VERSION) {
      *reason = "no device: the NVIDIA driver supports CUDA " + std::to_string(version / 1000) + "." +
                std::to_string(version % 1000 / 10) + ", this plugin needs " + std::to_string(CUDART_VERSION / 1000) +
                "." + std::to_string(CUDART_VERSION % 1000 / 10) + ": update the driver";
      return 0;
    }
    return 100;
  }
  const char* dl_msg = dlerror();  // copied now: the runtime's own dlopen overwrites it
  const std::string dl = dl_msg ? dl_msg : "libcuda.so.1 not found";
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  // Kept under the 255 characters of spora_probe_result_t.reason.
  *reason = std::string("no device: cudaGetDeviceCount returned ") + std::to_string(static_cast<int>(e)) + " (" +
            cudaGetErrorString(e) + "); no NVIDIA driver: " + dl;
  return 0;
#endif
}

}  // namespace

spora_plugin_error_t* initialize() {
  return guard(kPluginName, [] { return create_state(); });
}

spora_plugin_error_t* device_count(int32_t* out_count) {
  return guard(kPluginName, [&]() -> spora_plugin_error_t* {
    if (!out_count) return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, "device_count: out_count is NULL");
    State* state = nullptr;
    if (auto* err = get_state(&state)) return err;
    *out_count = static_cast<int32_t>(state->devices.size());
    return nullptr;
  });
}

spora_plugin_error_t* device_properties(int32_t device, spora_device_properties_t* out) {
  return guard(kPluginName, [&]() -> spora_plugin_error_t* {
    if (!out) return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, "device_properties: out is NULL");
    State* state = nullptr;
    if (auto* err = get_state(&state)) return err;
    if (device < 0 || device >= static_cast<int32_t>(state->devices.size()))
      return plugin_error(SPORA_PLUGIN_NOT_FOUND, "device_properties: no device " + std::to_string(device));
    const Device& d = state->devices[static_cast<size_t>(device)];
    using P = spora_device_properties_t;
    if (SPORA_STRUCT_HAS(out, P, name)) out->name = d.name.c_str();
#if defined(SPORA_GPU_HIP)
    if (SPORA_STRUCT_HAS(out, P, vendor)) out->vendor = "AMD";
#else
    if (SPORA_STRUCT_HAS(out, P, vendor)) out->vendor = "NVIDIA";
#endif
    if (SPORA_STRUCT_HAS(out, P, arch)) out->arch = d.arch.c_str();
    if (SPORA_STRUCT_HAS(out, P, memory_bytes)) out->memory_bytes = d.memory_bytes;
    if (SPORA_STRUCT_HAS(out, P, compute_units)) out->compute_units = d.compute_units;
    if (SPORA_STRUCT_HAS(out, P, unified_memory)) out->unified_memory = 0;
    if (SPORA_STRUCT_HAS(out, P, max_streams)) out->max_streams = 0;
    if (SPORA_STRUCT_HAS(out, P, alignment)) out->alignment = 256;  // cudaMalloc/hipMalloc guarantee
    return nullptr;
  });
}

void shutdown() {
  if (spora_plugin_error_t* err = guard(kPluginName, [] {
        destroy_state();
        return static_cast<spora_plugin_error_t*>(nullptr);
      })) {
    host_log(SPORA_LOG_ERROR, std::string("shutdown failed: ") + err->message);
    err->destroy(err);
  }
}

}  // namespace spora::gpu

extern "C" {

SPORA_PLUGIN_EXPORT void spora_plugin_probe_v1(spora_probe_result_t* out) {
  std::string reason;
  int32_t score = 0;
  try {
    score = spora::gpu::probe(&reason);
  } catch (...) {
    score = 0;
    reason = "probe failed (out of memory)";
  }
  spora_sdk_probe_answer(out, score, reason.c_str());
}

SPORA_PLUGIN_EXPORT spora_plugin_error_t* spora_plugin_entry_v1(const spora_host_t* host, spora_plugin_info_t* out) {
  using namespace spora::gpu;
  char why[SPORA_SDK_MESSAGE_MAX];
  if (const int32_t code = spora_sdk_check_entry(host, out, kPluginName, why, sizeof why))
    return spora::plugin::make_error(code, why);
  g_host.store(host, std::memory_order_release);
  spora_sdk_fill_info(out, SPORA_PLUGIN_KIND_DEVICE, kPluginName, "0.1.0", kBuild, &kTable);
  return nullptr;
}

}  // extern "C"
