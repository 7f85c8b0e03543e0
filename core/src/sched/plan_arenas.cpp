// The memory stages of building an execution plan (plan_build.h): the
// device arena, and the host arena with the copies of cpu-placed steps.
#include <algorithm>

#include "sched/memory_plan.h"
#include "sched/plan_build.h"

namespace spora::sched {

namespace {

uint64_t bytes_of(const TensorMeta& m) { return static_cast<uint64_t>(m.shape.numel()) * dtype_size(m.dtype); }

// The input whose buffer output `o` of op node `id` may take over, if any:
// an in-place op writes over an arena input of its own type that nothing
// reads afterwards. A multi-output op (in_place_input) writes output o over
// its partner input only, and only when no other input slot reads the same
// value, since the kernel reads those while writing o (possibly on other
// threads). Returns the index of the reused request, or -1.
int32_t in_place_reuse(const PlanBuild& b, int32_t id, size_t o,
                       const std::map<std::pair<int32_t, int32_t>, size_t>& request_index) {
  const ExecutionPlan& p = *b.plan;
  const ir::Node& n = p.graph.node(id);
  if (n.kind != ir::NodeKind::kApply || !n.op->in_place || p.on_host[static_cast<size_t>(id)]) return -1;
  const TensorMeta& m = n.outputs[o];
  auto reuse = [&](const ir::Value& v) -> int32_t {
    const ir::Value r = p.root(v);
    auto it = request_index.find({r.node, r.index});
    const TensorMeta& im = p.graph.meta(r);
    if (it == request_index.end() || im.dtype != m.dtype || im.shape != m.shape || b.last_use_of(r) != id) return -1;
    return static_cast<int32_t>(it->second);
  };
  if (n.op->in_place_input) {
    const int i = b.in_place_partner[static_cast<size_t>(id)][o];
    if (i < 0 || static_cast<size_t>(i) >= n.inputs.size()) return -1;
    const ir::Value r = p.root(n.inputs[static_cast<size_t>(i)]);
    for (size_t j = 0; j < n.inputs.size(); ++j)
      if (j != static_cast<size_t>(i) && p.root(n.inputs[j]) == r) return -1;
    return reuse(n.inputs[static_cast<size_t>(i)]);
  }
  if (o != 0) return -1;
  for (const ir::Value& v : n.inputs)
    if (const int32_t r = reuse(v); r >= 0) return r;
  return -1;
}

}  // namespace

void plan_device_arena(PlanBuild& b) {
  ExecutionPlan& p = *b.plan;
  const auto& nodes = p.graph.nodes();
  std::vector<BufferRequest> requests;
  std::vector<ir::Value> request_value;
  std::map<std::pair<int32_t, int32_t>, size_t> request_index;
  for (size_t id = 0; id < nodes.size(); ++id) {
    const ir::NodeKind k = nodes[id].kind;
    if (k != ir::NodeKind::kApply && k != ir::NodeKind::kIf && k != ir::NodeKind::kWhile) continue;
    for (size_t o = 0; o < p.slots[id].size(); ++o) {
      if (p.slots[id][o].kind != Slot::kArena) continue;
      const int32_t node = static_cast<int32_t>(id);
      BufferRequest req{bytes_of(nodes[id].outputs[o]), node, b.last_use[id][o]};
      req.reuse = in_place_reuse(b, node, o, request_index);
      request_index[{node, static_cast<int32_t>(o)}] = requests.size();
      requests.push_back(req);
      request_value.push_back({node, static_cast<int32_t>(o)});
    }
  }
  const MemoryPlan plan = plan_memory(requests);
  for (size_t i = 0; i < requests.size(); ++i) p.slot(request_value[i]).offset = plan.offsets[i];
  p.arena_bytes = plan.arena_bytes;
  p.naive_bytes = plan.naive_bytes;
  for (const ir::Value& v : p.graph.outputs()) p.naive_bytes += bytes_of(p.graph.meta(v));
  if (p.arena_bytes > 0) p.arena = std::make_shared<Buffer>(p.device, p.arena_bytes);
  // Nested plans (and a loop's scratch) are memory this plan holds.
  p.arena_bytes += p.sub_bytes;
  p.naive_bytes += p.sub_naive_bytes;
}

namespace {

// Where the host arena's values are: offsets by value, and constants
// uploaded to cpu once (index into host_constants, -1 elsewhere).
struct HostLayout {
  std::map<std::pair<int32_t, int32_t>, uint64_t> offset;
  std::vector<std::vector<int32_t>> constant;

