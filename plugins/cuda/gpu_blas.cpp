#include "gpu_blas.h"

#include <spora/plugin.h>
#include <cublasLt.h>  // types, values and the library's major version only: nothing is linked
#include <cublas_api.h>
#include <dlfcn.h>

#include <atomic>
#include <climits>
#include <cstddef>
#include <map>
#include <mutex>

#include "gpu_blaslt_api.h"
#include "gpu_state.h"
#include "lib_search.h"
#include "math/blas_args.h"

namespace spora::gpu::blas {
namespace {

using CreateFn = cublasStatus_t (*)(cublasHandle_t*);
using DestroyFn = cublasStatus_t (*)(cublasHandle_t);
using SetStreamFn = cublasStatus_t (*)(cublasHandle_t, cudaStream_t);
using SgemmFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const float*,
                                   const float*, int, long long, const float*, int, long long, const float*, float*, int,
                                   long long, int);
using DgemmFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const double*,
                                   const double*, int, long long, const double*, int, long long, const double*, double*,
                                   int, long long, int);

struct Lib {
  CreateFn create = nullptr;
  DestroyFn destroy = nullptr;
  SetStreamFn set_stream = nullptr;
  SgemmFn sgemm = nullptr;
  DgemmFn dgemm = nullptr;
};

Lib g_lib;
bool g_loaded = false;  // written once by load() (host thread, initialize) before any kernel is planned

// One handle per device, made on first use; a handle's stream binding and
// call must not interleave with another thread's, hence the lock per call.
std::mutex g_mu;
std::map<int, cublasHandle_t> g_handles;

// gpu_blaslt_api.h's numbers are cublasLt.h's.
static_assert(lt::kSuccess == CUBLAS_STATUS_SUCCESS && sizeof(cublasStatus_t) == sizeof(int32_t));
static_assert(lt::kR32F == CUDA_R_32F && lt::kR64F == CUDA_R_64F && lt::kR16F == CUDA_R_16F &&
              lt::kR16BF == CUDA_R_16BF && sizeof(cudaDataType_t) == sizeof(int32_t));
static_assert(lt::kCompute32F == CUBLAS_COMPUTE_32F && lt::kCompute32FFast16BF == CUBLAS_COMPUTE_32F_FAST_16BF &&
              lt::kCompute32FFastTF32 == CUBLAS_COMPUTE_32F_FAST_TF32 && lt::kCompute64F == CUBLAS_COMPUTE_64F &&
              sizeof(cublasComputeType_t) == sizeof(int32_t));
static_assert(lt::kOpN == CUBLAS_OP_N && lt::kOpT == CUBLAS_OP_T && sizeof(cublasOperation_t) == sizeof(int32_t));
static_assert(lt::kDescTransA == CUBLASLT_MATMUL_DESC_TRANSA && lt::kDescTransB == CUBLASLT_MATMUL_DESC_TRANSB &&
              lt::kDescEpilogue == CUBLASLT_MATMUL_DESC_EPILOGUE &&
              lt::kDescBiasPointer == CUBLASLT_MATMUL_DESC_BIAS_POINTER &&
              lt::kDescBiasDataType == CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE);
static_assert(lt::kLayoutBatchCount == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT &&
              lt::kLayoutStridedBatchOffset == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET);
static_assert(lt::kPrefMaxWorkspaceBytes == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES &&
              lt::kPrefMinAlignA == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES &&
              lt::kPrefMinAlignB == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES &&
              lt::kPrefMinAlignC == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES &&
              lt::kPrefMinAlignD == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES);
static_assert(lt::kEpiDefault == CUBLASLT_EPILOGUE_DEFAULT && lt::kEpiBias == CUBLASLT_EPILOGUE_BIAS &&
              lt::kEpiReluBias == CUBLASLT_EPILOGUE_RELU_BIAS && lt::kEpiGeluBias == CUBLASLT_EPILOGUE_GELU_BIAS &&
              sizeof(cublasLtEpilogue_t) == sizeof(uint32_t));
