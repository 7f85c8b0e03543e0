#include "gpu_blas.h"

#include <spora/plugin.h>
#include <cublas_api.h>  // types and the library's major version only: nothing is linked
#include <dlfcn.h>

#include <climits>
#include <map>
#include <mutex>

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

}  // namespace

std::string load() {
  const std::string name = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    return e ? e : name + " not found";
  }
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

}  // namespace spora::gpu::blas
