// SCAFFOLD: registered, no kernels yet (random ops).
#include "gpu_device.h"

namespace spora::gpu {
void add_random_kernels(std::vector<GpuKernelEntry>&) {}
}  // namespace spora::gpu
