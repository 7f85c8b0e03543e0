#include "gpu_blas.h"

#include <spora/plugin.h>
#include <cublas_api.h>  // types and the library's major version only: nothing is linked
#include <dlfcn.h>

#include <climits>
#include <map>
#include <mutex>

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
  // Row-major y = op(A) op(B) is column-major y^T = op(B)^T op(A)^T: swap
  // the operands, keep each one's transpose flag.
  const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int lda = static_cast<int>(ta ? m : k), ldb = static_cast<int>(tb ? k : n);
  cublasStatus_t st;
  if (dtype == SPORA_DTYPE_F64) {
    const double one = 1, zero = 0, beta = accumulate ? one : zero;
    st = g_lib.dgemm(h, opb, opa, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &one,
                     static_cast<const double*>(b), ldb, stride_b, static_cast<const double*>(a), lda, stride_a, &beta,
                     static_cast<double*>(y), static_cast<int>(n), m * n, static_cast<int>(batch));
  } else {
    const float one = 1, zero = 0, beta = accumulate ? one : zero;
    st = g_lib.sgemm(h, opb, opa, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &one,
                     static_cast<const float*>(b), ldb, stride_b, static_cast<const float*>(a), lda, stride_a, &beta,
                     static_cast<float*>(y), static_cast<int>(n), m * n, static_cast<int>(batch));
  }
  if (st != CUBLAS_STATUS_SUCCESS) return cudaErrorInvalidValue;  // arguments cuBLAS refused: reported by the launch
  *used = true;
  return cudaSuccess;
}

}  // namespace spora::gpu::blas
