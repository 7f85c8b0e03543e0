// Eager (PyNative) dispatch: one op call = schema check, inference, a cached
// kernel plan, output allocation, one launch on the device's stream.
#pragma once
#include "ir/op.h"
#include "runtime/tensor.h"

namespace spora {

// Runs `op` on the inputs' device (or `device` for ops without inputs).
// Writes `num_outputs` tensors to `outputs`.
void eager_call(const OpDef& op, Device* device, const Tensor* const* inputs, int num_inputs, const Attrs& attrs,
                Tensor* outputs, int num_outputs);

// Like eager_call, writing into existing tensors of the op's output dtypes
// and shapes (spora_op_call_into). An output may be the memory of the input
// it replaces (OpDef::in_place_input) and must not otherwise overlap an
// input or another output; every check runs before anything is written.
void eager_call_into(const OpDef& op, Device* device, const Tensor* const* inputs, int num_inputs,
                     const Attrs& attrs, const Tensor* const* outputs, int num_outputs);

}  // namespace spora
