#include "sched/placement.h"

#include <optional>

#include "ir/builder.h"
#include "ir/rewrite.h"
#include "ops/decompose.h"
#include "runtime/collective.h"
#include "runtime/plugin_library.h"
#include "support/error.h"
#include "support/log.h"

namespace spora::sched {
namespace {

// A decomposition may use ops the device lacks and that decompose again;
// the registry's decompositions nest at most two deep, so a few rounds
// reach the ops every device has.
constexpr int kMaxDecomposeRounds = 4;

[[noreturn]] void node_error(const ir::Node& n, Code code, const std::string& msg) {
  throw Error(code, ir::with_loc(msg, n.loc));
}

// Inference for an op node of a verified graph, with the node's location on
// failure.
void infer(const ir::Graph& g, const ir::Node& n, OpCall& call) {
  TensorMeta metas[kMaxOpInputs];
  if (n.inputs.size() > static_cast<size_t>(kMaxOpInputs))
    node_error(n, Code::kInvalidArgument, "[" + n.op->name + "] too many inputs");
  for (size_t i = 0; i < n.inputs.size(); ++i) metas[i] = g.meta(n.inputs[i]);
  try {
    infer_call(*n.op, metas, static_cast<int>(n.inputs.size()), n.attrs, call);
  } catch (const Error& e) {
    node_error(n, e.code(), e.what());
  }
}

// Empty when `device` has a kernel for the call; else the plugin's reason.
std::optional<std::string> lacks(Device* device, const OpDef& op, const OpCall& call) {
  try {
    device->kernel(op, call);
    return std::nullopt;
  } catch (const Error& e) {
    if (e.code() != Code::kUnimplemented) throw;
    return std::string(e.what());
  }
}

// Replaces ops the device lacks by their decompositions until none is left
// that has one.
ir::Graph decompose_unsupported(const ir::Graph& g, Device* device) {
  ir::Graph cur = g;
  for (int round = 0; round < kMaxDecomposeRounds; ++round) {
    ir::Rewriter rw(cur);
    bool changed = false;
    for (size_t id = 0; id < cur.nodes().size(); ++id) {
      const ir::Node& n = cur.nodes()[id];
      if (n.kind != ir::NodeKind::kApply) {
        rw.copy(static_cast<int32_t>(id));
        continue;
      }
      OpCall call;
      infer(cur, n, call);
      // A device with fallback off (spora_device_set_fallback) runs only
      // its own kernels: the op stays, and placement reports it.
      const DecomposeFn fn = call.view || !device->fallback() ? nullptr : find_decomposition(n.op->name);
      if (!fn || !lacks(device, *n.op, call)) {
        rw.copy(static_cast<int32_t>(id));
        continue;
      }
      ir::Builder b(rw.out(), n.loc);
      std::vector<ir::Value> x;
      for (const ir::Value& v : n.inputs) x.push_back(rw.map(v));
      const std::vector<ir::Value> outs = fn(b, x, n.attrs);
      for (size_t o = 0; o < outs.size() && o < n.outputs.size(); ++o)
        rw.set({static_cast<int32_t>(id), static_cast<int32_t>(o)}, outs[o]);
      changed = true;
    }
    if (!changed) break;
    cur = rw.finish();
  }
  return cur;
}

}  // namespace

Device* host_device() {
  PluginRecord* cpu = PluginRecord::find_ready("cpu");
  return cpu && !cpu->devices().empty() ? cpu->devices()[0].get() : nullptr;
}

Placement place(const ir::Graph& graph, Device* device, Device* fallback) {
  Placement p;
  p.graph = decompose_unsupported(graph, device);
  p.on_host.assign(p.graph.nodes().size(), false);
  Device* cpu = fallback;  // else looked up on first need
  bool looked_up = fallback != nullptr;
  for (size_t id = 0; id < p.graph.nodes().size(); ++id) {
    ir::Node& n = p.graph.mutable_node(static_cast<int32_t>(id));
    if (n.kind != ir::NodeKind::kApply) continue;
    OpCall call;
    infer(p.graph, n, call);
    if (call.view) continue;
    if (is_collective_op(*n.op)) {
      // The scheduler runs collectives itself, on the memory the plan
      // already has: a device-bound communicator (NCCL) moves that device's
      // memory on its streams; the others move host memory, staged.
      const std::shared_ptr<Communicator> comm = Communicator::lookup(call.attrs.get_int("group"));
      if (comm && comm->device()) {
        if (comm->device() != device)
          node_error(n, Code::kInvalidArgument,
                     fmt::format("[{}] communicator {} ({}) runs on {}, but the graph is compiled for {}", n.op->name,
                                 comm->id(), comm->backend(), comm->device()->name(), device->name()));
        const std::string problem = Communicator::device_layout_problem(n.op->name, call.attrs, call.in[0], call.out[0]);
        if (!problem.empty()) node_error(n, Code::kUnimplemented, fmt::format("[{}] {}", n.op->name, problem));
        n.device = device->name();
        continue;
      }
      // Host-memory backends stage a device's memory through host memory
      // (executor.cpp).
      n.device = device->name();
      continue;
    }
    const std::optional<std::string> why = lacks(device, *n.op, call);
    if (!why) {
      n.device = device->name();
      continue;
    }
    if (!device->fallback()) node_error(n, Code::kUnimplemented, *why);
    if (!looked_up) {
      cpu = host_device();
      looked_up = true;
    }
    const char* decomposed =
        find_decomposition(n.op->name) ? "its decomposition did not help" : "it has no decomposition";
    if (!cpu || cpu == device)
      node_error(n, Code::kUnimplemented,
                 fmt::format("{}; {} and there is no other cpu device to run it on", *why, decomposed));
    if (const std::optional<std::string> cpu_why = lacks(cpu, *n.op, call))
      node_error(n, Code::kUnimplemented, fmt::format("{}; {}, and cpu lacks it too: {}", *why, decomposed, *cpu_why));
    // Fallback copies go through the host: cpu addresses must be host memory.
    if (!cpu->unified_memory() || !device->has_async())
      node_error(n, Code::kUnimplemented,
                 fmt::format("{}; running it on {} needs asynchronous copies and host callbacks on {}", *why,
                             cpu->name(), device->name()));
    n.device = cpu->name();
    p.on_host[id] = true;
    p.host = cpu;
    logger().debug("[{}] no kernel on {}: placed on {} with copies", n.op->name, device->name(), cpu->name());
  }
  return p;
}

}  // namespace spora::sched
