// SCAFFOLD: registered, no kernels yet (pad).
#include "gpu_device.h"

namespace spora::gpu {
void add_pad_kernels(std::vector<GpuKernelEntry>&) {}
}  // namespace spora::gpu
