// cuDNN 9's legacy API behind the CUDA plugin's convolution, pooling and
// batch norm: the loader, the per-device handles, the support probes and
// the dispatch to the families (gpu_dnn_conv.cpp, gpu_dnn_pool.cpp,
// gpu_dnn_norm.cpp; shared internals in gpu_dnn_lib.h).
//
// Plan time (kernel_create, a host thread with the device current): the
// arguments come from math/dnn_args.h, which refuses what cuDNN cannot
// reproduce exactly; descriptors are made and kept in the plan's state.
// Launch: the device's handle is bound to the stream under a lock and the
// call made; a failed status becomes a cudaError the executor reports.
#include <cuda_runtime_api.h>  // CUDART_VERSION: which NVIDIA wheels to search
#include <dlfcn.h>

#include <map>
#include <vector>

#include "gpu_dnn_lib.h"
#include "gpu_state.h"
#include "lib_search.h"

namespace spora::gpu::dnn {

// dnn_args.h mirrors these enums without including cuDNN.
static_assert(static_cast<int>(DataType::kFloat) == CUDNN_DATA_FLOAT);
static_assert(static_cast<int>(DataType::kDouble) == CUDNN_DATA_DOUBLE);
static_assert(static_cast<int>(DataType::kHalf) == CUDNN_DATA_HALF);
static_assert(static_cast<int>(DataType::kBfloat16) == CUDNN_DATA_BFLOAT16);
static_assert(static_cast<int>(MathType::kDefault) == CUDNN_DEFAULT_MATH);
static_assert(static_cast<int>(MathType::kTensorOp) == CUDNN_TENSOR_OP_MATH);
static_assert(static_cast<int>(MathType::kTensorOpAllowConversion) == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION);
static_assert(static_cast<int>(MathType::kFma) == CUDNN_FMA_MATH);
static_assert(static_cast<int>(PoolMode::kMax) == CUDNN_POOLING_MAX_DETERMINISTIC);
static_assert(static_cast<int>(PoolMode::kAvgIncludePad) == CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING);
static_assert(static_cast<int>(PoolMode::kAvgExcludePad) == CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING);
static_assert(CUDNN_STATUS_SUCCESS == 0);

namespace detail {

Lib g_lib;
std::mutex g_mu;
const Scale kScale;

namespace {
bool g_loaded = false;  // written once by load() (host thread, initialize) before any kernel is planned
std::string g_why = "cuDNN was not loaded";
std::map<int, cudnnHandle_t> g_handles;  // guarded by g_mu
}  // namespace

std::string status_text(cudnnStatus_t st) {
  const char* s = g_lib.cudnnGetErrorString ? g_lib.cudnnGetErrorString(st) : nullptr;
  return (s ? std::string(s) : "cuDNN status") + " (" + std::to_string(static_cast<int>(st)) + ")";
}

cudaError_t launch_error(cudnnStatus_t st) {
  switch (CUDNN_STATUS_CATEGORY(st)) {
    case CUDNN_STATUS_SUCCESS: return cudaSuccess;
    case CUDNN_STATUS_NOT_SUPPORTED: return cudaErrorNotSupported;
    case CUDNN_STATUS_EXECUTION_FAILED: return cudaErrorLaunchFailure;
    case CUDNN_STATUS_INTERNAL_ERROR: return cudaErrorUnknown;
    default: return cudaErrorInvalidValue;
  }
}

cudnnStatus_t handle_locked(cudnnHandle_t* out) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return CUDNN_STATUS_INTERNAL_ERROR;
  auto it = g_handles.find(device);
  if (it == g_handles.end()) {
    cudnnHandle_t h = nullptr;
    if (cudnnStatus_t st = g_lib.cudnnCreate(&h); st != CUDNN_STATUS_SUCCESS) return st;
    it = g_handles.emplace(device, h).first;
  }
  *out = it->second;
  return CUDNN_STATUS_SUCCESS;
}

spora_plugin_error_t* refuse(const GpuPlan& gp, const std::string& call, cudnnStatus_t st) {
  return spora::plugin::unsupported(gp.desc, "cuDNN " + call + " failed: " + status_text(st));
}

cudnnStatus_t make_tensor(cudnnTensorDescriptor_t* d, DataType t, const Dims4& dims) {
  if (cudnnStatus_t st = g_lib.cudnnCreateTensorDescriptor(d); st != CUDNN_STATUS_SUCCESS) {
    *d = nullptr;
    return st;
  }
  const Strides4 s = packed_strides(dims);
  return g_lib.cudnnSetTensor4dDescriptorEx(*d, data_type(t), dims.n, dims.c, dims.h, dims.w, s.n, s.c, s.h, s.w);
}

namespace {
struct ProbeResult {
  cudnnStatus_t status;
  std::string why;
};
std::mutex g_probe_mu;
std::map<std::vector<int64_t>, ProbeResult> g_probes;

spora_plugin_error_t* probe_refusal(const GpuPlan& gp, const char* what, const ProbeResult& r) {
  if (r.status == CUDNN_STATUS_SUCCESS && r.why.empty()) return nullptr;
  if (!r.why.empty()) return spora::plugin::unsupported(gp.desc, std::string("cuDNN ") + what + ": " + r.why);
  return refuse(gp, std::string(what) + " (support probe)", r.status);
}

}  // namespace

spora_plugin_error_t* probe(const GpuPlan& gp, const char* what, ProbeFn fn, const TypeChoice& t, int mode) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return spora::plugin::unsupported(gp.desc, "no current device");
  const std::vector<int64_t> key = {device, reinterpret_cast<int64_t>(fn), static_cast<int64_t>(t.data), mode};
  {
    std::lock_guard<std::mutex> lock(g_probe_mu);
    auto it = g_probes.find(key);
    if (it != g_probes.end()) return probe_refusal(gp, what, it->second);
  }
  ProbeResult r{CUDNN_STATUS_SUCCESS, ""};
  void* scratch = nullptr;
  cudaStream_t stream = nullptr;
  if (cudaMalloc(&scratch, kProbeSlot * kProbeSlots) != cudaSuccess ||
      cudaMemset(scratch, 0, kProbeSlot * kProbeSlots) != cudaSuccess ||
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    r.status = CUDNN_STATUS_ALLOC_FAILED;
  } else {
    r.status = on_stream(stream, [&](cudnnHandle_t h) {
      return fn(h, t, mode, static_cast<char*>(scratch), stream, &r.why);
    });
    if (r.status == CUDNN_STATUS_SUCCESS && cudaStreamSynchronize(stream) != cudaSuccess)
      r.status = CUDNN_STATUS_EXECUTION_FAILED;
  }
  if (stream) (void)cudaStreamDestroy(stream);
  if (scratch) (void)cudaFree(scratch);
  if (r.status == CUDNN_STATUS_ALLOC_FAILED)  // not an answer about support: ask again next time
    return probe_refusal(gp, what, r);
  {
    std::lock_guard<std::mutex> lock(g_probe_mu);
    g_probes[key] = r;
  }
  return probe_refusal(gp, what, r);
}

}  // namespace detail

