// SCAFFOLD: registered, no kernels yet (own convolution).
#include "gpu_device.h"

namespace spora::gpu {
spora_plugin_error_t* plan_own_conv(GpuPlan& gp) { return spora::plugin::unsupported(gp.desc, "no own kernel yet"); }
}  // namespace spora::gpu
