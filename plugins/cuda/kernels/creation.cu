// SCAFFOLD: registered, no kernels yet (arange, eye).
#include "gpu_device.h"

namespace spora::gpu {
void add_creation_kernels(std::vector<GpuKernelEntry>&) {}
}  // namespace spora::gpu
