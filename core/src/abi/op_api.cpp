// C API: the op registry and eager op calls.
#include <vector>

#include "abi/abi.h"
#include "autodiff/bprop.h"
#include "runtime/collective.h"
#include "runtime/eager.h"
#include "runtime/observer.h"
#include "runtime/profiler.h"

using spora::Code;
using spora::fail;
using spora::abi::from_handle;
using spora::abi::guard;
using spora::abi::need;

namespace {
// The ops callable on a device: collective ops (all_reduce) run only inside
// graphs, through a communicator, so they are not listed (their schema and
// graph use work by name).
const std::vector<const spora::OpDef*>& listed_ops() {
  static const std::vector<const spora::OpDef*> ops = [] {
    std::vector<const spora::OpDef*> v;
    for (const auto& op : spora::OpRegistry::get().ops())
      if (!spora::is_collective_op(*op)) v.push_back(op.get());
    return v;
  }();
  return ops;
}
}  // namespace

extern "C" {

spora_status_t spora_op_count(size_t* out) {
  return guard([&] { *need(out, "spora_op_count", "out") = listed_ops().size(); });
}

spora_status_t spora_op_name(size_t index, const char** out) {
  return guard([&] {
    const auto& ops = listed_ops();
    if (index >= ops.size()) fail(Code::kInvalidArgument, "[spora_op_name] index {} >= count {}", index, ops.size());
    *need(out, "spora_op_name", "out") = ops[index]->name.c_str();
  });
}

spora_status_t spora_op_schema(const char* op, const char** out) {
  return guard([&] {
    need(op, "spora_op_schema", "op");
    need(out, "spora_op_schema", "out");
    const spora::OpDef* def = spora::OpRegistry::get().find(op);
    if (!def) fail(Code::kNotFound, "[{}] unknown op", op);
    // Schemas are immutable after registration: cache the text per op.
    static std::mutex mu;
    static auto* cache = new std::vector<std::pair<const spora::OpDef*, std::string>>;
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& [d, s] : *cache)
      if (d == def) {
        *out = s.c_str();
        return;
      }
    cache->emplace_back(def, def->schema());
    *out = cache->back().second.c_str();
  });
}

spora_status_t spora_op_gradient(const char* op, int32_t* has_rule, int32_t* differentiable) {
  return guard([&] {
    need(op, "spora_op_gradient", "op");
    if (!spora::OpRegistry::get().find(op)) fail(Code::kNotFound, "[{}] unknown op", op);
    const std::optional<spora::autodiff::BpropEntry> e = spora::autodiff::find_bprop(op);
    if (has_rule) *has_rule = e ? 1 : 0;
    if (differentiable) *differentiable = e && e->differentiable ? 1 : 0;
  });
}

}  // extern "C"

namespace {

// One eager op call: spora_op_call and spora_op_call_at. `file` is null
// unless the caller gave a source location; it is only used when a tape
// records the op or the call fails, so it costs nothing otherwise.
void op_call(const char* op, spora_device_t* device, spora_tensor_t* const* inputs, size_t num_inputs,
             const spora_attrs_t* attrs, const char* file, int32_t line, spora_tensor_t** outputs,
             size_t num_outputs) {
  need(op, "spora_op_call", "op");
  const spora::OpDef* def = spora::OpRegistry::get().find(op);
  if (!def) fail(Code::kNotFound, "[{}] unknown op; spora_op_name lists the registered ops", op);
  if (num_inputs > static_cast<size_t>(spora::kMaxOpInputs) || num_outputs > static_cast<size_t>(spora::kMaxOpOutputs))
    fail(Code::kInvalidArgument, "[{}] got {} inputs and {} outputs; an op call takes at most {} and makes at most {}",
         op, num_inputs, num_outputs, spora::kMaxOpInputs, spora::kMaxOpOutputs);
  if (num_inputs) need(inputs, op, "inputs");
  if (num_outputs) need(outputs, op, "outputs");
  const spora::Tensor* in[spora::kMaxOpInputs];
  for (size_t i = 0; i < num_inputs; ++i) {
    if (!inputs[i]) fail(Code::kInvalidArgument, "[{}] input {} is a null tensor", op, i);
    in[i] = &inputs[i]->t;
  }
  static const spora::Attrs kNoAttrs;
  const spora::Attrs& a = attrs ? attrs->attrs : kNoAttrs;
  // Stack room for the usual one or two outputs; constructing
  // kMaxOpOutputs tensors per call would cost more than the call.
  spora::Tensor small[4];
  std::vector<spora::Tensor> large(num_outputs > 4 ? num_outputs : 0);
  spora::Tensor* out = num_outputs > 4 ? large.data() : small;
  const spora::profiler::OpTimer timer;
  spora::eager_call(*def, from_handle(device), in, static_cast<int>(num_inputs), a, out,
                    static_cast<int>(num_outputs));
  if (timer.armed())
    spora::profiler::record_op("op", def->name, timer.t0(), in, static_cast<int>(num_inputs), out,
                               static_cast<int>(num_outputs), from_handle(device), file, line);
  if (spora::observing())
    spora::notify_op(*def, in, static_cast<int>(num_inputs), a, out, static_cast<int>(num_outputs), file, line);
  // Allocate every handle before publishing any, so a failure leaks nothing.
  spora_tensor_t* handles_small[4] = {};
  std::vector<spora_tensor_t*> handles_large(num_outputs > 4 ? num_outputs : 0, nullptr);
  spora_tensor_t** handles = num_outputs > 4 ? handles_large.data() : handles_small;
  try {
    for (size_t i = 0; i < num_outputs; ++i) handles[i] = new spora_tensor{std::move(out[i])};
  } catch (...) {
    for (size_t i = 0; i < num_outputs; ++i) delete handles[i];
    throw;
  }
  for (size_t i = 0; i < num_outputs; ++i) outputs[i] = handles[i];
}

}  // namespace

