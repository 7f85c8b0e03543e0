// SCAFFOLD: fused_elementwise through NVRTC not wired yet.
#include "gpu_kernel.h"

namespace spora::gpu {
void add_fused_kernels(std::vector<GpuKernelEntry>&) {}
}  // namespace spora::gpu
