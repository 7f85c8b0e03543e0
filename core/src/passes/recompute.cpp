// See recompute.h.
#include "passes/recompute.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "ir/rewrite.h"
#include "ops/collective.h"
#include "passes/pass.h"
#include "support/error.h"
#include "support/log.h"

namespace spora::passes {
namespace {

using ir::Graph;
using ir::Node;
using ir::NodeKind;
using ir::Value;

// The node's mark, 0 when it has none.
int64_t mark_of(const Node& n) {
  if (n.kind != NodeKind::kApply) return 0;
  const AttrValue* a = n.attrs.find(kRecomputeAttr);
  return a ? a->i : 0;
}

// Copying the op gives the same values and has no effect beyond them.
bool copyable(const Node& n) {
  return n.kind == NodeKind::kApply && !is_collective_op(*n.op) && !n.op->in_place_input;
}

// Output 0 of the op aliases input 0's memory (the planner's views, which
// keep their root alive as long as themselves).
bool is_view(const Graph& g, const Node& n) {
  if (n.kind != NodeKind::kApply || n.inputs.empty()) return false;
  TensorMeta metas[kMaxOpInputs];
  for (size_t i = 0; i < n.inputs.size(); ++i) metas[i] = g.meta(n.inputs[i]);
  OpCall call;
  infer_call(*n.op, metas, static_cast<int>(n.inputs.size()), n.attrs, call);
  return call.view;
}

// The last node the first `k` outputs depend on (-1 when none).
int32_t forward_end(const Graph& g, int32_t k) {
  const auto& nodes = g.nodes();
  std::vector<char> seen(nodes.size(), 0);
  std::vector<int32_t> stack;
  const auto& outs = g.outputs();
  for (size_t o = 0; o < outs.size() && o < static_cast<size_t>(k); ++o) stack.push_back(outs[o].node);
  int32_t last = -1;
  while (!stack.empty()) {
    const int32_t id = stack.back();
    stack.pop_back();
    if (seen[static_cast<size_t>(id)]) continue;
    seen[static_cast<size_t>(id)] = 1;
    last = std::max(last, id);
    for (const Value& v : nodes[static_cast<size_t>(id)].inputs) stack.push_back(v.node);
  }
  return last;
}

}  // namespace

RecomputeStats recompute(Graph& g, const RecomputeOptions& options) {
  if (options.forward_outputs < 1)
    fail(Code::kInvalidArgument, "[recompute] forward_outputs is {}; the forward pass computes at least one output",
         options.forward_outputs);
  const auto& nodes = g.nodes();
  const size_t n = nodes.size();
  bool any = false;
  for (const Node& node : nodes) any = any || mark_of(node) >= 1;
  if (!any) return {};
  const int32_t fwd_end = forward_end(g, options.forward_outputs);

  // Readers of each node's outputs, and which outputs leave the graph.
  std::vector<std::vector<int32_t>> readers(n);
  for (size_t id = 0; id < n; ++id)
    for (const Value& v : nodes[id].inputs) readers[static_cast<size_t>(v.node)].push_back(static_cast<int32_t>(id));
  std::vector<char> is_output(n, 0);
  for (const Value& v : g.outputs()) is_output[static_cast<size_t>(v.node)] = 1;

  // Forward nodes computed again for backward readers: marked, copyable,
  // no graph output, and for a Cell's region no output the forward pass
  // reads outside the region.
  std::vector<char> redo(n, 0);
  for (int32_t id = 0; id <= fwd_end; ++id) {
    const Node& node = nodes[static_cast<size_t>(id)];
    const int64_t mark = mark_of(node);
    if (mark < 1 || !copyable(node) || is_output[static_cast<size_t>(id)]) continue;
    bool kept = false;
    if (mark >= 2)
      for (int32_t r : readers[static_cast<size_t>(id)])
        kept = kept || (r <= fwd_end && mark_of(nodes[static_cast<size_t>(r)]) != mark);
    redo[static_cast<size_t>(id)] = !kept;
  }
  // A value alive into the backward pass that is a view keeps its root's
  // memory alive too: computing the root again would hold it twice. Such
  // roots are kept (descending ids: alias chains point to earlier nodes).
  std::vector<char> alive_late(n, 0);
  for (int32_t id = fwd_end; id >= 0; --id) {
    const auto u = static_cast<size_t>(id);
    if (redo[u]) continue;
    alive_late[u] = alive_late[u] || is_output[u];
    for (int32_t r : readers[u]) alive_late[u] = alive_late[u] || r > fwd_end || redo[static_cast<size_t>(r)];
    if (!alive_late[u] || !is_view(g, nodes[u])) continue;
    const auto root = static_cast<size_t>(nodes[u].inputs[0].node);
    redo[root] = 0;
    alive_late[root] = 1;
  }

  ir::Rewriter rw(g);
  Graph& out = rw.out();
  std::vector<int32_t> copy_of(n, -1);  // node -> its copy in `out`
  RecomputeStats stats;
  auto input_of_copy = [&](const Value& v) {
    const int32_t c = copy_of[static_cast<size_t>(v.node)];
    return c >= 0 ? Value{c, v.index} : rw.map(v);
  };
  // The copy of `root` and of every node to redo it reads, inputs first,
  // appended to `out` now (just before the backward reader being copied).
  auto ensure_copy = [&](int32_t root) {
    std::vector<std::pair<int32_t, bool>> stack{{root, false}};
    while (!stack.empty()) {
      auto [id, inputs_done] = stack.back();
      stack.pop_back();
      if (copy_of[static_cast<size_t>(id)] >= 0) continue;
      const Node& src = nodes[static_cast<size_t>(id)];
      if (!inputs_done) {
        stack.push_back({id, true});
        for (const Value& v : src.inputs)
          if (redo[static_cast<size_t>(v.node)] && copy_of[static_cast<size_t>(v.node)] < 0)
            stack.push_back({v.node, false});
        continue;
      }
      Node c = src;
      for (Value& v : c.inputs) v = input_of_copy(v);
      c.attrs.set(kRecomputeAttr, AttrValue::of_int(0));
      copy_of[static_cast<size_t>(id)] = out.append(std::move(c));
      ++stats.copies;
    }
  };

  for (size_t i = 0; i < n; ++i) {
    const int32_t id = static_cast<int32_t>(i);
    if (id <= fwd_end) {
      rw.copy(id);
      continue;
    }
    Node node = nodes[i];
    for (Value& v : node.inputs)
      if (redo[static_cast<size_t>(v.node)]) {
        ensure_copy(v.node);
        v = input_of_copy(v);
      } else {
        v = rw.map(v);
      }
    const int32_t nid = out.append(std::move(node));
    for (size_t o = 0; o < nodes[i].outputs.size(); ++o)
      rw.set({id, static_cast<int32_t>(o)}, {nid, static_cast<int32_t>(o)});
  }
  if (stats.copies == 0) return {};
  for (size_t id = 0; id < n; ++id)
    if (copy_of[id] >= 0) {
      ++stats.dropped;
      for (const TensorMeta& m : nodes[id].outputs)
        stats.dropped_bytes += static_cast<uint64_t>(m.shape.numel()) * dtype_size(m.dtype);
    }
  logger().debug("[graph {}] recompute: {} ops computed again in the backward pass, {} bytes no longer kept",
                 g.name(), stats.copies, stats.dropped_bytes);
  g = rw.finish();
  return stats;
}

int32_t mark_recompute(Graph& g, int32_t first, int32_t end, int64_t mark) {
  const auto size = static_cast<int32_t>(g.nodes().size());
  if (first < 0 || end < first || end > size)
    fail(Code::kInvalidArgument, "[recompute] node range [{}, {}) is outside graph '{}' of {} nodes", first, end,
         g.name(), size);
  if (mark < 0)
    fail(Code::kInvalidArgument, "[recompute] mark {} is negative (0: never, 1: this op, >= 2: a region)", mark);
  int32_t marked = 0;
  for (int32_t id = first; id < end; ++id) {
    Node& node = g.mutable_node(id);
    if (node.kind != NodeKind::kApply || node.attrs.find(kRecomputeAttr)) continue;
    node.attrs.set(kRecomputeAttr, AttrValue::of_int(mark));
    ++marked;
  }
  return marked;
}

namespace {
bool run_recompute(Graph& g, const PassContext&) { return recompute(g).copies > 0; }
}  // namespace
SPORA_PASS("recompute", 1, run_recompute);

}  // namespace spora::passes
