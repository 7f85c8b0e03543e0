// SCAFFOLD: cuDNN not wired yet.
#include "gpu_dnn.h"

#include "kernel_plan.h"

namespace spora::gpu::dnn {
namespace {
const std::string kWhy = "cuDNN support not built yet";
}
std::string load() { return kWhy; }
void unload() {}
bool available() { return false; }
const std::string& why_missing() { return kWhy; }
spora_plugin_error_t* plan(GpuPlan& gp) { return spora::plugin::unsupported(gp.desc, kWhy); }
}  // namespace spora::gpu::dnn
