#include "runtime/fallback.h"

#include <map>
#include <memory>
#include <mutex>

#include "ir/printer.h"
#include "ops/decompose.h"
#include "runtime/eager.h"
#include "runtime/plugin_library.h"
#include "sched/executor.h"
#include "support/error.h"
#include "support/log.h"

namespace spora {
namespace {

// Compiled decompositions, by device and call signature. Plans are
// immutable, so they are shared by every caller.
std::shared_ptr<sched::Executable> decomposed(const OpDef& op, Device* device, const Tensor* const* inputs,
                                              int num_inputs, const OpCall& call) {
  const DecomposeFn fn = find_decomposition(op.name);
  if (!fn) return nullptr;
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
  const std::string key = device->name() + "\n" + ir::to_text(g);
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<sched::Executable>> cache;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  auto exe = std::make_shared<sched::Executable>(g, device);
  std::lock_guard<std::mutex> lock(mu);
  return cache.emplace(key, exe).first->second;
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
    if (auto exe = decomposed(op, device, inputs, num_inputs, call)) {
      std::vector<Tensor> outs = exe->run(std::vector<const Tensor*>(inputs, inputs + num_inputs));
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
