// Eager (PyNative) dispatch: one op call = schema check, inference, a cached
// kernel plan, output allocation, one launch on the device's stream.
#pragma once
#include "ops/registry.h"
#include "runtime/tensor.h"

namespace spora {

// Runs `op` on the inputs' device (or `device` for ops without inputs).
// Writes `num_outputs` tensors to `outputs`.
void eager_call(const OpDef& op, Device* device, const Tensor* const* inputs, int num_inputs, const Attrs& attrs,
                Tensor* outputs, int num_outputs);

}  // namespace spora
