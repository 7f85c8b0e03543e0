// Kernel states of the cpu plugin.
#pragma once
#include <memory>

#include "kernel_plan.h"

namespace spora::cpu {

// A oneDNN-backed implementation chosen at plan time; null when the
// reference kernel is used instead.
class FastKernel {
 public:
  virtual ~FastKernel() = default;
  virtual void run(const void* const* inputs, void* const* outputs) = 0;
};

// Returns a oneDNN matmul for the plan, or null (with the reason written to
// `why`) when oneDNN cannot take it and the reference kernel must.
std::unique_ptr<FastKernel> make_onednn_matmul(const plugin::KernelPlan& plan, std::string* why);

}  // namespace spora::cpu
