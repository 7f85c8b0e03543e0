// Blocked hand-overs, issue 19's layout selection across ops: after
// conv_pool_fusion and conv_pool_grad_fusion every convolution + activation
// + max pooling of a CNN is one conv2d_act_pool and its backward one
// conv2d_act_pool_grad, and each of those kernels works in oneDNN's
// channel-blocked layout inside and reorders to NCHW at its edges. Where
// one such op's result is read only by others -- the kept activation by
// the layer's backward op (a), a pooled result by the next layer's
// conv2d_act_pool (x) and its backward op (x), a backward op's input
// gradient dx by the previous layer's backward op (dy) -- the reorder out
// and the reorder in are a round trip nobody else sees. This pass marks
// such values: the producer lists the output in blocked_outputs, every
// reader lists the input in blocked_inputs, and the kernels then write and
// read the value in the plugin's own blocked layout
// (onednn_kept_activation.h), so a chain of layers reorders only at its
// ends (the network's input, the last pooled result before the flatten).
//
//   y1, a1  = conv2d_act_pool(x, w1, b1)             blocked_outputs [0, 1]
//   y2, a2  = conv2d_act_pool(y1, w2, b2)            blocked_inputs [0], blocked_outputs [1]
//   dw2, db2, dy1 = conv2d_act_pool_grad(y1, w2, a2, g2)
//                                                    blocked_inputs [0, 2], blocked_outputs [2]
//   dw1, db1 = conv2d_act_pool_grad(x, w1, a1, dy1)  blocked_inputs [2, 3]
//
// A value is marked only when all of these hold: its producer may write it
// blocked and every reader may read it so (the ports and op conditions
// below, which mirror the cpu kernels' own: f32, ungrouped, disjoint
// pooling windows for the backward op, no channel padding the AVX2 forward
// kernel would decline); it is no graph output; f32 NCHW with channels a
// multiple of 16 (the blocked bytes are then exactly the NCHW tensor's on
// AVX-512 and AVX2, so the memory plan stays right); producer and readers
// on one device; the kept activation read with the pooling windows that
// made it; and the target says yes (Target::blocks_kept_activation for the
// kept activation, Target::blocks_layer_handoffs for the others).
// ir::verify checks that producer and readers agree, so a later pass that
// adds a reader fails verification instead of reading blocked bytes as
// NCHW. Last in the pipeline, after every pass that adds or moves readers.
#include <algorithm>
#include <vector>

#include "passes/pass.h"
#include "passes/target.h"

