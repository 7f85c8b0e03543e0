// Conv-pool fusion, the layout-selection step issue 19 asks for: a
// conv2d_act whose result a max_pool2d reads becomes one conv2d_act_pool
// (ops/conv_pool.cpp), so a plugin can keep the activation in the layout its
// convolution writes (oneDNN's blocked or channels-last layouts) for the
// pooling and reorder only the op's results to the NCHW every tensor has.
//
//   y = max_pool2d(a), a = conv2d_act(x, w, b)  ->  y[, a] = conv2d_act_pool(x, w, b)
//
// When a has readers besides the pooling (training graphs: max_pool2d_grad
// and the relu mask read it) or is a graph output, the fused op keeps it as
// a second output (keep_activation). Whether either form pays is the
// target's answer (Target::fuses_conv_pool): the pass knows no device, and a
// device without a kernel for the fused op runs its decomposition, the two
// ops it came from. With several poolings of one activation the first is
// fused and the others read the kept activation.
//
// epilogue_fusion runs first (pipeline.cpp): it makes the conv2d_act this
// pass starts from. Results are the unfused ops' where the kernel runs the
// same primitives (oneDNN picks its implementation per layout, so f32 agrees
// to the convolution's rounding, see docs/cpu-layouts.md).
#include <vector>

#include "ir/rewrite.h"
#include "passes/pass.h"
#include "passes/target.h"

namespace spora::passes {
namespace {

using ir::Graph;
using ir::Node;
using ir::Value;

struct Fusion {
  int32_t conv = -1, pool = -1;
  bool keep = false;
};

bool conv_pool_fusion(Graph& g, const PassContext& ctx) {
  const Target& target = ctx.target_in_use();
  const auto& nodes = g.nodes();
  const size_t n = nodes.size();
  std::vector<std::vector<int32_t>> users(n);  // readers of output 0, one entry per input slot
  for (size_t id = 0; id < n; ++id)
    for (const Value& v : nodes[id].inputs)
      if (v.index == 0) users[static_cast<size_t>(v.node)].push_back(static_cast<int32_t>(id));
  std::vector<bool> is_output(n, false);
  for (const Value& v : g.outputs()) is_output[static_cast<size_t>(v.node)] = true;

  std::vector<Fusion> fusions;
  std::vector<int32_t> conv_of(n, -1), pool_of(n, -1);  // node -> fusion index
  for (size_t id = 0; id < n; ++id) {
    const Node& c = nodes[id];
    if (!is_apply(c, "conv2d_act")) continue;
    Fusion f;
    f.conv = static_cast<int32_t>(id);
    for (int32_t u : users[id]) {
      const Node& un = nodes[static_cast<size_t>(u)];
      if (f.pool < 0 && is_apply(un, "max_pool2d") && un.inputs[0] == Value{f.conv, 0} && un.device == c.device) {
        f.pool = u;
      } else {
        f.keep = true;
      }
    }
    if (f.pool < 0) continue;
    f.keep = f.keep || is_output[id];
    if (!target.fuses_conv_pool(c.outputs[0].dtype, f.keep)) continue;
    conv_of[id] = pool_of[static_cast<size_t>(f.pool)] = static_cast<int32_t>(fusions.size());
    fusions.push_back(f);
  }
  if (fusions.empty()) return false;

  ir::Rewriter rw(g);
  for (size_t id = 0; id < n; ++id) {
    if (pool_of[id] >= 0) continue;  // mapped when its convolution was replaced
    const int32_t k = conv_of[id];
    if (k < 0) {
      rw.copy(static_cast<int32_t>(id));
      continue;
    }
    // The fused node goes where the convolution was: its inputs are the
    // convolution's, and every reader of either result comes later.
    const Fusion& f = fusions[static_cast<size_t>(k)];
    const Node& c = nodes[static_cast<size_t>(f.conv)];
    const Node& p = nodes[static_cast<size_t>(f.pool)];
    Attrs attrs = c.attrs;
    for (const auto& [name, v] : p.attrs.items())
      if (name != kStrategyAttr && name != kRecomputeAttr) attrs.set("pool_" + name, v);
    attrs.set("keep_activation", AttrValue::of_bool(f.keep));
    std::vector<Value> in;
    for (const Value& v : c.inputs) in.push_back(rw.map(v));
    const std::vector<Value> out = rw.out().add_op("conv2d_act_pool", in, attrs, c.loc);
    Node& fn = rw.out().mutable_node(out[0].node);
    fn.device = c.device;
    fn.name = c.name;
    rw.set({f.pool, 0}, out[0]);
    if (f.keep) rw.set({f.conv, 0}, out[1]);
  }
  g = rw.finish();
  return true;
}

}  // namespace

SPORA_PASS("conv_pool_fusion", 1, conv_pool_fusion, {"shape_inference"});

}  // namespace spora::passes
