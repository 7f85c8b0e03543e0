// Convolution, pooling and batch norm: which implementation plans them.
//
// CUDA: cuDNN (gpu_dnn.cpp) when it was loaded; a case cuDNN refuses goes
// to the plugin's own kernel. Without cuDNN the ops are unsupported (the
// core runs them elsewhere) and the reason says "cuDNN not found", unless
// SPORA_GPU_OWN_DNN=1 asks for the own kernels -- the switch that lets a
// CUDA machine certify the kernels the ROCm build always uses.
// ROCm: the own kernels (Debian ships no MIOpen).
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_kernel.h"
#include "gpu_state.h"
#if !defined(SPORA_GPU_HIP)
#include "gpu_dnn.h"
#endif

namespace spora::gpu {
namespace {

#if !defined(SPORA_GPU_HIP)
bool own_forced() {
  static const bool forced = [] {
    const char* v = std::getenv("SPORA_GPU_OWN_DNN");
    return v && *v && std::strcmp(v, "0") != 0;
  }();
  return forced;
}
#endif

template <GpuPlanFn Own>
spora_plugin_error_t* plan_with(GpuPlan& gp) {
#if defined(SPORA_GPU_HIP)
  return Own(gp);
#else
  if (own_forced()) return Own(gp);
  if (!dnn::available())
    return plugin_error(SPORA_PLUGIN_UNIMPLEMENTED,
                        gp.desc.op + ": unsupported: cuDNN not found (" + dnn::why_missing() + ")");
  spora_plugin_error_t* err = dnn::plan(gp);
  if (!err || err->code != SPORA_PLUGIN_UNIMPLEMENTED) return err;
  // A case cuDNN cannot take: the own kernel, or cuDNN's reason when there is none.
  spora_plugin_error_t* own = Own(gp);
  if (!own) {
    err->destroy(err);
    return nullptr;
  }
  own->destroy(own);
  return err;
#endif
}

}  // namespace

void add_dnn_kernels(std::vector<GpuKernelEntry>& out) {
  for (const char* op : {"conv2d", "conv2d_bias", "conv2d_act", "conv2d_add_act", "conv2d_grad_input",
                         "conv2d_grad_weight", "conv2d_transpose"})
    out.push_back({op, plan_with<plan_own_conv>});
  for (const char* op : {"max_pool2d", "max_pool2d_grad", "avg_pool2d", "avg_pool2d_grad", "adaptive_avg_pool2d",
                         "adaptive_avg_pool2d_grad"})
    out.push_back({op, plan_with<plan_own_pool>});
  for (const char* op : {"batch_norm", "batch_norm_grad"}) out.push_back({op, plan_with<plan_own_batch_norm>});
}

}  // namespace spora::gpu