static_assert(sizeof(lt::HeuristicResult) == sizeof(cublasLtMatmulHeuristicResult_t) &&
              sizeof(lt::HeuristicResult::algo) == sizeof(cublasLtMatmulAlgo_t) &&
              offsetof(lt::HeuristicResult, workspace_size) == offsetof(cublasLtMatmulHeuristicResult_t, workspaceSize) &&
              offsetof(lt::HeuristicResult, state) == offsetof(cublasLtMatmulHeuristicResult_t, state) &&
              offsetof(lt::HeuristicResult, waves_count) == offsetof(cublasLtMatmulHeuristicResult_t, wavesCount));

lt::Api g_lt;
bool g_lt_loaded = false;  // written once by load() before any kernel is planned
std::mutex g_lt_mu;        // guards g_lt_handles
std::map<int, void*> g_lt_handles;

// Plans assume operands, output and workspace aligned to this many bytes
// (what the fast kernels' vector loads need; fresh allocations are 256-byte
// aligned); a launch with a less aligned pointer takes another path.
constexpr uint32_t kLtAlign = 16;
// The most workspace an algorithm may ask for (the heuristic's cap).
constexpr uint64_t kLtMaxWorkspace = 32ull << 20;

void* lt_handle(int device, std::string* why) {
  std::lock_guard<std::mutex> lock(g_lt_mu);
  void*& h = g_lt_handles[device];
  if (!h) {
    if (const int32_t st = g_lt.create(&h); st != lt::kSuccess) {
      g_lt_handles.erase(device);
      *why = "cublasLtCreate failed (status " + std::to_string(st) + ")";
      return nullptr;
    }
  }
  return h;
}

}  // namespace

struct LtPlan {
  LtArgs args;
  void* handle = nullptr;  // the device's, valid until unload
  lt::Descs descs;
  lt::HeuristicResult algo{};
  // The bias pointer is a descriptor attribute: set and used under the lock
  // when one kernel is launched from several threads.
  mutable std::mutex mu;
  mutable std::atomic<bool> refused_logged{false};
  ~LtPlan() { lt::destroy(g_lt, &descs); }
};

namespace {

// libcublasLt.so.<major>: its own outcome, logged here (cuBLAS is the
// caller's to log).
void load_lt(const std::vector<std::string>& dirs) {
  const std::string name = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
  std::string opened;
  if (const std::string why = lt::load(name, dirs, &g_lt, &opened); !why.empty()) {
    host_log(SPORA_LOG_WARN, "cuBLASLt not loaded (" + why + "): matmul and linear use cuBLAS or the own GEMM");
    return;
  }
  g_lt_loaded = true;
  host_log(SPORA_LOG_INFO, "cuBLASLt " + std::to_string(g_lt.version()) + " loaded from " + opened +
                               ": matmul and linear use cublasLtMatmul (f16/bf16 on tensor cores)");
}

}  // namespace

std::string load() {
  // NVIDIA's pip wheels (nvidia-cublas) first, then the system.
  const std::vector<std::string> dirs = spora::plugin::nvidia_library_dirs(CUBLAS_VER_MAJOR);
  load_lt(dirs);
  const std::string name = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  std::string opened, why;
  void* h = spora::plugin::open_library(name, dirs, &opened, &why);
  if (!h) return why;
  host_log(SPORA_LOG_INFO, name + " opened from " + opened);
  Lib lib;
  lib.create = reinterpret_cast<CreateFn>(dlsym(h, "cublasCreate_v2"));
  lib.destroy = reinterpret_cast<DestroyFn>(dlsym(h, "cublasDestroy_v2"));
  lib.set_stream = reinterpret_cast<SetStreamFn>(dlsym(h, "cublasSetStream_v2"));
  lib.sgemm = reinterpret_cast<SgemmFn>(dlsym(h, "cublasSgemmStridedBatched"));
  lib.dgemm = reinterpret_cast<DgemmFn>(dlsym(h, "cublasDgemmStridedBatched"));
  if (!lib.create || !lib.destroy || !lib.set_stream || !lib.sgemm || !lib.dgemm) {
    dlclose(h);
    return name + " lacks cublasCreate_v2/cublasSetStream_v2/cublas[SD]gemmStridedBatched";
  }
  g_lib = lib;  // the library stays loaded for the process
  g_loaded = true;
  return "";
}

