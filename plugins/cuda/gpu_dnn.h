// cuDNN for the CUDA plugin's convolution, pooling and batch norm, loaded
// with dlopen at initialize (as cuBLAS, gpu_blas.h) so the plugin has no
// link-time dependency on it. Without libcudnn.so.9 those ops report
// "unsupported: cuDNN not found" and run elsewhere (gpu_dnn_ops.cpp). The
// ROCm build does not compile this file.
#pragma once
#include <cstdint>
#include <string>

#include "gpu_kernel.h"

namespace spora::gpu {
struct GemmEpilogue;  // math/gemm_math.h
}

namespace spora::gpu::dnn {

struct PoolFix;  // math/dnn_args.h

// Loads libcudnn.so.<major of the headers>; "" on success, else why not.
// Host thread, from initialize.
std::string load();
// Destroys the per-device handles (shutdown).
void unload();
bool available();
// Why load() failed ("" when loaded).
const std::string& why_missing();

// Plans a conv2d*, *pool2d* or batch_norm* kernel through cuDNN: fills
// plan.state/launch/workspace, or returns UNIMPLEMENTED for a case cuDNN
// cannot take (the caller then tries the plugin's own kernel).
spora_plugin_error_t* plan(GpuPlan& plan);

// The small kernels around the cuDNN calls (kernels/dnn_epilogue.cu), for
// dtype f32, f64, f16 or bf16; each returns the launch's error.
// y[n, c, i] = bias[c] for y [n, c, hw]: the convolution then adds to it.
cudaError_t fill_bias(int32_t dtype, void* y, const void* bias, int64_t n, int64_t c, int64_t hw, cudaStream_t s);
// y = epilogue(y) elementwise (residual add, activation; math/gemm_math.h).
cudaError_t apply_epilogue(int32_t dtype, const GemmEpilogue& ep, void* y, const void* residual, int64_t count,
                           cudaStream_t s);
// After cuDNN's max pooling: -inf where every tap of a window was -inf
// (cuDNN gives the lowest finite value there), as the reference.
cudaError_t max_pool_fixup(int32_t dtype, const PoolFix& g, const void* x, void* y, int64_t planes, cudaStream_t s);
// f16/bf16 <-> float copies of batch norm's per-channel parameters.
cudaError_t to_float(int32_t dtype, const void* src, float* dst, int64_t n, cudaStream_t s);
cudaError_t from_float(int32_t dtype, const float* src, void* dst, int64_t n, cudaStream_t s);
// Inference batch norm's saved statistics in the compute dtype (float for
// f16/bf16): mean = running_mean, invstd = 1/sqrt(running_var + eps) in
// double, as the reference.
cudaError_t bn_inference_stats(int32_t dtype, const void* running_mean, const void* running_var, double eps,
                               void* mean, void* invstd, int64_t c, cudaStream_t s);

}  // namespace spora::gpu::dnn
