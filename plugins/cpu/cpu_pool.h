// Own max pooling loops for non-overlapping windows (cpu_pool.cpp), planned
// beside oneDNN's pooling by onednn_pool.cpp.
#pragma once
#include "kernel_plan.h"

namespace spora::cpu {

// Plans max_pool2d or max_pool2d_grad when kernel == stride, without
// padding, dilation or ceil_mode overhang, in f32 or bf16; UNIMPLEMENTED
// otherwise.
spora_plugin_error_t* plan_max_pool_tiles(plugin::KernelPlan& p);

}  // namespace spora::cpu
