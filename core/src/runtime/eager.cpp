#include "runtime/eager.h"

#include <memory>
#include <vector>

#include "runtime/fallback.h"
#include "support/error.h"

namespace spora {

namespace {

// Checks the inputs' devices and runs inference into `call`; returns the
// device the op runs on.
Device* prepare(const OpDef& op, Device* device, const Tensor* const* inputs, int num_inputs, const Attrs& attrs,
                int num_outputs, OpCall& call) {
  if (num_inputs > kMaxOpInputs) fail(Code::kInvalidArgument, "[{}] too many inputs ({})", op.name, num_inputs);
  // Thread-local scratch: a fresh array of kMaxOpInputs metas would be
  // zeroed on every call (several KB). Only read by infer_call, before any
  // nested eager call could reuse it.
  thread_local TensorMeta metas[kMaxOpInputs];
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
  infer_call(op, metas, num_inputs, attrs, call);
  if (num_outputs != call.num_outputs)
    fail(Code::kInvalidArgument, "[{}] produces {} output(s), caller asked for {}", op.name, call.num_outputs,
         num_outputs);
  return device;
}

// The op's kernel on `device`. A device without one that allows fallback
// runs eager_fallback instead, into `fallback_out(n)` (room for the n
// outputs), and null is returned.
template <class Out>
KernelRef kernel_or_fallback(const OpDef& op, Device* device, const Tensor* const* inputs, int num_inputs,
                             const OpCall& call, Out&& fallback_out) {
  try {
    return device->kernel(op, call);
  } catch (const Error& e) {
    if (e.code() != Code::kUnimplemented || !device->fallback()) throw;
    // The call is thread-local scratch that the fallback's own eager calls
    // reuse: hand it a copy.
    const OpCall saved = call;
    eager_fallback(op, device, inputs, num_inputs, saved, fallback_out(saved.num_outputs), e.what());
    return nullptr;
  }
}

}  // namespace

void eager_call(const OpDef& op, Device* device, const Tensor* const* inputs, int num_inputs, const Attrs& attrs,
                Tensor* outputs, int num_outputs) {
  // Thread-local scratch: inference results are reused call to call to avoid
  // allocations on the hot path.
  thread_local OpCall call;
  device = prepare(op, device, inputs, num_inputs, attrs, num_outputs, call);

  if (call.view) {
    Tensor v = *inputs[0];
    v.shape = call.result[0];
    v.id = new_tensor_id();  // a view is a new value
    outputs[0] = std::move(v);
    return;
  }
  const KernelRef k = kernel_or_fallback(op, device, inputs, num_inputs, call, [&](int) { return outputs; });
  if (!k) return;
  spora_devptr_t in_ptrs[kMaxOpInputs], out_ptrs[kMaxOpOutputs];
  for (int i = 0; i < num_inputs; ++i) in_ptrs[i] = inputs[i]->data();
  // Outputs are published only after the launch succeeds. Most ops have one
  // or two: keep those on the stack rather than constructing kMaxOpOutputs.
  Tensor small[4];
  std::unique_ptr<Tensor[]> large;
  if (call.num_outputs > 4) large.reset(new Tensor[static_cast<size_t>(call.num_outputs)]);
  Tensor* outs = large ? large.get() : small;
  for (int i = 0; i < call.num_outputs; ++i) {
    outs[i] = make_tensor(device, call.out[i].dtype, call.result[i]);
    out_ptrs[i] = outs[i].data();
  }
  device->launch(*k, in_ptrs, out_ptrs);
  for (int i = 0; i < call.num_outputs; ++i) outputs[i] = std::move(outs[i]);
}

namespace {

// The bytes a tensor covers in its buffer.
struct Region {
  const Buffer* buffer;
  size_t begin, end;
};
Region region(const Tensor& t) { return {t.buffer.get(), t.offset, t.offset + t.nbytes()}; }
bool overlap(const Region& a, const Region& b) {
  return a.buffer == b.buffer && a.begin < b.end && b.begin < a.end;
}
bool same(const Region& a, const Region& b) { return a.buffer == b.buffer && a.begin == b.begin && a.end == b.end; }

// An output may share memory only with the input it replaces in place (the
// op's in_place_input), exactly, and only when no other input reads that
// memory too: the kernel reads the others while it writes the output.
void check_aliasing(const OpDef& op, const OpCall& call, const Tensor* const* inputs, int num_inputs,
                    const Tensor* const* outputs) {
  for (int o = 0; o < call.num_outputs; ++o) {
    const Region out = region(*outputs[o]);
    if (out.begin == out.end) continue;  // empty: touches nothing
    const int partner = op.in_place_input ? op.in_place_input(call, o) : -1;
    for (int i = 0; i < num_inputs; ++i) {
      const Region in = region(*inputs[i]);
      if (!overlap(out, in)) continue;
      if (i != partner || !same(out, in))
        fail(Code::kInvalidArgument, "[{}] output {} overlaps input {}; {}", op.name, o, i,
             partner >= 0 ? fmt::format("output {} may only be input {} itself", o, partner)
                          : std::string("the op does not compute this output in place"));
      for (int j = 0; j < num_inputs; ++j)
        if (j != i && overlap(in, region(*inputs[j])))
          fail(Code::kInvalidArgument,
               "[{}] output {} would overwrite input {}, which input {} also reads; pass a copy of one of them",
               op.name, o, i, j);
    }
    for (int p = 0; p < o; ++p)
      if (overlap(out, region(*outputs[p])))
        fail(Code::kInvalidArgument, "[{}] outputs {} and {} overlap", op.name, p, o);
  }
}

}  // namespace

void eager_call_into(const OpDef& op, Device* device, const Tensor* const* inputs, int num_inputs,
                     const Attrs& attrs, const Tensor* const* outputs, int num_outputs) {
  thread_local OpCall call;
  device = prepare(op, device, inputs, num_inputs, attrs, num_outputs, call);
  for (int o = 0; o < num_outputs; ++o) {
    const Tensor& t = *outputs[o];
    if (t.device() != device)
      fail(Code::kInvalidArgument, "[{}] output {} is on {} but the op runs on {}", op.name, o, t.device()->name(),
           device->name());
    if (t.dtype != call.out[o].dtype || t.shape != call.result[o])
      fail(Code::kInvalidArgument, "[{}] output {} must be {} {}, got {} {}", op.name, o,
           dtype_name(call.out[o].dtype), call.result[o].str(), dtype_name(t.dtype), t.shape.str());
  }
  check_aliasing(op, call, inputs, num_inputs, outputs);
  if (call.view) {
    const Tensor& out = *outputs[0];
    if (!same(region(out), region(*inputs[0])) && out.nbytes())
      device->copy_d2d(out.data(), inputs[0]->data(), out.nbytes());
    return;
  }
  // Without a kernel: fresh results, then copied over (synchronous copies
  // are ordered after the queued work that made them).
  std::vector<Tensor> fresh;
  const KernelRef k = kernel_or_fallback(op, device, inputs, num_inputs, call, [&](int n) {
    fresh.resize(static_cast<size_t>(n));
    return fresh.data();
  });
  if (!k) {
    for (int o = 0; o < num_outputs; ++o)
      if (outputs[o]->nbytes())
        device->copy_d2d(outputs[o]->data(), fresh[static_cast<size_t>(o)].data(), outputs[o]->nbytes());
    return;
  }
  spora_devptr_t in_ptrs[kMaxOpInputs], out_ptrs[kMaxOpOutputs];
  for (int i = 0; i < num_inputs; ++i) in_ptrs[i] = inputs[i]->data();
  for (int o = 0; o < num_outputs; ++o) out_ptrs[o] = outputs[o]->data();
  device->launch(*k, in_ptrs, out_ptrs);
}

}  // namespace spora