extern "C" {

spora_status_t spora_op_call(const char* op, spora_device_t* device, spora_tensor_t* const* inputs, size_t num_inputs,
                             const spora_attrs_t* attrs, spora_tensor_t** outputs, size_t num_outputs) {
  return guard([&] { op_call(op, device, inputs, num_inputs, attrs, nullptr, 0, outputs, num_outputs); });
}

spora_status_t spora_op_call_at(const char* op, spora_device_t* device, spora_tensor_t* const* inputs,
                                size_t num_inputs, const spora_attrs_t* attrs, const char* file, int32_t line,
                                spora_tensor_t** outputs, size_t num_outputs) {
  return guard([&] {
    try {
      op_call(op, device, inputs, num_inputs, attrs, file, line, outputs, num_outputs);
    } catch (const spora::Error& e) {
      if (!file || !*file) throw;
      throw spora::Error(e.code(), spora::ir::with_loc(e.what(), {file, line}));
    }
  });
}

spora_status_t spora_op_call_into(const char* op, spora_device_t* device, spora_tensor_t* const* inputs,
                                  size_t num_inputs, const spora_attrs_t* attrs, spora_tensor_t* const* outputs,
                                  size_t num_outputs) {
  return guard([&] {
    need(op, "spora_op_call_into", "op");
    const spora::OpDef* def = spora::OpRegistry::get().find(op);
    if (!def) fail(Code::kNotFound, "[{}] unknown op; spora_op_name lists the registered ops", op);
    if (num_inputs > static_cast<size_t>(spora::kMaxOpInputs) || num_outputs > static_cast<size_t>(spora::kMaxOpOutputs))
      fail(Code::kInvalidArgument, "[{}] got {} inputs and {} outputs; an op call takes at most {} and makes at most {}",
           op, num_inputs, num_outputs, spora::kMaxOpInputs, spora::kMaxOpOutputs);
    // A tape keeps the tensors it recorded for the backward pass: writing
    // into existing tensors could change values it still needs.
    if (spora::observing() && spora::observers_keep_values())
      fail(Code::kInvalidArgument,
           "[{}] spora_op_call_into writes into existing tensors, which the tape recording on this thread may "
           "still need; stop recording first (optimizer steps run after the gradients are taken)",
           op);
    if (num_inputs) need(inputs, op, "inputs");
    if (num_outputs) need(outputs, op, "outputs");
    const spora::Tensor* in[spora::kMaxOpInputs];
    const spora::Tensor* out[spora::kMaxOpOutputs];
    for (size_t i = 0; i < num_inputs; ++i) {
      if (!inputs[i]) fail(Code::kInvalidArgument, "[{}] input {} is a null tensor", op, i);
      in[i] = &inputs[i]->t;
    }
    for (size_t i = 0; i < num_outputs; ++i) {
      if (!outputs[i]) fail(Code::kInvalidArgument, "[{}] output {} is a null tensor", op, i);
      out[i] = &outputs[i]->t;
    }
    static const spora::Attrs kNoAttrs;
    const spora::profiler::OpTimer timer;
    spora::eager_call_into(*def, from_handle(device), in, static_cast<int>(num_inputs),
                           attrs ? attrs->attrs : kNoAttrs, out, static_cast<int>(num_outputs));
    if (timer.armed()) {
      spora::profiler::IoArgs io;
      for (size_t i = 0; i < num_inputs; ++i) io.input(in[i]->dtype, in[i]->shape.dims, in[i]->shape.rank);
      for (size_t i = 0; i < num_outputs; ++i) io.output(out[i]->dtype, out[i]->shape.dims, out[i]->shape.rank);
      spora::profiler::record_op("op", def->name, timer.t0(), io,
                                 num_outputs ? out[0]->device() : from_handle(device), nullptr, 0);
    }
  });
}

}  // extern "C"
