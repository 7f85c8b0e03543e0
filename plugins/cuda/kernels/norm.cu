// SCAFFOLD: registered, no kernels yet (norms).
#include "gpu_device.h"

namespace spora::gpu {
spora_plugin_error_t* plan_own_batch_norm(GpuPlan& gp) { return spora::plugin::unsupported(gp.desc, "no own kernel yet"); }
void add_norm_kernels(std::vector<GpuKernelEntry>&) {}
}  // namespace spora::gpu
