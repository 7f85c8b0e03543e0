#include "gpu_nvrtc.h"

#include <cuda_runtime_api.h>  // CUDART_VERSION: the major of libnvrtc to open
#include <dlfcn.h>
#include <nvrtc.h>  // types only: nothing is linked

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

#include "gpu_state.h"
#include "lib_search.h"

namespace spora::gpu::rtc {
namespace {

using VersionFn = nvrtcResult (*)(int*, int*);
using NumArchsFn = nvrtcResult (*)(int*);
using ArchsFn = nvrtcResult (*)(int*);
using CreateFn = nvrtcResult (*)(nvrtcProgram*, const char*, const char*, int, const char* const*, const char* const*);
using CompileFn = nvrtcResult (*)(nvrtcProgram, int, const char* const*);
using DestroyFn = nvrtcResult (*)(nvrtcProgram*);
using SizeFn = nvrtcResult (*)(nvrtcProgram, size_t*);
using GetFn = nvrtcResult (*)(nvrtcProgram, char*);
using ErrorStringFn = const char* (*)(nvrtcResult);

struct Lib {
  void* handle = nullptr;
  NumArchsFn num_archs = nullptr;
  ArchsFn archs = nullptr;
  CreateFn create = nullptr;
  CompileFn compile = nullptr;
  DestroyFn destroy = nullptr;
  SizeFn log_size = nullptr;
  GetFn log = nullptr;
  SizeFn cubin_size = nullptr;
  GetFn cubin = nullptr;
  SizeFn ptx_size = nullptr;
  GetFn ptx = nullptr;
  ErrorStringFn error_string = nullptr;
};

Lib g_lib;
bool g_loaded = false;  // written by load() (initialize) before any kernel is planned
std::string g_why = "NVRTC not loaded (the plugin was not initialized)";

// One compiled source: compiled by the first caller, under its own lock,
// so different regions compile in parallel and equal ones once.
struct Entry {
  std::mutex mu;
  bool done = false;  // compiled and loaded, or failed to compile (the same source always would)
  std::string error;
  cudaLibrary_t library = nullptr;
  cudaKernel_t kernel = nullptr;
};
std::mutex g_cache_mu;
std::map<std::string, std::shared_ptr<Entry>> g_cache;

std::string nvrtc_error(const char* call, nvrtcResult r) {
  return std::string(call) + " failed: " + (g_lib.error_string ? g_lib.error_string(r) : std::to_string(r));
}

// The current device's architecture as NVRTC's option: sm_XY (a CUBIN) when
// NVRTC supports it, else compute_XY of the newest it supports below (PTX,
// JIT-compiled by the driver at load).
std::string arch_option(bool* cubin, std::string* why) {
  int dev = 0, major = 0, minor = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  if (e != cudaSuccess) {
    *why = std::string("the device's compute capability: ") + cudaGetErrorString(e);
    return "";
  }
  const int want = major * 10 + minor;
  int n = 0;
  std::vector<int> archs;
  if (g_lib.num_archs(&n) == NVRTC_SUCCESS && n > 0) {
    archs.resize(static_cast<size_t>(n));
    if (g_lib.archs(archs.data()) != NVRTC_SUCCESS) archs.clear();
  }
  if (archs.empty() || std::find(archs.begin(), archs.end(), want) != archs.end()) {
    *cubin = true;
    return "--gpu-architecture=sm_" + std::to_string(want);
  }
  int best = -1;
  for (int a : archs)
    if (a <= want) best = std::max(best, a);
  if (best < 0) {
    *why = "NVRTC supports no architecture at or below the device's sm_" + std::to_string(want);
    return "";
  }
  *cubin = false;
  return "--gpu-architecture=compute_" + std::to_string(best);
}

// Compiles and loads into *e (its lock held).
void build(Entry* e, const std::string& source, const std::string& name, const Headers& headers,
           const std::string& arch, bool cubin) {
  std::vector<const char*> hdr_text, hdr_names;
  for (const auto& h : headers) {
    hdr_names.push_back(h.first.c_str());
    hdr_text.push_back(h.second.c_str());
  }
  nvrtcProgram prog = nullptr;
  nvrtcResult r = g_lib.create(&prog, source.c_str(), "spora_fused.cu", static_cast<int>(headers.size()),
                               hdr_text.data(), hdr_names.data());
  if (r != NVRTC_SUCCESS) {
    e->error = nvrtc_error("nvrtcCreateProgram", r);
    return;
  }
  // The .cu kernels' floating-point defaults (nvcc's: fmad, IEEE division
  // and sqrt, denormals kept), so an op computes what its unfused kernel
  // does. -default-device: the shared headers' host-only helpers (no
  // SPORA_HD) are never called from a kernel, but NVRTC refuses host code.
  const char* opts[] = {arch.c_str(), "-std=c++17", "-default-device", "--fmad=true", "--prec-div=true",
                        "--prec-sqrt=true", "--ftz=false"};
  r = g_lib.compile(prog, static_cast<int>(sizeof opts / sizeof opts[0]), opts);
  if (r != NVRTC_SUCCESS) {
    size_t n = 0;
    std::string log;
    if (g_lib.log_size(prog, &n) == NVRTC_SUCCESS && n > 1) {
      log.resize(n);
      if (g_lib.log(prog, &log[0]) != NVRTC_SUCCESS) log.clear();
      while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    }
    e->error = nvrtc_error("nvrtcCompileProgram", r) + (log.empty() ? "" : ":\n" + log);
    e->done = true;
    g_lib.destroy(&prog);
    return;
  }
  size_t n = 0;
  std::string code;
  r = cubin ? g_lib.cubin_size(prog, &n) : g_lib.ptx_size(prog, &n);
  if (r == NVRTC_SUCCESS) {
    code.resize(n);
    r = cubin ? g_lib.cubin(prog, &code[0]) : g_lib.ptx(prog, &code[0]);
  }
  g_lib.destroy(&prog);
  if (r != NVRTC_SUCCESS) {
    e->error = nvrtc_error(cubin ? "nvrtcGetCUBIN" : "nvrtcGetPTX", r);
    return;
  }
  cudaLibrary_t lib = nullptr;
  cudaError_t ce = cudaLibraryLoadData(&lib, code.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
  if (ce != cudaSuccess) {
    e->error = std::string("cudaLibraryLoadData: ") + cudaGetErrorString(ce);
    return;
  }
  cudaKernel_t k = nullptr;
  ce = cudaLibraryGetKernel(&k, lib, name.c_str());
  if (ce != cudaSuccess) {
    (void)cudaLibraryUnload(lib);  // the error being reported is the lookup's
    e->error = "cudaLibraryGetKernel(" + name + "): " + cudaGetErrorString(ce);
    return;
  }
  e->library = lib;
  e->kernel = k;
  e->done = true;
}

}  // namespace

std::string load() {
  const std::string name = "libnvrtc.so." + std::to_string(CUDART_VERSION / 1000);
  // NVIDIA's pip wheel (nvidia-cuda-nvrtc) first, then the system.
  std::string opened, first_error;
  void* h = spora::plugin::open_library(name, spora::plugin::nvidia_library_dirs(CUDART_VERSION / 1000), &opened,
                                        &first_error);
  // The toolkit's library folder is often not on the loader's path.
  for (const char* env : {"CUDA_HOME", "CUDA_PATH"}) {
    const char* dir = std::getenv(env);
    if (!h && dir && *dir) {
      opened = std::string(dir) + "/lib64/" + name;
      h = dlopen(opened.c_str(), RTLD_NOW | RTLD_LOCAL);
    }
  }
  if (!h) {
    opened = "/usr/local/cuda/lib64/" + name;
    h = dlopen(opened.c_str(), RTLD_NOW | RTLD_LOCAL);
  }
  if (!h) {
    g_why = first_error + " (nor in $CUDA_HOME/lib64, $CUDA_PATH/lib64, /usr/local/cuda/lib64)";
    return g_why;
  }
  host_log(SPORA_LOG_INFO, name + " opened from " + opened);
  Lib lib;
  lib.handle = h;
  lib.num_archs = reinterpret_cast<NumArchsFn>(dlsym(h, "nvrtcGetNumSupportedArchs"));
  lib.archs = reinterpret_cast<ArchsFn>(dlsym(h, "nvrtcGetSupportedArchs"));
  lib.create = reinterpret_cast<CreateFn>(dlsym(h, "nvrtcCreateProgram"));
  lib.compile = reinterpret_cast<CompileFn>(dlsym(h, "nvrtcCompileProgram"));
  lib.destroy = reinterpret_cast<DestroyFn>(dlsym(h, "nvrtcDestroyProgram"));
  lib.log_size = reinterpret_cast<SizeFn>(dlsym(h, "nvrtcGetProgramLogSize"));
  lib.log = reinterpret_cast<GetFn>(dlsym(h, "nvrtcGetProgramLog"));
  lib.cubin_size = reinterpret_cast<SizeFn>(dlsym(h, "nvrtcGetCUBINSize"));
  lib.cubin = reinterpret_cast<GetFn>(dlsym(h, "nvrtcGetCUBIN"));
  lib.ptx_size = reinterpret_cast<SizeFn>(dlsym(h, "nvrtcGetPTXSize"));
  lib.ptx = reinterpret_cast<GetFn>(dlsym(h, "nvrtcGetPTX"));
  lib.error_string = reinterpret_cast<ErrorStringFn>(dlsym(h, "nvrtcGetErrorString"));
  if (!lib.num_archs || !lib.archs || !lib.create || !lib.compile || !lib.destroy || !lib.log_size || !lib.log ||
      !lib.cubin_size || !lib.cubin || !lib.ptx_size || !lib.ptx || !lib.error_string) {
    dlclose(h);
    g_why = name + " lacks an entry point of nvrtcCreateProgram/CompileProgram/GetCUBIN/GetPTX/...";
    return g_why;
  }
  g_lib = lib;  // the library stays loaded for the process
  g_loaded = true;
  g_why.clear();
  return "";
}

void unload() {
  std::lock_guard<std::mutex> lock(g_cache_mu);
  for (auto& [key, e] : g_cache) {
    std::lock_guard<std::mutex> el(e->mu);
    if (e->library) (void)cudaLibraryUnload(e->library);  // at exit: nothing left to report to
    e->library = nullptr;
    e->kernel = nullptr;
  }
  g_cache.clear();
}

bool available() { return g_loaded; }

const std::string& why_missing() { return g_why; }

std::string get_kernel(const std::string& source, const std::string& name, const Headers& headers,
                       cudaKernel_t* out) {
  *out = nullptr;
  if (!g_loaded) return "NVRTC not found: " + g_why;
  bool cubin = true;
  std::string why;
  const std::string arch = arch_option(&cubin, &why);
  if (arch.empty()) return why;
  std::shared_ptr<Entry> e;
  {
    std::lock_guard<std::mutex> lock(g_cache_mu);
    std::shared_ptr<Entry>& slot = g_cache[arch + '\n' + name + '\n' + source];
    if (!slot) slot = std::make_shared<Entry>();
    e = slot;
  }
  std::lock_guard<std::mutex> lock(e->mu);
  if (!e->done) {
    // Other failures (memory, a device error) may pass: the next plan retries.
    e->error.clear();
    build(e.get(), source, name, headers, arch, cubin);
  }
  if (!e->done || !e->error.empty()) return e->error;
  *out = e->kernel;
  return "";
}

}  // namespace spora::gpu::rtc
