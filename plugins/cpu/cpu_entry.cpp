// Probe, entry and lifecycle of the cpu device plugin.
#include <omp.h>
#include <unistd.h>

#include <cstdlib>

#include <string>
#include <thread>

#include "cpu_kernels.h"
#include "cpu_state.h"
#include "error.h"

namespace spora::cpu {

const spora_host_t* g_host = nullptr;

void log(int32_t level, const std::string& msg) {
  if (g_host && g_host->services && g_host->services->log)
    g_host->services->log(g_host->services->ctx, level, "cpu", msg.c_str());
}

namespace {

using plugin::guard;
using plugin::make_error;

bool g_initialized = false;

}  // namespace

spora_plugin_error_t* initialize() {
  return guard("cpu", [] {
    // One knob for the thread count of our loops and oneDNN's.
    char buf[32];
    if (g_host && g_host->services && g_host->services->config_get &&
        g_host->services->config_get(g_host->services->ctx, "num_threads", buf, sizeof buf) > 0) {
      const long n = std::strtol(buf, nullptr, 10);
      if (n < 1 || n > 4096)
        return make_error(SPORA_PLUGIN_INVALID_ARGUMENT,
                          std::string("[cpu] SPORA_NUM_THREADS=") + buf + " is not a thread count (1..4096)");
      omp_set_num_threads(static_cast<int>(n));
    }
    g_initialized = true;
    log(SPORA_LOG_DEBUG, "initialized with " + std::to_string(omp_get_max_threads()) + " threads");
    return static_cast<spora_plugin_error_t*>(nullptr);
  });
}

spora_plugin_error_t* device_count(int32_t* out) {
  if (!out) return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[cpu] device_count: null output");
  *out = g_initialized ? 1 : 0;
  return nullptr;
}

namespace {

// The instruction set the kernels run on, as oneDNN uses it (the cpu's, or
// lower when ONEDNN_MAX_CPU_ISA caps it): "x86_64-avx512-bf16" (bf16 dot
// products), "x86_64-avx512", "x86_64-avx2", "x86_64". Benchmarks print it
// beside their figures, and amp keeps f32 on a cpu without "bf16" (there
// oneDNN emulates bf16 products, slower than f32).
const char* onednn_arch() {
  using isa = dnnl::cpu_isa;
  switch (dnnl::get_effective_cpu_isa()) {
    case isa::avx512_core_amx:
    case isa::avx512_core_bf16: return "x86_64-avx512-bf16";
    case isa::avx512_core_vnni:
    case isa::avx512_core: return "x86_64-avx512";
    case isa::avx2_vnni:
    case isa::avx2: return "x86_64-avx2";
    default: return "x86_64";
  }
}

}  // namespace

spora_plugin_error_t* device_properties(int32_t device, spora_device_properties_t* out) {
  if (!out) return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[cpu] device_properties: null output");
  if (device != 0) return make_error(SPORA_PLUGIN_NOT_FOUND, "[cpu] no device " + std::to_string(device));
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  out->name = "Host CPU";
  out->vendor = "host";
  out->arch = onednn_arch();
  if (SPORA_STRUCT_HAS(out, spora_device_properties_t, memory_bytes))
    out->memory_bytes = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
  if (SPORA_STRUCT_HAS(out, spora_device_properties_t, compute_units))
    out->compute_units = static_cast<int32_t>(std::thread::hardware_concurrency());
  if (SPORA_STRUCT_HAS(out, spora_device_properties_t, unified_memory)) out->unified_memory = 1;
  if (SPORA_STRUCT_HAS(out, spora_device_properties_t, max_streams)) out->max_streams = 0;
  if (SPORA_STRUCT_HAS(out, spora_device_properties_t, alignment)) out->alignment = 64;
  return nullptr;
}

void shutdown() { g_initialized = false; }

namespace {
constexpr spora_device_api_t kTable = SPORA_SDK_TABLE(spora_device_api_t, SPORA_CPU_DEVICE_FUNCTIONS);
}  // namespace
}  // namespace spora::cpu

extern "C" SPORA_PLUGIN_EXPORT void spora_plugin_probe_v1(spora_probe_result_t* out) {
  spora_sdk_probe_answer(out, 100, "");  // the host is always there
}

extern "C" SPORA_PLUGIN_EXPORT spora_plugin_error_t* spora_plugin_entry_v1(const spora_host_t* host,
                                                                          spora_plugin_info_t* out) {
  char why[SPORA_SDK_MESSAGE_MAX];
  if (const int32_t code = spora_sdk_check_entry(host, out, "cpu", why, sizeof why))
    return spora::plugin::make_error(code, why);
  spora::cpu::g_host = host;
  spora_sdk_fill_info(out, SPORA_PLUGIN_KIND_DEVICE, "cpu", "0.1.0", "g++ " __VERSION__ ", oneDNN", &spora::cpu::kTable);
  return nullptr;
}
