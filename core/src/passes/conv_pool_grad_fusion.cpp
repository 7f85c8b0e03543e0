// Conv-pool gradient fusion, the backward half of issue 19's layout
// selection: the gradient ops autodiff writes for a convolution with a relu
// (or no activation) and a max pooling become one conv2d_act_pool_grad
// (ops/conv_pool_grad.cpp), so a plugin can build the activation's gradient
// once in the layout its backward convolutions read and give both the same
// copy (the cpu plugin: plugins/cpu/onednn_conv_pool_grad.cpp).
//
//   p  = max_pool2d_grad(a, dy)
//   g  = where(greater(a, 0), p, 0)        (relu; absent: g = p)
//   dw = conv2d_grad_weight(x, g)
//   db = sum(g, axes [0, 2, 3])            (optional)
//   dx = conv2d_grad_input(g, w)           (optional)
//     ->  dw, db[, dx] = conv2d_act_pool_grad(x, w, a, dy)
//
// Only when g, p (and the mask, unless something else reads it) have no
// other readers and are no graph outputs, and the two convolution
// gradients agree on their attributes. Without conv2d_grad_input (a first
// layer) w is the weight of the convolution that made a, which the op
// needs for its shape only. Whether it pays is the target's answer
// (Target::fuses_conv_pool_grad). Runs after conv_pool_fusion and before
// elementwise_fusion, which would take the mask's greater/where.
//
// Whether the kept activation a then passes between the two kernels in the
// plugin's blocked layout is blocked_handoff's decision (blocked_handoff.cpp).
#include <algorithm>
#include <cstring>
#include <vector>

#include "ir/rewrite.h"
#include "passes/pass.h"
#include "passes/target.h"

