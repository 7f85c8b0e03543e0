// The stages of building an execution plan up to lifetimes (plan_build.h);
// the arenas and the host steps are in plan_arenas.cpp.
#include "sched/plan_build.h"

#include <algorithm>

#include "ir/serialize.h"
#include "ir/verifier.h"
#include "runtime/collective.h"
#include "runtime/eager.h"
#include "sched/placement.h"
#include "support/log.h"

namespace spora::sched {

namespace {

[[noreturn]] void node_error(const ir::Node& n, Code code, const std::string& msg) {
  throw Error(code, ir::with_loc(msg, n.loc));
}

using PerValue = std::vector<std::vector<int32_t>>;

PerValue per_value(const ir::Graph& g, int32_t fill) {
  PerValue v(g.nodes().size());
  for (size_t id = 0; id < v.size(); ++id) v[id].assign(g.nodes()[id].outputs.size(), fill);
  return v;
}

// An if/while node: its sub-graphs planned once for the same device; their
// errors already name the failing node inside the sub-graph.
std::unique_ptr<Step> plan_control_flow(ExecutionPlan& p, int32_t id) {
  const ir::Node& n = p.graph.node(id);
  auto step = std::make_unique<Step>();
  step->kind = n.kind == ir::NodeKind::kIf ? Step::kIf : Step::kWhile;
  step->node = id;
  step->inputs = n.inputs;
  for (size_t i = 0; i < n.outputs.size(); ++i) step->outputs.push_back({id, static_cast<int32_t>(i)});
  for (size_t b = 0; b < 2; ++b) step->sub[b] = build_plan(*n.subgraphs[b], p.device);
  if (step->kind == Step::kWhile) {
    const ir::Graph& cond = *n.subgraphs[0];
    const TensorMeta& fm = cond.meta(cond.outputs()[0]);
    step->flag = make_tensor(p.device, fm.dtype, fm.shape);
    for (const TensorMeta& m : n.outputs) step->scratch.push_back(make_tensor(p.device, m.dtype, m.shape));
  }
  uint64_t held = step->flag.buffer ? step->flag.nbytes() : 0;
  for (const Tensor& t : step->scratch) held += t.nbytes();
  p.sub_bytes += held + step->sub[0]->arena_bytes + step->sub[1]->arena_bytes;
  p.sub_naive_bytes += held + step->sub[0]->naive_bytes + step->sub[1]->naive_bytes;
  return step;
}

// An op node: inference, then a view (an alias, no step), a collective (run
// by the executor through its communicator), or a kernel planned on the
// device or, for a cpu-placed node, on cpu.
void plan_apply(PlanBuild& b, int32_t id) {
  ExecutionPlan& p = *b.plan;
  const ir::Node& n = p.graph.node(id);
  TensorMeta metas[kMaxOpInputs];
  for (size_t i = 0; i < n.inputs.size(); ++i) metas[i] = p.graph.meta(n.inputs[i]);
  OpCall call;
  try {
    infer_call(*n.op, metas, static_cast<int>(n.inputs.size()), n.attrs, call);
  } catch (const Error& e) {
    node_error(n, e.code(), e.what());
  }
  if (n.op->in_place && n.op->in_place_input)
    for (int i = 0; i < call.num_outputs; ++i) b.in_place_partner[static_cast<size_t>(id)][static_cast<size_t>(i)] =
        n.op->in_place_input(call, i);
  if (call.view) {
    p.slots[static_cast<size_t>(id)][0] = {Slot::kAlias, 0, 0, n.inputs[0]};
    return;
  }
  auto step = std::make_unique<Step>();
  step->node = id;
  step->inputs = n.inputs;
  for (int i = 0; i < call.num_outputs; ++i) step->outputs.push_back({id, i});
  if (is_collective_op(*n.op)) {
    // Placement checked the memory is host memory.
    step->kind = Step::kCollective;
    step->group = call.attrs.get_int("group");
    const AttrValue* op = call.attrs.find("op");  // all_gather has none
    step->reduce_op = op ? reduce_op_from_name(op->s, n.op->name) : 0;
  } else {
    const bool host = p.on_host[static_cast<size_t>(id)];
    try {
      step->kernel = (host ? p.host : p.device)->kernel(*n.op, call);
    } catch (const Error& e) {
      node_error(n, e.code(), e.what());
    }
    if (host) {
      step->kind = Step::kHostKernel;
      step->host = p.host;
      step->owner = &p;
      ++p.host_ops;
    }
  }
  p.steps.push_back(std::move(step));
}

}  // namespace

ExecutionPlan::~ExecutionPlan() {
  if (host_ops && device->has_async() && !device->failed()) {
    try {
      device->wait_idle();
    } catch (const std::exception& e) {
      logger().error("[graph {}] releasing a plan: {}", graph.name(), e.what());
    }
  }
}

ir::Value ExecutionPlan::root(ir::Value v) const {
  while (slot(v).kind == Slot::kAlias) v = slot(v).alias;
  return v;
}

void place(PlanBuild& b, const ir::Graph& graph, Device* device) {
  ExecutionPlan& p = *b.plan;
  ir::check_json_roundtrip(graph, "compile");
  Placement placed = sched::place(graph, device);
  p.device = device;
  p.graph = std::move(placed.graph);
  p.on_host = std::move(placed.on_host);
  p.host = placed.host;
  ir::verify(p.graph);
  ir::check_json_roundtrip(p.graph, "compile, after decomposing unsupported ops");
}

void plan_kernels(PlanBuild& b) {
  ExecutionPlan& p = *b.plan;
  const auto& nodes = p.graph.nodes();
  p.slots.resize(nodes.size());
  b.in_place_partner.resize(nodes.size());
  for (size_t id = 0; id < nodes.size(); ++id) {
    p.slots[id].resize(nodes[id].outputs.size());
    b.in_place_partner[id].assign(nodes[id].outputs.size(), -1);
  }
  for (size_t id = 0; id < nodes.size(); ++id) {
    const ir::Node& n = nodes[id];
    switch (n.kind) {
      case ir::NodeKind::kInput:
      case ir::NodeKind::kWeight:
        p.slots[id][0] = {Slot::kParam, static_cast<int32_t>(p.param_nodes.size()), 0, {}};
        p.param_nodes.push_back(static_cast<int32_t>(id));
        break;
      case ir::NodeKind::kConstant: {
        const TensorMeta& m = n.outputs[0];
        p.constants.push_back(tensor_from_host(p.device, m.dtype, m.shape, n.data->data(), n.data->size()));
        p.slots[id][0] = {Slot::kConstant, static_cast<int32_t>(p.constants.size() - 1), 0, {}};
        break;
      }
      case ir::NodeKind::kIf:
      case ir::NodeKind::kWhile: p.steps.push_back(plan_control_flow(p, static_cast<int32_t>(id))); break;
      case ir::NodeKind::kApply: plan_apply(b, static_cast<int32_t>(id)); break;
    }
  }
}

namespace {

// Which values cpu-placed steps and the device read, by alias root; a
// cpu-placed output the device never reads gets no device memory.
void plan_host_reads(PlanBuild& b) {
  ExecutionPlan& p = *b.plan;
  b.host_first = per_value(p.graph, -1);
  b.host_last = per_value(p.graph, -1);
  b.device_reads.assign(p.graph.nodes().size(), {});
  for (size_t id = 0; id < b.device_reads.size(); ++id) b.device_reads[id].assign(p.slots[id].size(), 0);
  if (!p.host_ops) return;
  for (const auto& step : p.steps)
    for (const ir::Value& v : step->inputs) {
      const ir::Value r = p.root(v);
      const size_t rn = static_cast<size_t>(r.node), ri = static_cast<size_t>(r.index);
      if (step->kind == Step::kHostKernel) {
        if (b.host_first[rn][ri] < 0) b.host_first[rn][ri] = step->node;
        b.host_last[rn][ri] = step->node;
      } else {
        b.device_reads[rn][ri] = 1;
      }
    }
  for (const ir::Value& v : p.graph.outputs()) {
    const ir::Value r = p.root(v);
    b.device_reads[static_cast<size_t>(r.node)][static_cast<size_t>(r.index)] = 1;
  }
  for (size_t id = 0; id < p.slots.size(); ++id)
    if (p.on_host[id])
      for (size_t o = 0; o < p.slots[id].size(); ++o)
        if (!b.device_reads[id][o] && p.slots[id][o].kind == Slot::kArena) p.slots[id][o].kind = Slot::kHostOnly;
}

// Whether the kernel at node `writer` may write its output `o` over param
// value `pv` that it reads itself: an in-place op reading pv in exactly one
// input slot, directly (not through a view), that is o's partner.
bool writes_over_own_input(const PlanBuild& b, int32_t writer, int32_t o, ir::Value pv) {
  const ExecutionPlan& p = *b.plan;
  const ir::Node& n = p.graph.node(writer);
  if (!n.op->in_place) return false;
  int slot = -1;
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    if (p.root(n.inputs[k]) != pv) continue;
    if (slot >= 0 || n.inputs[k] != pv) return false;
    slot = static_cast<int>(k);
  }
  if (slot < 0) return false;
  if (n.op->in_place_input) return b.in_place_partner[static_cast<size_t>(writer)][static_cast<size_t>(o)] == slot;
  return o == 0;
}

// ExecutionPlan::output_may_take: an output a device kernel writes straight
// into its output tensor may instead be written into the memory of a param
// of its type that nothing reads afterwards (steps run in node order).
void plan_output_donation(PlanBuild& b) {
  ExecutionPlan& p = *b.plan;
  const ir::Graph& g = p.graph;
  std::vector<bool> kernel_step(g.nodes().size(), false);
  for (const auto& step : p.steps)
    if (step->kind == Step::kKernel) kernel_step[static_cast<size_t>(step->node)] = true;
  std::vector<bool> param_is_output(p.param_nodes.size(), false);
  for (const ir::Value& v : g.outputs()) {
    const ir::Value r = p.root(v);
    for (size_t j = 0; j < p.param_nodes.size(); ++j)
      if (r == ir::Value{p.param_nodes[j], 0}) param_is_output[j] = true;
  }
  p.output_may_take.assign(g.outputs().size(), {});
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const ir::Value v = g.outputs()[i];
    const Slot& s = p.slot(v);
    if (s.kind != Slot::kOutput || s.index != static_cast<int32_t>(i) || !kernel_step[static_cast<size_t>(v.node)])
      continue;
    const TensorMeta& m = g.meta(v);
    for (size_t j = 0; j < p.param_nodes.size(); ++j) {
      const ir::Value pv{p.param_nodes[j], 0};
      const TensorMeta& pm = g.meta(pv);
      if (param_is_output[j] || pm.dtype != m.dtype || pm.shape != m.shape) continue;
      const int32_t last = b.last_use_of(pv);
      if (last < v.node || (last == v.node && writes_over_own_input(b, v.node, v.index, pv)))
        p.output_may_take[i].push_back(static_cast<int32_t>(j));
    }
  }
}

}  // namespace

