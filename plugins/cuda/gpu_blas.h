// cuBLASLt (every float dtype, fused bias/activation epilogues) and cuBLAS
// (f32/f64) for the CUDA plugin's matmul and linear, loaded with dlopen at
// initialize so the plugin has no link-time dependency on them: without
// them the plugin still loads and its own tiled GEMM (math/gemm_math.h)
// serves every matmul. The ROCm build has no BLAS (Debian 12 ships neither
// hipBLAS nor rocBLAS) and does not compile this file.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpu_runtime.h"
#include "math/blas_args.h"

namespace spora::gpu::blas {

// Loads libcublas.so.<major of the headers>; returns "" on success, else
// why not (the caller logs it). Also loads libcublasLt.so.<major> and logs
// the outcome itself (lt_available). Host thread, from initialize.
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

// ---- cuBLASLt ----

bool lt_available();

// One call shape planned on a device: its matmul descriptor, layouts and
// the algorithm the heuristic chose (all destroyed with the plan).
struct LtPlan;

// Plans the first of `candidates` (math/blas_args.h lt_candidates) for
// which cuBLASLt has an algorithm on the current device, asking the
// heuristic once, here at plan time. NULL (and *why) when Lt is not loaded
// or has no algorithm for any; the caller then uses another path.
std::shared_ptr<const LtPlan> lt_plan(const std::vector<LtArgs>& candidates, std::string* why);
const LtArgs& lt_args(const LtPlan& plan);
// Device workspace bytes the chosen algorithm needs (the kernel's workspace).
size_t lt_workspace(const LtPlan& plan);

// Enqueues the planned call: row-major a and b as planned, y the output
// (holding the bias rows first when lt_args(plan).beta_one), bias for the
// bias epilogues, workspace of lt_workspace bytes. *used = false (and
// cudaSuccess) when Lt refused the call before enqueuing anything (an
// operand less aligned than the plan assumed): the caller takes another path.
cudaError_t lt_matmul(const LtPlan& plan, cudaStream_t stream, const void* a, const void* b, const void* bias, void* y,
                      void* workspace, bool* used);

}  // namespace spora::gpu::blas
