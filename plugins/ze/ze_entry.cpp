// Exported entry points, the device table, and the lifecycle/device queries
// of the Level Zero plugin (the vendor NPU path of DESIGN.md).
//
// No Level Zero device or driver exists where this was written: everything
// past zeInit compiled and linked, but never ran. See docs/plugins-ze-nccl.md.
#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include "error.h"
#include "ze_api.h"
#include "ze_state.h"

namespace spora::ze {
namespace {

using spora::plugin::guard;

#if defined(__clang__)
constexpr const char* kBuild = "clang " __clang_version__ ", Level Zero API 1.4 headers, SPIR-V kernels (OpenCL C 2.0)";
#else
constexpr const char* kBuild = "g++ " __VERSION__ ", Level Zero API 1.4 headers, SPIR-V kernels (OpenCL C 2.0)";
#endif

constexpr spora_device_api_t kTable = SPORA_SDK_TABLE(spora_device_api_t, SPORA_ZE_DEVICE_FUNCTIONS);

// The driver libraries the Level Zero loader 1.8 looks for (its own list),
// besides the ones ZE_ENABLE_ALT_DRIVERS names.
const char* const kDrivers[] = {"libze_intel_gpu.so.1", "libze_intel_vpu.so.1"};

}  // namespace

spora_plugin_error_t* initialize() {
  return guard("ze", [] { return create_state(); });
}

spora_plugin_error_t* device_count(int32_t* out_count) {
  return guard("ze", [&]() -> spora_plugin_error_t* {
    if (!out_count) return invalid("device_count: out_count is NULL");
    State* st = nullptr;
    if (auto* e = get_state(&st)) return e;
    *out_count = static_cast<int32_t>(st->devices.size());
    return nullptr;
  });
}

spora_plugin_error_t* device_properties(int32_t device, spora_device_properties_t* out) {
  return guard("ze", [&]() -> spora_plugin_error_t* {
    if (!out) return invalid("device_properties: out is NULL");
    Device* d = nullptr;
    if (auto* e = get_device("device_properties", device, &d)) return e;
    using P = spora_device_properties_t;
    const auto& p = d->props;
    if (SPORA_STRUCT_HAS(out, P, name)) out->name = d->name.c_str();
    if (SPORA_STRUCT_HAS(out, P, vendor)) out->vendor = p.vendorId == 0x8086 ? "Intel" : "Level Zero vendor";
    if (SPORA_STRUCT_HAS(out, P, arch)) out->arch = d->arch.c_str();
    if (SPORA_STRUCT_HAS(out, P, memory_bytes)) out->memory_bytes = d->memory_bytes;
    if (SPORA_STRUCT_HAS(out, P, compute_units))
      out->compute_units = static_cast<int32_t>(p.numSlices * p.numSubslicesPerSlice * p.numEUsPerSubslice);
    if (SPORA_STRUCT_HAS(out, P, unified_memory))
      out->unified_memory = (p.flags & ZE_DEVICE_PROPERTY_FLAG_INTEGRATED) ? 1 : 0;
    if (SPORA_STRUCT_HAS(out, P, max_streams)) out->max_streams = 0;
    if (SPORA_STRUCT_HAS(out, P, alignment)) out->alignment = 256;
    return nullptr;
  });
}

void shutdown() {
  if (spora_plugin_error_t* err = guard("ze", [] {
        destroy_state();
        return static_cast<spora_plugin_error_t*>(nullptr);
      })) {
    host_log(SPORA_LOG_ERROR, std::string("[ze] shutdown failed: ") + err->message);
    err->destroy(err);
  }
}

}  // namespace spora::ze

extern "C" {

// Side-effect free: zeInit would initialise drivers (touch devices), so the
// probe only checks that a driver library exists, by dlopen and dlclose,
// as plugin.h allows. With none, the loader's zeInit has nothing to
// initialise and returns ZE_RESULT_ERROR_UNINITIALIZED, which
// initialize() reports word for word if the host calls it anyway.
SPORA_PLUGIN_EXPORT void spora_plugin_probe_v1(spora_probe_result_t* out) {
  const char* alt = std::getenv("ZE_ENABLE_ALT_DRIVERS");
  bool found = alt && *alt;
  for (const char* lib : spora::ze::kDrivers) {
    if (found) break;
    if (void* h = dlopen(lib, RTLD_LAZY | RTLD_LOCAL)) {
      dlclose(h);
      found = true;
    }
  }
  spora_sdk_probe_answer(out, found ? 60 : 0,
                         found ? ""
                               : "no device: no Level Zero driver installed (libze_intel_gpu.so.1 and "
                                 "libze_intel_vpu.so.1 not found, ZE_ENABLE_ALT_DRIVERS unset), so zeInit returns "
                                 "ZE_RESULT_ERROR_UNINITIALIZED; install the device's Level Zero driver");
}

SPORA_PLUGIN_EXPORT spora_plugin_error_t* spora_plugin_entry_v1(const spora_host_t* host, spora_plugin_info_t* out) {
  char why[SPORA_SDK_MESSAGE_MAX];
  if (const int32_t code = spora_sdk_check_entry(host, out, "ze", why, sizeof why))
    return spora::plugin::make_error(code, why);
  spora::ze::g_host.store(host, std::memory_order_release);
  spora_sdk_fill_info(out, SPORA_PLUGIN_KIND_DEVICE, "ze", "0.1.0", spora::ze::kBuild, &spora::ze::kTable);
  return nullptr;
}

}  // extern "C"
