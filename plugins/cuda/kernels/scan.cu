// SCAFFOLD: registered, no kernels yet (cumsum, topk).
#include "gpu_device.h"

namespace spora::gpu {
void add_scan_kernels(std::vector<GpuKernelEntry>&) {}
}  // namespace spora::gpu
