// cuDNN for the CUDA plugin's convolution, pooling and batch norm, loaded
// with dlopen at initialize (as cuBLAS, gpu_blas.h) so the plugin has no
// link-time dependency on it. Without libcudnn.so.9 those ops report
// "unsupported: cuDNN not found" and run elsewhere (gpu_dnn_ops.cpp). The
// ROCm build does not compile this file.
#pragma once
#include <string>

#include "gpu_kernel.h"

namespace spora::gpu::dnn {

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

}  // namespace spora::gpu::dnn