void unload() {
  std::lock_guard<std::mutex> lock(g_mu);
  for (auto& [device, handle] : g_handles) {
    (void)cudaSetDevice(device);
    g_lib.destroy(handle);
  }
  g_handles.clear();
  std::lock_guard<std::mutex> lt_lock(g_lt_mu);
  for (auto& [device, handle] : g_lt_handles) {
    (void)cudaSetDevice(device);
    g_lt.destroy(handle);
  }
  g_lt_handles.clear();
}

bool available() { return g_loaded; }

cudaError_t gemm(cudaStream_t stream, int32_t dtype, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                 const void* a, int64_t stride_a, const void* b, int64_t stride_b, void* y, int64_t batch,
                 bool accumulate, bool* used) {
  *used = false;
  if (!g_loaded || m > INT_MAX || n > INT_MAX || k > INT_MAX || batch > INT_MAX || k == 0) return cudaSuccess;
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  std::lock_guard<std::mutex> lock(g_mu);
  cublasHandle_t& h = g_handles[device];
  if (!h && g_lib.create(&h) != CUBLAS_STATUS_SUCCESS) {
    g_handles.erase(device);
    return cudaSuccess;  // own GEMM instead
  }
  if (g_lib.set_stream(h, stream) != CUBLAS_STATUS_SUCCESS) return cudaSuccess;
  // Row-major y = op(A) op(B) as a column-major call (math/blas_args.h).
  const BlasArgs x = blas_args_row_major(ta, tb, m, n, k);
  const cublasOperation_t op1 = x.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op2 = x.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int rows = static_cast<int>(x.rows), cols = static_cast<int>(x.cols), inner = static_cast<int>(x.inner);
  const int ld1 = static_cast<int>(x.ld_first), ld2 = static_cast<int>(x.ld_second), ldo = static_cast<int>(x.ld_out);
  cublasStatus_t st;
  if (dtype == SPORA_DTYPE_F64) {
    const double one = 1, zero = 0, beta = accumulate ? one : zero;
    st = g_lib.dgemm(h, op1, op2, rows, cols, inner, &one, static_cast<const double*>(b), ld1, stride_b,
                     static_cast<const double*>(a), ld2, stride_a, &beta, static_cast<double*>(y), ldo, m * n,
                     static_cast<int>(batch));
  } else {
    const float one = 1, zero = 0, beta = accumulate ? one : zero;
    st = g_lib.sgemm(h, op1, op2, rows, cols, inner, &one, static_cast<const float*>(b), ld1, stride_b,
                     static_cast<const float*>(a), ld2, stride_a, &beta, static_cast<float*>(y), ldo, m * n,
                     static_cast<int>(batch));
  }
  if (st != CUBLAS_STATUS_SUCCESS) return cudaErrorInvalidValue;  // arguments cuBLAS refused: reported by the launch
  *used = true;
  return cudaSuccess;
}

// ---- cuBLASLt ----

bool lt_available() { return g_lt_loaded; }

