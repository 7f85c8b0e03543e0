// Opening libnccl.so.2 and the CUDA runtime check behind initialize.
#include "nccl_lib.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "error.h"
#include "lib_search.h"

namespace spora::nccl {

using spora::plugin::make_error;

const spora_host_t* g_host = nullptr;

namespace {
Lib g_lib;
bool g_open = false;
std::mutex g_mu;

// NVIDIA's pip wheel (nvidia-nccl-cu13) first, then the system; where the
// dynamic linker's path does not have it either, the CUDA toolkit's
// directories.
void* open_nccl(std::string* tried) {
  std::string opened;
  void* h = spora::plugin::open_library("libnccl.so.2", spora::plugin::nvidia_library_dirs(CUDART_VERSION / 1000),
                                        &opened, tried);
  std::string dirs[] = {"", "/usr/local/cuda/lib64/", "/usr/local/cuda/lib/"};
  if (const char* home = std::getenv("CUDA_HOME")) dirs[0] = std::string(home) + "/lib64/";
  for (const std::string& d : dirs) {
    if (h || d.empty()) continue;
    opened = d + "libnccl.so.2";
    if ((h = dlopen(opened.c_str(), RTLD_NOW | RTLD_LOCAL))) break;
    const char* why = dlerror();
    *tried += "; " + std::string(why ? why : opened);
  }
  if (h) host_log(SPORA_LOG_INFO, "libnccl.so.2 opened from " + opened);
  return h;
}
}  // namespace

const Lib* lib() { return g_open ? &g_lib : nullptr; }

void host_log(int32_t level, const std::string& message) {
  const spora_host_t* h = g_host;
  if (h && SPORA_STRUCT_HAS(h, spora_host_t, services) && h->services && h->services->log)
    h->services->log(h->services->ctx, level, "nccl", message.c_str());
}

int64_t config_int(const char* key, int64_t fallback) {
  const spora_host_t* h = g_host;
  if (!h || !SPORA_STRUCT_HAS(h, spora_host_t, services) || !h->services || !h->services->config_get) return fallback;
  char buf[32] = {};
  if (h->services->config_get(h->services->ctx, key, buf, sizeof buf) < 0) return fallback;
  char* end = nullptr;
  const long long v = std::strtoll(buf, &end, 10);
  return end != buf && *end == '\0' ? static_cast<int64_t>(v) : fallback;
}

spora_plugin_error_t* invalid(const std::string& message) {
  return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[nccl] " + message);
}

spora_plugin_error_t* nccl_error(ncclResult_t r, const std::string& what, const char* call) {
  int32_t code = SPORA_PLUGIN_INTERNAL;
  if (r == ncclInvalidArgument || r == ncclInvalidUsage) code = SPORA_PLUGIN_INVALID_ARGUMENT;
  else if (r == ncclRemoteError || r == ncclSystemError) code = SPORA_PLUGIN_UNAVAILABLE;
  std::string text = g_lib.ncclGetErrorString ? g_lib.ncclGetErrorString(r) : "";
  text = "ncclResult " + std::to_string(static_cast<int>(r)) + (text.empty() ? "" : " (" + text + ")");
  return make_error(code, "[nccl] " + what + ": " + call + " returned " + text);
}

spora_plugin_error_t* cuda_error(cudaError_t r, const std::string& what, const char* call) {
  return make_error(SPORA_PLUGIN_UNAVAILABLE, "[nccl] " + what + ": " + call + " returned " +
                                                  std::to_string(static_cast<int>(r)) + " (" + cudaGetErrorName(r) +
                                                  ": " + cudaGetErrorString(r) + ")");
}

spora_plugin_error_t* open_lib() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_open) return nullptr;
  // The device first: without one (here: no CUDA driver, error 35) NCCL
  // could not run even if it loads.
  int count = 0;
  if (const cudaError_t r = cudaGetDeviceCount(&count); r != cudaSuccess)
    return make_error(SPORA_PLUGIN_UNAVAILABLE, "[nccl] no device: cudaGetDeviceCount returned " +
                                                    std::to_string(static_cast<int>(r)) + " (" + cudaGetErrorName(r) +
                                                    ": " + cudaGetErrorString(r) + ")");
  if (count == 0) return make_error(SPORA_PLUGIN_UNAVAILABLE, "[nccl] no device: the CUDA runtime reports 0 devices");
  std::string tried;
  void* h = open_nccl(&tried);
  if (!h)
    return make_error(SPORA_PLUGIN_UNAVAILABLE, "[nccl] libnccl.so.2 not found (" + tried +
                                                    "); install NCCL or add its directory to LD_LIBRARY_PATH");
  Lib l;
  std::string missing;
#define SPORA_NCCL_SYM(name)                                          \
  l.name = reinterpret_cast<decltype(l.name)>(dlsym(h, #name));      \
  if (!l.name) missing += std::string(missing.empty() ? "" : ", ") + #name;
  SPORA_NCCL_SYM(ncclGetVersion)
  SPORA_NCCL_SYM(ncclGetUniqueId)
  SPORA_NCCL_SYM(ncclCommInitRankConfig)
  SPORA_NCCL_SYM(ncclCommSplit)
  SPORA_NCCL_SYM(ncclCommAbort)
  SPORA_NCCL_SYM(ncclCommDestroy)
  SPORA_NCCL_SYM(ncclCommGetAsyncError)
  SPORA_NCCL_SYM(ncclCommCount)
  SPORA_NCCL_SYM(ncclCommUserRank)
  SPORA_NCCL_SYM(ncclGetErrorString)
  SPORA_NCCL_SYM(ncclGetLastError)
  SPORA_NCCL_SYM(ncclAllReduce)
  SPORA_NCCL_SYM(ncclAllGather)
  SPORA_NCCL_SYM(ncclReduceScatter)
  SPORA_NCCL_SYM(ncclBroadcast)
  SPORA_NCCL_SYM(ncclSend)
  SPORA_NCCL_SYM(ncclRecv)
  SPORA_NCCL_SYM(ncclGroupStart)
  SPORA_NCCL_SYM(ncclGroupEnd)
#undef SPORA_NCCL_SYM
  if (!missing.empty()) {
    dlclose(h);
    return make_error(SPORA_PLUGIN_UNAVAILABLE,
                      "[nccl] libnccl.so.2 lacks " + missing + " (NCCL >= 2.18 is needed for ncclCommSplit)");
  }
  l.ncclGetVersion(&l.version);
  g_lib = l;
  g_open = true;  // the handle stays open for the life of the process
  return nullptr;
}

}  // namespace spora::nccl