  spora_devptr_t ptr(const ExecutionPlan& p, ir::Value r) const {
    const int32_t c = constant[static_cast<size_t>(r.node)][static_cast<size_t>(r.index)];
    if (c >= 0) return p.host_constants[static_cast<size_t>(c)].data();
    return reinterpret_cast<spora_devptr_t>(reinterpret_cast<uintptr_t>(p.host_arena->ptr()) +
                                            offset.at({r.node, r.index}));
  }
};

// The host arena, planned like the device's: cpu-placed outputs from their
// step on, device values' cpu copies from their first cpu reader, each
// until its last cpu reader. Constants are uploaded to cpu once.
HostLayout plan_host_arena(PlanBuild& b) {
  ExecutionPlan& p = *b.plan;
  const auto& nodes = p.graph.nodes();
  HostLayout layout;
  std::vector<BufferRequest> requests;
  std::vector<ir::Value> value;
  layout.constant.resize(nodes.size());
  for (size_t id = 0; id < nodes.size(); ++id) {
    layout.constant[id].assign(nodes[id].outputs.size(), -1);
    for (size_t o = 0; o < nodes[id].outputs.size(); ++o) {
      const bool produced = p.on_host[id];
      if (!produced && b.host_first[id][o] < 0) continue;
      const TensorMeta& m = nodes[id].outputs[o];
      if (nodes[id].kind == ir::NodeKind::kConstant) {
        p.host_constants.push_back(
            tensor_from_host(p.host, m.dtype, m.shape, nodes[id].data->data(), nodes[id].data->size()));
        layout.constant[id][o] = static_cast<int32_t>(p.host_constants.size() - 1);
        continue;
      }
      const int32_t first = produced ? static_cast<int32_t>(id) : b.host_first[id][o];
      requests.push_back({bytes_of(m), first, std::max(first, b.host_last[id][o])});
      value.push_back({static_cast<int32_t>(id), static_cast<int32_t>(o)});
    }
  }
  const MemoryPlan plan = plan_memory(requests);
  p.host_arena_bytes = plan.arena_bytes;
  // The host arena takes part in copies ordered after host callbacks (a cpu
  // step's outputs are written by its callback, then copied to the device):
  // it must be the device plugin's pinned memory, which async copies read
  // and write when the stream reaches them. Pageable memory may be read
  // when the copy is enqueued (CUDA does), before the callback has run
  // (issue 11: silently wrong CNNs on an H100). A plugin without pinned
  // memory gets synchronous cpu steps instead (executor.cpp).
  p.host_steps_async = p.device->has_pinned();
  if (p.host_arena_bytes > 0) {
    if (p.host_steps_async) {
      Device* dev = p.device;
      void* ptr = dev->host_alloc_pinned(p.host_arena_bytes);
      p.host_arena = std::make_shared<Buffer>(p.host, reinterpret_cast<spora_devptr_t>(ptr), p.host_arena_bytes,
                                              [dev, ptr] { dev->host_free_pinned(ptr); });
    } else {
      p.host_arena = std::make_shared<Buffer>(p.host, p.host_arena_bytes);
    }
  }
  for (size_t i = 0; i < requests.size(); ++i) layout.offset[{value[i].node, value[i].index}] = plan.offsets[i];
  return layout;
}

// A cpu-placed step's fixed cpu addresses, and its copies: a device value is
// copied in by its first cpu reader, once; an output the device reads is
// copied back after the step.
void plan_host_copies(PlanBuild& b, const HostLayout& layout, Step& step) {
  ExecutionPlan& p = *b.plan;
  for (size_t i = 0; i < step.inputs.size(); ++i) {
    const ir::Value r = p.root(step.inputs[i]);
    step.host_in[i] = layout.ptr(p, r);
    const size_t rn = static_cast<size_t>(r.node), ri = static_cast<size_t>(r.index);
    if (p.on_host[rn] || layout.constant[rn][ri] >= 0 || b.host_first[rn][ri] != step.node) continue;
    const bool seen = std::any_of(step.copy_in.begin(), step.copy_in.end(), [&](const HostCopy& c) { return c.value == r; });
    if (!seen) step.copy_in.push_back({r, layout.offset.at({r.node, r.index}), bytes_of(p.graph.meta(r))});
  }
  for (size_t o = 0; o < step.outputs.size(); ++o) {
    const ir::Value v = step.outputs[o];
    step.host_out[o] = layout.ptr(p, v);
    if (b.device_reads[static_cast<size_t>(v.node)][static_cast<size_t>(v.index)])
      step.copy_out.push_back({v, layout.offset.at({v.node, v.index}), bytes_of(p.graph.meta(v))});
  }
  p.host_copies += step.copy_in.size() + step.copy_out.size();
}

}  // namespace

void plan_host_steps(PlanBuild& b) {
  ExecutionPlan& p = *b.plan;
  if (!p.host_ops) return;
  const HostLayout layout = plan_host_arena(b);
  for (const auto& step : p.steps)
    if (step->kind == Step::kHostKernel) plan_host_copies(b, layout, *step);
}

}  // namespace spora::sched