namespace spora::passes {
namespace {

using ir::Graph;
using ir::Node;
using ir::Value;

std::vector<int64_t> ints_or(const Node& n, const char* name, std::vector<int64_t> otherwise) {
  const AttrValue* v = n.attrs.find(name);
  return v ? v->ints : otherwise;
}

bool flag(const Node& n, const char* name) {
  const AttrValue* v = n.attrs.find(name);
  return v && v->i != 0;
}

// The conditions under which the cpu kernel of one of the two ops runs (and
// so can honour a blocked operand) rather than declining to the
// decomposition, which would read every operand as NCHW.
bool kernel_runs(const Graph& g, const Node& n) {
  if (n.outputs.empty() || n.outputs[0].dtype != SPORA_DTYPE_F32) return false;
  if (const AttrValue* groups = n.attrs.find("groups"); groups && groups->i != 1) return false;
  if (is_apply(n, "conv2d_act_pool")) {
    // Training on AVX2 with output channels padded to nChw8c declines.
    const Shape& w = g.meta(n.inputs[1]).shape;
    return !flag(n, "keep_activation") || (w.rank == 4 && w[0] % 8 == 0);
  }
  if (is_apply(n, "conv2d_act_pool_grad")) {
    // Disjoint windows covering what dy says, as the kernel takes.
    const auto k = ints_or(n, "pool_kernel_size", {}), st = ints_or(n, "pool_stride", {});
    const auto pad = ints_or(n, "pool_padding", {0, 0, 0, 0}), dil = ints_or(n, "pool_dilation", {1, 1});
    if (k.size() != 2 || k != st || k[0] < 1 || k[1] < 1) return false;
    if (std::any_of(pad.begin(), pad.end(), [](int64_t v) { return v != 0; }) ||
        std::any_of(dil.begin(), dil.end(), [](int64_t v) { return v != 1; }))
      return false;
    const Shape &a = g.meta(n.inputs[2]).shape, &dy = g.meta(n.inputs[3]).shape;
    return a.rank == 4 && dy.rank == 4 && dy[2] == a[2] / k[0] && dy[3] == a[3] / k[1];
  }
  return false;
}

// The ports the kernels take blocked. The kept activation (output 1) goes
// only to a backward op's a (input 2), pooled with the same windows.
bool may_write(const Node& n, int32_t index) {
  return (is_apply(n, "conv2d_act_pool") && (index == 0 || (index == 1 && flag(n, "keep_activation")))) ||
         (is_apply(n, "conv2d_act_pool_grad") && index == 2 && flag(n, "input_grad"));
}
bool may_read(const Node& producer, int32_t index, const Node& n, size_t slot) {
  if (index == 1 && is_apply(producer, "conv2d_act_pool"))
    return is_apply(n, "conv2d_act_pool_grad") && slot == 2 &&
           ints_or(producer, "pool_kernel_size", {}) == ints_or(n, "pool_kernel_size", {}) &&
           ints_or(producer, "pool_stride", {}) == ints_or(n, "pool_stride", {});
  return (is_apply(n, "conv2d_act_pool") && slot == 0) ||
         (is_apply(n, "conv2d_act_pool_grad") && (slot == 0 || slot == 3));
}

// The target's answer for the value at output `index` of `n`.
bool target_blocks(const Target& target, const Node& n, int32_t index) {
  const DType dtype = n.outputs[static_cast<size_t>(index)].dtype;
  return is_apply(n, "conv2d_act_pool") && index == 1 ? target.blocks_kept_activation(dtype)
                                                      : target.blocks_layer_handoffs(dtype);
}

// f32 NCHW, channels filling whole blocks of 16 (and so of 8).
bool blockable(const TensorMeta& m) {
  return m.dtype == SPORA_DTYPE_F32 && m.shape.rank == 4 && m.shape.numel() > 0 && m.shape[1] % 16 == 0;
}

void add_port(Node& n, const char* name, int64_t port) {
  std::vector<int64_t> ports = ints_or(n, name, {});
  if (std::find(ports.begin(), ports.end(), port) != ports.end()) return;
  ports.push_back(port);
  std::sort(ports.begin(), ports.end());
  n.attrs.set(name, AttrValue::of_ints(ports));
}

bool blocked_handoff(Graph& g, const PassContext& ctx) {
  const Target& target = ctx.target_in_use();
  const int32_t n = static_cast<int32_t>(g.nodes().size());
  // Readers of each value: (node, input slot).
  std::vector<std::vector<std::vector<std::pair<int32_t, size_t>>>> readers(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) readers[static_cast<size_t>(id)].resize(g.node(id).outputs.size());
  for (int32_t id = 0; id < n; ++id) {
    const Node& node = g.node(id);
    for (size_t j = 0; j < node.inputs.size(); ++j)
      readers[static_cast<size_t>(node.inputs[j].node)][static_cast<size_t>(node.inputs[j].index)].push_back({id, j});
  }
  std::vector<Value> marked;
  for (int32_t id = 0; id < n; ++id) {
    const Node& p = g.node(id);
    for (int32_t i = 0; i < static_cast<int32_t>(p.outputs.size()); ++i) {
      const Value v{id, i};
      const auto& rs = readers[static_cast<size_t>(id)][static_cast<size_t>(i)];
      if (!may_write(p, i) || rs.empty() || !blockable(p.outputs[static_cast<size_t>(i)]) || !kernel_runs(g, p))
        continue;
      if (std::find(g.outputs().begin(), g.outputs().end(), v) != g.outputs().end()) continue;
      const bool all = std::all_of(rs.begin(), rs.end(), [&](const std::pair<int32_t, size_t>& r) {
        const Node& u = g.node(r.first);
        return may_read(p, i, u, r.second) && u.device == p.device && kernel_runs(g, u);
      });
      if (all && target_blocks(target, p, i)) marked.push_back(v);
    }
  }
  for (const Value& v : marked) {
    add_port(g.mutable_node(v.node), "blocked_outputs", v.index);
    for (const auto& [reader, slot] : readers[static_cast<size_t>(v.node)][static_cast<size_t>(v.index)])
      add_port(g.mutable_node(reader), "blocked_inputs", static_cast<int64_t>(slot));
  }
  return !marked.empty();
}

}  // namespace

SPORA_PASS("blocked_handoff", 1, blocked_handoff, {"shape_inference"});

}  // namespace spora::passes