void plan_lifetimes_and_aliases(PlanBuild& b) {
  ExecutionPlan& p = *b.plan;
  const auto& nodes = p.graph.nodes();
  // Last node reading each value; nodes are in topological order.
  b.last_use = per_value(p.graph, 0);
  for (size_t id = 0; id < nodes.size(); ++id) {
    for (size_t o = 0; o < nodes[id].outputs.size(); ++o) b.last_use[id][o] = static_cast<int32_t>(id);
    if (nodes[id].kind == ir::NodeKind::kApply || nodes[id].kind == ir::NodeKind::kIf ||
        nodes[id].kind == ir::NodeKind::kWhile)
      for (const ir::Value& v : nodes[id].inputs)
        b.last_use[static_cast<size_t>(v.node)][static_cast<size_t>(v.index)] = static_cast<int32_t>(id);
  }
  // Alias chains resolved to their root, which lives as long as its views.
  for (size_t id = nodes.size(); id-- > 0;)
    for (size_t o = 0; o < p.slots[id].size(); ++o)
      if (p.slots[id][o].kind == Slot::kAlias) {
        const ir::Value r = p.root({static_cast<int32_t>(id), static_cast<int32_t>(o)});
        int32_t& lu = b.last_use[static_cast<size_t>(r.node)][static_cast<size_t>(r.index)];
        lu = std::max(lu, b.last_use[id][o]);
        p.slots[id][o].alias = r;
      }
  // Graph outputs get fresh tensors on every run (they outlive the run):
  // outputs, and the roots of views that are outputs, are not arena buffers.
  b.output_pos.clear();
  for (size_t i = 0; i < p.graph.outputs().size(); ++i) {
    const ir::Value v = p.graph.outputs()[i];
    b.output_pos.emplace(std::make_pair(v.node, v.index), static_cast<int32_t>(i));
  }
  for (const auto& [v, pos] : b.output_pos) {
    Slot& slot = p.slot(p.root({v.first, v.second}));
    if (slot.kind == Slot::kArena) slot = {Slot::kOutput, pos, 0, {}};
  }
  plan_collective_overlap(b);
  plan_host_reads(b);
  plan_output_donation(b);
}

void plan_workspaces(PlanBuild& b) {
  // Kernel scratch sized now: growing it during a run would free the old
  // one, which waits for the device. Device steps get the plan's own.
  ExecutionPlan& p = *b.plan;
  size_t workspace = 0, host_workspace = 0;
  for (const auto& step : p.steps) {
    if (step->kind == Step::kKernel) workspace = std::max(workspace, step->kernel->workspace);
    if (step->kind == Step::kHostKernel) host_workspace = std::max(host_workspace, step->kernel->workspace);
  }
  if (workspace) p.workspace = std::make_shared<Buffer>(p.device, workspace);
  if (p.host) p.host->reserve_workspace(host_workspace);
}

std::unique_ptr<ExecutionPlan> build_plan(const ir::Graph& graph, Device* device) {
  PlanBuild b;
  place(b, graph, device);
  plan_kernels(b);
  plan_lifetimes_and_aliases(b);
  plan_device_arena(b);
  plan_host_steps(b);
  plan_workspaces(b);
  return std::move(b.plan);
}

}  // namespace spora::sched