namespace spora::passes {
namespace {

using ir::Graph;
using ir::Node;
using ir::NodeKind;
using ir::Value;

constexpr const char* kConvAttrs[] = {"stride", "padding", "pad_mode", "dilation", "groups"};

// A scalar constant +0 (all bytes zero) of a float dtype.
bool is_zero(const Graph& g, Value v) {
  const Node& n = g.node(v.node);
  if (n.kind != NodeKind::kConstant || !n.data || n.outputs.empty() || n.outputs[0].shape.numel() != 1) return false;
  return std::all_of(n.data->begin(), n.data->end(), [](uint8_t b) { return b == 0; });
}

bool same_conv_attrs(const Node& a, const Node& b) {
  for (const char* name : kConvAttrs) {
    const AttrValue *x = a.attrs.find(name), *y = b.attrs.find(name);
    if (!x || !y || !(*x == *y)) return false;
  }
  return true;
}

struct Fusion {
  int32_t pool = -1, mask = -1, where = -1, weight = -1, input = -1, sum = -1;
  Value x, w, a, dy;
  int32_t at = 0;  // the fused node goes before this node (n: at the end)
};

bool conv_pool_grad_fusion(Graph& g, const PassContext& ctx) {
  const Target& target = ctx.target_in_use();
  const auto& nodes = g.nodes();
  const int32_t n = static_cast<int32_t>(nodes.size());
  std::vector<std::vector<int32_t>> users(static_cast<size_t>(n));  // readers of output 0, one per input slot
  for (int32_t id = 0; id < n; ++id)
    for (const Value& v : nodes[static_cast<size_t>(id)].inputs)
      if (v.index == 0) users[static_cast<size_t>(v.node)].push_back(id);
  std::vector<bool> is_output(static_cast<size_t>(n), false);
  for (const Value& v : g.outputs()) is_output[static_cast<size_t>(v.node)] = true;
  auto node = [&](int32_t id) -> const Node& { return nodes[static_cast<size_t>(id)]; };
  auto readers = [&](int32_t id) -> const std::vector<int32_t>& { return users[static_cast<size_t>(id)]; };
  // Read exactly once, by `by`, and not a graph output.
  auto only_read_by = [&](int32_t id, int32_t by) {
    return !is_output[static_cast<size_t>(id)] && readers(id).size() == 1 && readers(id)[0] == by;
  };

  std::vector<Fusion> fusions;
  std::vector<bool> removed(static_cast<size_t>(n), false);
  for (int32_t id = 0; id < n; ++id) {
    const Node& p = node(id);
    if (!is_apply(p, "max_pool2d_grad") || removed[static_cast<size_t>(id)]) continue;
    Fusion f;
    f.pool = id;
    f.a = p.inputs[0];
    f.dy = p.inputs[1];
    int32_t gid = id;
    // The relu mask: where(greater(a, 0), p, 0), p read only there.
    if (readers(id).size() == 1 && is_apply(node(readers(id)[0]), "where")) {
      const int32_t wid = readers(id)[0];
      const Node& wn = node(wid);
      const Value m = wn.inputs[0];
      if (wn.inputs[1] == Value{id, 0} && is_zero(g, wn.inputs[2]) && m.index == 0 &&
          is_apply(node(m.node), "greater") && node(m.node).inputs[0] == f.a && is_zero(g, node(m.node).inputs[1]) &&
          !is_output[static_cast<size_t>(id)]) {
        f.where = wid;
        gid = wid;
        if (only_read_by(m.node, wid)) f.mask = m.node;
      }
    }
    if (is_output[static_cast<size_t>(gid)]) continue;
    bool ok = true;
    for (int32_t u : readers(gid)) {
      const Node& un = node(u);
      if (is_apply(un, "conv2d_grad_weight") && f.weight < 0 && un.inputs[1] == Value{gid, 0} &&
          un.inputs[0] != Value{gid, 0}) {
        f.weight = u;
      } else if (is_apply(un, "conv2d_grad_input") && f.input < 0 && un.inputs[0] == Value{gid, 0} &&
                 un.inputs[1] != Value{gid, 0}) {
        f.input = u;
      } else if (is_apply(un, "sum") && f.sum < 0 && un.attrs.get_ints("axes") == std::vector<int64_t>{0, 2, 3} &&
                 !un.attrs.get_bool("keepdims")) {
        f.sum = u;
      } else {
        ok = false;
      }
    }
    if (!ok || f.weight < 0) continue;
    const Node& gw = node(f.weight);
    f.x = gw.inputs[0];
    if (f.input >= 0) {
      if (!same_conv_attrs(gw, node(f.input))) continue;
      f.w = node(f.input).inputs[1];
    } else {
      // The first layer: the weight of the convolution that made a.
      const Node& conv = node(f.a.node);
      if (conv.kind != NodeKind::kApply || conv.inputs.size() < 2 ||
          (conv.op->name != "conv2d_act_pool" && conv.op->name != "conv2d_act"))
        continue;
      f.w = conv.inputs[1];
    }
    Shape weight_shape;
    for (int64_t d : gw.attrs.get_ints("weight_shape")) weight_shape.push_back(d);
    if (g.meta(f.w).shape != weight_shape) continue;
    const DType dtype = g.meta(f.a).dtype;
    bool same_device = true;
    for (int32_t part : {f.pool, f.where, f.mask, f.weight, f.input, f.sum})
      if (part >= 0 && node(part).device != p.device) same_device = false;
    if (!same_device || !target.fuses_conv_pool_grad(dtype)) continue;
    // Placement: before the first reader of a result (the end when the
    // results are only graph outputs), after its inputs.
    f.at = n;
    for (int32_t part : {f.weight, f.input, f.sum})
      if (part >= 0)
        for (int32_t u : readers(part)) f.at = std::min(f.at, u);
    int32_t last_input = 0;
    bool own_input = false;  // an input made by one of the replaced ops
    for (const Value& v : {f.x, f.w, f.a, f.dy}) {
      last_input = std::max(last_input, v.node);
      for (int32_t part : {f.pool, f.where, f.mask, f.weight, f.input, f.sum}) own_input |= v.node == part;
    }
    if (last_input >= f.at || own_input) continue;
    for (int32_t part : {f.pool, f.where, f.mask, f.weight, f.input, f.sum})
      if (part >= 0) removed[static_cast<size_t>(part)] = true;
    fusions.push_back(f);
  }
  if (fusions.empty()) return false;

  ir::Rewriter rw(g);
  auto emit = [&](const Fusion& f) {
    const Node& gw = node(f.weight);
    const Node& p = node(f.pool);
    Attrs attrs;
    for (const char* name : kConvAttrs) attrs.set(name, *gw.attrs.find(name));
    for (const auto& [name, v] : p.attrs.items())
      if (name != kStrategyAttr && name != kRecomputeAttr) attrs.set("pool_" + name, v);
    attrs.set("activation", AttrValue::of_string(f.where >= 0 ? "relu" : "none"));
    attrs.set("input_grad", AttrValue::of_bool(f.input >= 0));
    const std::vector<Value> out =
        rw.out().add_op("conv2d_act_pool_grad", {rw.map(f.x), rw.map(f.w), rw.map(f.a), rw.map(f.dy)}, attrs, gw.loc);
    Node& fn = rw.out().mutable_node(out[0].node);
    fn.device = p.device;
    fn.name = gw.name;
    rw.set({f.weight, 0}, out[0]);
    if (f.sum >= 0) rw.set({f.sum, 0}, out[1]);
    if (f.input >= 0) rw.set({f.input, 0}, out[2]);
  };
  for (int32_t id = 0; id <= n; ++id) {
    for (const Fusion& f : fusions)
      if (f.at == id) emit(f);
    if (id < n && !removed[static_cast<size_t>(id)]) rw.copy(id);
  }
  g = rw.finish();
  return true;
}

}  // namespace

SPORA_PASS("conv_pool_grad_fusion", 1, conv_pool_grad_fusion, {"shape_inference"});

}  // namespace spora::passes