std::shared_ptr<const LtPlan> lt_plan(const std::vector<LtArgs>& candidates, std::string* why) {
  if (!g_lt_loaded) {
    *why = "cuBLASLt is not loaded";
    return nullptr;
  }
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) {
    *why = std::string("cudaGetDevice: ") + cudaGetErrorName(e);
    return nullptr;
  }
  void* handle = lt_handle(device, why);
  if (!handle) return nullptr;
  void* pref = nullptr;
  if (g_lt.pref_create(&pref) != lt::kSuccess) {
    *why = "cublasLtMatmulPreferenceCreate failed";
    return nullptr;
  }
  bool pref_ok = g_lt.pref_set(pref, lt::kPrefMaxWorkspaceBytes, &kLtMaxWorkspace, sizeof kLtMaxWorkspace) == lt::kSuccess;
  for (int32_t attr : {lt::kPrefMinAlignA, lt::kPrefMinAlignB, lt::kPrefMinAlignC, lt::kPrefMinAlignD})
    pref_ok = pref_ok && g_lt.pref_set(pref, attr, &kLtAlign, sizeof kLtAlign) == lt::kSuccess;
  std::shared_ptr<LtPlan> chosen;
  *why = pref_ok ? "" : "cublasLtMatmulPreferenceSetAttribute failed";
  for (size_t i = 0; pref_ok && i < candidates.size() && !chosen; ++i) {
    const LtArgs& x = candidates[i];
    const std::string tag = "candidate " + std::to_string(i) + ": ";
    if (x.batch > INT_MAX || x.m <= 0 || x.n <= 0 || x.k <= 0) {
      *why += tag + "sizes outside what Lt takes; ";
      continue;
    }
    auto p = std::make_shared<LtPlan>();
    p->args = x;
    p->handle = handle;
    if (const std::string e = lt::build(g_lt, x, &p->descs); !e.empty()) {
      *why += tag + e + " failed; ";
      continue;
    }
    int returned = 0;
    const int32_t st = g_lt.heuristic(handle, p->descs.desc, p->descs.a, p->descs.b, p->descs.c, p->descs.d, pref, 1,
                                      &p->algo, &returned);
    if (st != lt::kSuccess || returned < 1 || p->algo.state != lt::kSuccess) {
      *why += tag + "no algorithm (cublasLtMatmulAlgoGetHeuristic status " + std::to_string(st) + "); ";
      continue;
    }
    chosen = std::move(p);
  }
  g_lt.pref_destroy(pref);
  if (!chosen) host_log(SPORA_LOG_DEBUG, "cuBLASLt takes no form of this matmul: " + *why);
  return chosen;
}

const LtArgs& lt_args(const LtPlan& plan) { return plan.args; }
size_t lt_workspace(const LtPlan& plan) { return plan.algo.workspace_size; }

cudaError_t lt_matmul(const LtPlan& plan, cudaStream_t stream, const void* a, const void* b, const void* bias, void* y,
                      void* workspace, bool* used) {
  *used = false;
  const LtArgs& x = plan.args;
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % kLtAlign == 0; };
  const size_t ws = plan.algo.workspace_size;
  if (!aligned(a) || !aligned(b) || !aligned(y) || (bias && !aligned(bias)) || (ws && !aligned(workspace)))
    return cudaSuccess;
  const float f_one = 1, f_beta = x.beta_one ? 1.f : 0.f;
  const double d_one = 1, d_beta = x.beta_one ? 1.0 : 0.0;
  const bool f64 = x.dtype == SPORA_DTYPE_F64;
  const void* alpha = f64 ? static_cast<const void*>(&d_one) : &f_one;
  const void* beta = f64 ? static_cast<const void*>(&d_beta) : &f_beta;
  std::lock_guard<std::mutex> lock(plan.mu);
  const lt::Descs& d = plan.descs;
  if (x.epilogue != LtEpilogue::kDefault &&
      g_lt.desc_set(d.desc, lt::kDescBiasPointer, &bias, sizeof bias) != lt::kSuccess)
    return cudaErrorInvalidValue;
  // Lt's A is our b, its B our a (math/blas_args.h); C is D (read only with beta 1).
  const int32_t st = g_lt.matmul(plan.handle, d.desc, alpha, b, d.a, a, d.b, beta, y, d.c, y, d.d, plan.algo.algo,
                                 ws ? workspace : nullptr, ws, stream);
  if (st == CUBLAS_STATUS_SUCCESS) {
    *used = true;
    return cudaSuccess;
  }
  if (st == CUBLAS_STATUS_EXECUTION_FAILED) return cudaErrorLaunchFailure;
  // Refused before anything was enqueued (argument checks): another path runs.
  if (!plan.refused_logged.exchange(true))
    host_log(SPORA_LOG_WARN, "cublasLtMatmul refused a planned call (status " + std::to_string(st) +
                                 "); this kernel falls back to cuBLAS or the own GEMM");
  return cudaSuccess;
}

}  // namespace spora::gpu::blas
