// cuBLAS for the CUDA plugin's f32/f64 matmul, loaded with dlopen at
// initialize so the plugin has no link-time dependency on it: without
// libcublas the plugin still loads and its own tiled GEMM (math/gemm_math.h)
// serves every matmul. The ROCm build has no BLAS (Debian 12 ships neither
// hipBLAS nor rocBLAS) and does not compile this file.
#pragma once
#include <cstdint>
#include <string>

#include "gpu_runtime.h"

namespace spora::gpu::blas {

// Loads libcublas.so.<major of the headers>; returns "" on success, else
// why not (the caller logs it). Host thread, from initialize.
std::string load();
// Destroys the per-device handles (shutdown).
void unload();
bool available();

// Row-major y[b] = op(a[b]) op(b[b]) for b < batch, all m x n / m x k /
// k x n, element strides between batch entries (0 = the same matrix for
// every entry); with `accumulate` the product is added to y (beta = 1).
// dtype is SPORA_DTYPE_F32 or _F64. *used = false (and
// cudaSuccess) when cuBLAS cannot take the call (not loaded, sizes beyond
// int); the caller then runs its own kernel.
cudaError_t gemm(cudaStream_t stream, int32_t dtype, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                 const void* a, int64_t stride_a, const void* b, int64_t stride_b, void* y, int64_t batch,
                 bool accumulate, bool* used);

}  // namespace spora::gpu::blas