using namespace detail;

std::string load() {
  const std::string name = "libcudnn.so." + std::to_string(CUDNN_MAJOR);
  // NVIDIA's pip wheel (nvidia-cudnn-cu13) first, then the system.
  std::string opened;
  void* h = spora::plugin::open_library(name, spora::plugin::nvidia_library_dirs(CUDART_VERSION / 1000), &opened,
                                        &g_why);
  if (!h) return g_why;
  host_log(SPORA_LOG_INFO, name + " opened from " + opened);
  Lib lib;
  std::string missing;
#define SPORA_CUDNN_LOOKUP(f)                                 \
  lib.f = reinterpret_cast<decltype(&::f)>(dlsym(h, #f));    \
  if (!lib.f) missing += std::string(missing.empty() ? "" : ", ") + #f;
  SPORA_CUDNN_FUNCTIONS(SPORA_CUDNN_LOOKUP)
#undef SPORA_CUDNN_LOOKUP
  if (!missing.empty()) {
    dlclose(h);
    g_why = name + " lacks " + missing;
    return g_why;
  }
  const size_t version = lib.cudnnGetVersion();
  if (version / 10000 != CUDNN_MAJOR) {
    dlclose(h);
    g_why = name + " reports version " + std::to_string(version) + ", not " + std::to_string(CUDNN_MAJOR) + ".x";
    return g_why;
  }
  g_lib = lib;  // the library stays loaded for the process (plans' descriptors use it)
  g_loaded = true;
  g_why.clear();
  return "";
}

void unload() {
  std::lock_guard<std::mutex> lock(g_mu);
  for (auto& [device, handle] : g_handles) {
    (void)cudaSetDevice(device);
    g_lib.cudnnDestroy(handle);
  }
  g_handles.clear();
}

bool available() { return g_loaded; }

const std::string& why_missing() { return g_why; }

spora_plugin_error_t* plan(GpuPlan& gp) {
  if (!g_loaded) return spora::plugin::unsupported(gp.desc, "cuDNN not found (" + g_why + ")");
  TypeChoice t;
  const int32_t dtype = gp.desc.in[0].dtype;
  if (!type_choice(dtype, &t))
    return spora::plugin::unsupported(gp.desc, std::string("cuDNN path has no ") + spora::plugin::dtype_name(dtype));
  const std::string& op = gp.desc.op;
  if (op.rfind("conv2d", 0) == 0) return plan_conv(gp, t);
  if (op.find("pool2d") != std::string::npos) return plan_pool(gp, t);
  if (op.rfind("batch_norm", 0) == 0) return plan_bn(gp, t);
  return spora::plugin::unsupported(gp.desc, "not a cuDNN op");
}

}  // namespace spora::gpu::dnn
