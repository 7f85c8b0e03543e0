#include "runtime/eager.h"

#include "runtime/fallback.h"
#include "support/error.h"

namespace spora {

void eager_call(const OpDef& op, Device* device, const Tensor* const* inputs, int num_inputs, const Attrs& attrs,
                Tensor* outputs, int num_outputs) {
  if (num_inputs > kMaxOpInputs) fail(Code::kInvalidArgument, "[{}] too many inputs ({})", op.name, num_inputs);
  TensorMeta metas[kMaxOpInputs];
  for (int i = 0; i < num_inputs; ++i) {
    const Device* d = inputs[i]->device();
    if (!device) device = inputs[i]->device();
    if (d != device)
      fail(Code::kInvalidArgument, "[{}] input '{}' is on {} but the op runs on {}; move it with tensor_to first",
           op.name, i < static_cast<int>(op.inputs.size()) ? op.inputs[i] : std::to_string(i), d->name(),
           device->name());
    metas[i] = {inputs[i]->dtype, inputs[i]->shape};
  }
  if (!device) fail(Code::kInvalidArgument, "[{}] has no inputs: pass the device to run on", op.name);

  // Thread-local scratch: inference results are reused call to call to avoid
  // allocations on the hot path.
  thread_local OpCall call;
  infer_call(op, metas, num_inputs, attrs, call);
  if (num_outputs != call.num_outputs)
    fail(Code::kInvalidArgument, "[{}] produces {} output(s), caller asked for {}", op.name, call.num_outputs,
         num_outputs);

  if (call.view) {
    Tensor v = *inputs[0];
    v.shape = call.result[0];
    v.id = new_tensor_id();  // a view is a new value
    outputs[0] = std::move(v);
    return;
  }
  KernelRef k;
  try {
    k = device->kernel(op, call);
  } catch (const Error& e) {
    if (e.code() != Code::kUnimplemented || !device->fallback()) throw;
    // The call is thread-local scratch that the fallback's own eager calls
    // reuse: hand it a copy.
    const OpCall saved = call;
    eager_fallback(op, device, inputs, num_inputs, saved, outputs, e.what());
    return;
  }
  spora_devptr_t in_ptrs[kMaxOpInputs], out_ptrs[kMaxOpOutputs];
  for (int i = 0; i < num_inputs; ++i) in_ptrs[i] = inputs[i]->data();
  Tensor outs[kMaxOpOutputs];
  for (int i = 0; i < call.num_outputs; ++i) {
    outs[i] = make_tensor(device, call.out[i].dtype, call.result[i]);
    out_ptrs[i] = outs[i].data();
  }
  device->launch(*k, in_ptrs, out_ptrs);
  for (int i = 0; i < call.num_outputs; ++i) outputs[i] = std::move(outs[i]);
}

}  // namespace spora
