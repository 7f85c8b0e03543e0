// A kernel planned by the GPU plugin: the operands and attributes the
// reference planner validated (spora::plugin::KernelPlan), the family's
// parsed launch parameters, and the function that enqueues it on a stream.
// Each kernel family (kernels/*.cu) provides plan functions; gpu_kernels.cpp
// collects them by op name.
#pragma once
#include <spora/plugin.h>

#include <memory>
#include <vector>

#include "gpu_runtime.h"
#include "kernel_plan.h"

namespace spora::gpu {

struct GpuPlan;
// Enqueues the kernel; returns the launch's error (cudaSuccess when queued).
using LaunchFn = cudaError_t (*)(const GpuPlan& plan, const void* const* in, void* const* out, void* workspace,
                                 cudaStream_t stream);

struct GpuPlan {
  // Validated by the reference planner; its state is kept, for the
  // families that launch the reference's own plan (layout copies).
  spora::plugin::KernelPlan desc;
  std::shared_ptr<void> state;     // the family's launch parameters
  LaunchFn launch = nullptr;
  size_t workspace = 0;
  template <class T>
  const T& get() const {
    return *static_cast<const T*>(state.get());
  }
};

// Fills plan.state/launch from plan.desc, or returns an error
// (SPORA_PLUGIN_UNIMPLEMENTED when this dtype/attribute combination has no
// GPU kernel).
using GpuPlanFn = spora_plugin_error_t* (*)(GpuPlan& plan);

struct GpuKernelEntry {
  const char* op;
  GpuPlanFn plan;
};

// The families (kernels/*.cu) append their ops.
void add_elementwise_kernels(std::vector<GpuKernelEntry>& out);
void add_reduce_kernels(std::vector<GpuKernelEntry>& out);
void add_softmax_kernels(std::vector<GpuKernelEntry>& out);
void add_matmul_kernels(std::vector<GpuKernelEntry>& out);
void add_optim_kernels(std::vector<GpuKernelEntry>& out);
void add_loss_kernels(std::vector<GpuKernelEntry>& out);
void add_layout_kernels(std::vector<GpuKernelEntry>& out);
void add_indexing_kernels(std::vector<GpuKernelEntry>& out);
void add_dnn_kernels(std::vector<GpuKernelEntry>& out);       // gpu_dnn_ops.cpp: conv, pooling, batch norm
void add_norm_kernels(std::vector<GpuKernelEntry>& out);      // kernels/norm.cu: layer and group norm
void add_scan_kernels(std::vector<GpuKernelEntry>& out);      // kernels/scan.cu: cumsum, topk
void add_random_kernels(std::vector<GpuKernelEntry>& out);    // kernels/random.cu: Philox ops, dropout
void add_pad_kernels(std::vector<GpuKernelEntry>& out);       // kernels/pad.cu
void add_creation_kernels(std::vector<GpuKernelEntry>& out);  // kernels/creation.cu: arange, eye
void add_fused_kernels(std::vector<GpuKernelEntry>& out);     // gpu_fused.cpp: NVRTC regions (CUDA only)

// The plugin's own kernels for what cuDNN does on CUDA: always used by the
// ROCm build (Debian has no MIOpen), on CUDA when cuDNN cannot take a case
// or SPORA_GPU_OWN_DNN=1 (gpu_dnn_ops.cpp chooses).
spora_plugin_error_t* plan_own_conv(GpuPlan& plan);        // kernels/conv.cu
spora_plugin_error_t* plan_own_pool(GpuPlan& plan);        // kernels/pool.cu
spora_plugin_error_t* plan_own_batch_norm(GpuPlan& plan);  // kernels/norm.cu

// Threads per block for 1-D elementwise launches, and the grid for n
// elements (grid-stride loops cover the rest).
constexpr int kBlock = 256;
inline unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks > 65535 * 8 ? 65535 * 8 : blocks);
}

}  // namespace spora::gpu
