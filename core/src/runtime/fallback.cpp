#include "runtime/fallback.h"

#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "ops/decompose.h"
#include "runtime/eager.h"
#include "runtime/interpreter.h"
#include "runtime/observer.h"
#include "runtime/plugin_library.h"
#include "support/error.h"
#include "support/log.h"

namespace spora {
namespace {

// What a decomposition's graph depends on: the device, the op, its inputs'
// types and its attributes (schema defaults filled in).
struct PlanKey {
  Device* device = nullptr;
  const OpDef* op = nullptr;
  std::vector<TensorMeta> inputs;
  Attrs attrs;

  bool operator==(const PlanKey& o) const {
    if (device != o.device || op != o.op || inputs.size() != o.inputs.size() || attrs != o.attrs) return false;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].dtype != o.inputs[i].dtype || inputs[i].shape != o.inputs[i].shape) return false;
    return true;
  }
};

uint64_t hash_of(const PlanKey& k) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  mix(reinterpret_cast<uintptr_t>(k.device));
  mix(reinterpret_cast<uintptr_t>(k.op));
  for (const TensorMeta& m : k.inputs) {
    mix(static_cast<uint64_t>(m.dtype));
    for (int d = 0; d < m.shape.rank; ++d) mix(static_cast<uint64_t>(m.shape.dims[d]));
    mix(static_cast<uint64_t>(m.shape.rank));
  }
  mix(k.attrs.hash());
  return h;
}

// Builds and checks the decomposition's graph for the call.
ir::Graph decomposition_graph(const OpDef& op, DecomposeFn fn, const Tensor* const* inputs, int num_inputs,
                              const OpCall& call) {
  ir::Graph g(op.name);
  std::vector<ir::Value> x;
  for (int i = 0; i < num_inputs; ++i)
    x.push_back(g.add_input("x" + std::to_string(i), inputs[i]->dtype, inputs[i]->shape));
  ir::Builder b(g, {});
  g.set_outputs(fn(b, x, call.attrs));
  if (static_cast<int>(g.outputs().size()) != call.num_outputs)
    fail(Code::kInternal, "[{}] decomposition returned {} outputs, the op has {}", op.name, g.outputs().size(),
         call.num_outputs);
  for (int i = 0; i < call.num_outputs; ++i) {
    const TensorMeta& m = g.meta(g.outputs()[static_cast<size_t>(i)]);
    if (m.dtype != call.out[i].dtype || m.shape != call.result[i])
      fail(Code::kInternal, "[{}] decomposition output {} is {} {}, the op's is {} {}", op.name, i, dtype_name(m.dtype),
           m.shape.str(), dtype_name(call.out[i].dtype), call.result[i].str());
  }
  return g;
}

// The decomposition's graph for the call, built once per device and call
// signature; nullptr when the op has none. Graphs are immutable once built
// and shared, so threads running the same decomposition at once share
// nothing mutable: each run's values are its own (the interpreter allocates
// them), which is what keeps concurrent fallbacks from reading each other's
// intermediates (tests FallbackRace.*). Graphs live for the process.
std::shared_ptr<const ir::Graph> decomposed(const OpDef& op, Device* device, const Tensor* const* inputs,
                                            int num_inputs, const OpCall& call) {
  const DecomposeFn fn = find_decomposition(op.name);
  if (!fn) return nullptr;
  PlanKey key{device, &op, {}, call.attrs};
  key.inputs.reserve(static_cast<size_t>(num_inputs));
  for (int i = 0; i < num_inputs; ++i) key.inputs.push_back({inputs[i]->dtype, inputs[i]->shape});
  const uint64_t h = hash_of(key);

  struct Entry {
    PlanKey key;
    std::shared_ptr<const ir::Graph> graph;
  };
  static std::mutex mu;
  static auto* graphs = new std::unordered_multimap<uint64_t, Entry>;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto range = graphs->equal_range(h);
    for (auto it = range.first; it != range.second; ++it)
      if (it->second.key == key) return it->second.graph;
  }
  // Built outside the lock; two threads may both build one, the first kept.
  auto g = std::make_shared<const ir::Graph>(decomposition_graph(op, fn, inputs, num_inputs, call));
  std::lock_guard<std::mutex> lock(mu);
  auto range = graphs->equal_range(h);
  for (auto it = range.first; it != range.second; ++it)
    if (it->second.key == key) return it->second.graph;
  graphs->emplace(h, Entry{std::move(key), g});
  return g;
}

Device* host_device() {
  PluginRecord* cpu = PluginRecord::find_ready("cpu");
  return cpu && !cpu->devices().empty() ? cpu->devices()[0].get() : nullptr;
}

}  // namespace

void eager_fallback(const OpDef& op, Device* device, const Tensor* const* inputs, int num_inputs, const OpCall& call,
                    Tensor* outputs, const std::string& why) {
  std::string tried = why;
  try {
    if (auto g = decomposed(op, device, inputs, num_inputs, call)) {
      // Observers hear of the op the caller ran, not of its parts. A part
      // this device lacks falls back in turn (decomposed or on cpu).
      ObserversPaused paused;
      std::vector<Tensor> outs = interpret(*g, device, std::vector<const Tensor*>(inputs, inputs + num_inputs));
      for (int i = 0; i < call.num_outputs; ++i) outputs[i] = std::move(outs[static_cast<size_t>(i)]);
      logger().debug("[{}] no kernel on {}: ran its decomposition", op.name, device->name());
      return;
    }
  } catch (const Error& e) {
    if (e.code() != Code::kUnimplemented) throw;
    tried += "; its decomposition needs: " + std::string(e.what());
  }
  Device* cpu = host_device();
  if (!cpu || cpu == device)
    fail(Code::kUnimplemented, "{}", tried + "; no cpu fallback is available");
  std::vector<Tensor> moved;
  std::vector<const Tensor*> ptrs;
  moved.reserve(static_cast<size_t>(num_inputs));
  for (int i = 0; i < num_inputs; ++i) moved.push_back(tensor_to(*inputs[i], cpu));
  for (const Tensor& t : moved) ptrs.push_back(&t);
  std::vector<Tensor> outs(static_cast<size_t>(call.num_outputs));
  eager_call(op, cpu, ptrs.data(), num_inputs, call.attrs, outs.data(), call.num_outputs);
  for (int i = 0; i < call.num_outputs; ++i) outputs[i] = tensor_to(outs[static_cast<size_t>(i)], device);
  logger().debug("[{}] no kernel on {}: ran on {} with copies", op.name, device->name(), cpu->name());
}

}  // namespace spora
