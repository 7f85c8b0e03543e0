#include "runtime/fallback.h"

#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "ops/decompose.h"
#include "runtime/eager.h"
#include "runtime/plugin_library.h"
#include "sched/executor.h"
#include "support/error.h"
#include "support/log.h"

namespace spora {
namespace {

// What a decomposition's plan depends on: the device, the op, its inputs'
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

// The compiled plans of one decomposition. A plan's arena holds its
// intermediates while it runs, so one plan serves one caller at a time:
// callers lease an idle plan and give it back, and a caller finding none
// idle compiles another. The pool grows to the most callers seen at once.
struct PlanPool {
  PlanKey key;
  std::mutex mu;
  std::vector<std::unique_ptr<sched::Executable>> idle;
};

class Lease {
 public:
  Lease(std::shared_ptr<PlanPool> pool, std::unique_ptr<sched::Executable> exe)
      : pool_(std::move(pool)), exe_(std::move(exe)) {}
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease() {
    // Back to the pool even after a failed run: a plan stays valid, and an
    // error a host callback left on it is reported by its next run.
    std::lock_guard<std::mutex> lock(pool_->mu);
    pool_->idle.push_back(std::move(exe_));
  }
  sched::Executable& operator*() const { return *exe_; }

 private:
  std::shared_ptr<PlanPool> pool_;
  std::unique_ptr<sched::Executable> exe_;
};

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

// A compiled decomposition leased for one run, by device and call
// signature; nullptr when the op has none. Pools live for the process.
std::unique_ptr<Lease> decomposed(const OpDef& op, Device* device, const Tensor* const* inputs, int num_inputs,
                                  const OpCall& call) {
  const DecomposeFn fn = find_decomposition(op.name);
  if (!fn) return nullptr;
  PlanKey key{device, &op, {}, call.attrs};
  key.inputs.reserve(static_cast<size_t>(num_inputs));
  for (int i = 0; i < num_inputs; ++i) key.inputs.push_back({inputs[i]->dtype, inputs[i]->shape});
  const uint64_t h = hash_of(key);

  static std::mutex mu;
  static auto* pools = new std::unordered_multimap<uint64_t, std::shared_ptr<PlanPool>>;
  std::shared_ptr<PlanPool> pool;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto range = pools->equal_range(h);
    for (auto it = range.first; it != range.second && !pool; ++it)
      if (it->second->key == key) pool = it->second;
    if (!pool) {
      pool = std::make_shared<PlanPool>();
      pool->key = key;
      pools->emplace(h, pool);
    }
  }
  {
    std::lock_guard<std::mutex> lock(pool->mu);
    if (!pool->idle.empty()) {
      std::unique_ptr<sched::Executable> exe = std::move(pool->idle.back());
      pool->idle.pop_back();
      return std::make_unique<Lease>(pool, std::move(exe));
    }
  }
  // Compiled outside the locks: other signatures, and other callers of this
  // one that find an idle plan, need not wait.
  auto exe = std::make_unique<sched::Executable>(decomposition_graph(op, fn, inputs, num_inputs, call), device);
  return std::make_unique<Lease>(pool, std::move(exe));
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
    if (auto lease = decomposed(op, device, inputs, num_inputs, call)) {
      std::vector<Tensor> outs = (**lease).run(std::vector<const Tensor*>(inputs, inputs + num_inputs));
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
