// The vjp of a formula (vjp.h), which autodiff provides to the rules in op
// family files (rules::vjp_of, ops/rule_helpers.h).
#include "autodiff/vjp.h"

#include <cstring>

#include "autodiff/grad.h"
#include "ops/rule_helpers.h"
#include "support/error.h"

namespace spora::autodiff {

using V = std::vector<Value>;

namespace {

// True if constant node `n` holds only 1s (floats only; enough for the seed
// of value_and_grad).
bool all_ones(const ir::Node& n) {
  const TensorMeta& m = n.outputs[0];
  const int64_t count = m.shape.numel();
  if (count == 0 || !n.data) return false;
  const uint8_t* p = n.data->data();
  for (int64_t i = 0; i < count; ++i) {
    switch (m.dtype) {
      case SPORA_DTYPE_F32: { float f; std::memcpy(&f, p + 4 * i, 4); if (f != 1.0f) return false; break; }
      case SPORA_DTYPE_F64: { double d; std::memcpy(&d, p + 8 * i, 8); if (d != 1.0) return false; break; }
      case SPORA_DTYPE_F16: { uint16_t h; std::memcpy(&h, p + 2 * i, 2); if (h != 0x3c00u) return false; break; }
      case SPORA_DTYPE_BF16: { uint16_t h; std::memcpy(&h, p + 2 * i, 2); if (h != 0x3f80u) return false; break; }
      default: return false;
    }
  }
  return true;
}

}  // namespace

V vjp_of(GradBuilder& b, const ir::Node& node, const V& xs, const V& ys, const V& gs, const BuildFn& build) {
  const std::string& name = node.op ? node.op->name : std::string("op");
  ir::Graph scratch(name + "_vjp");
  V sx, sg(gs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    const TensorMeta& m = b.meta(xs[i]);
    sx.push_back(scratch.add_input("x" + std::to_string(i), m.dtype, m.shape));
  }
  for (size_t j = 0; j < gs.size(); ++j) {
    if (!gs[j].valid()) continue;
    const TensorMeta& m = b.meta(gs[j]);
    sg[j] = scratch.add_input("g" + std::to_string(j), m.dtype, m.shape);
  }
  GradBuilder sb(scratch, node.loc);
  const V outs = build(sb, sx);
  if (outs.size() != gs.size())
    fail(Code::kInternal, "[{}] the decomposition has {} outputs, the op {}", name, outs.size(), gs.size());
  Value loss;
  for (size_t j = 0; j < gs.size(); ++j) {
    if (!sg[j].valid() || !dtype_is_float(sb.meta(outs[j]).dtype)) continue;
    Value term = sb.op("sum", {sb.op("mul", {outs[j], sg[j]})});
    if (loss.valid() && sb.meta(term).dtype != sb.meta(loss).dtype) {
      Attrs a;
      a.set("dtype", AttrValue::of_string(dtype_name(sb.meta(loss).dtype)));
      term = sb.op("cast", {term}, a);
    }
    loss = loss.valid() ? sb.op("add", {loss, term}) : term;
  }
  V result(xs.size());
  if (!loss.valid()) return result;
  scratch.set_outputs({loss});
  std::vector<int32_t> wrt;
  std::vector<size_t> which;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!dtype_is_float(b.meta(xs[i]).dtype)) continue;
    wrt.push_back(sx[i].node);
    which.push_back(i);
  }
  if (wrt.empty()) return result;
  const ir::Graph gg = value_and_grad(scratch, wrt, 0);
  const auto& nodes = gg.nodes();
  const size_t n = nodes.size();

  // The seed of L and its broadcasts are all 1s: mul(ones, g) where g
  // already has the product's type is g itself. Without this every vjp
  // would carry a multiply by a broadcast 1.
  std::vector<bool> ones(n, false);
  std::vector<Value> alias(n);  // node id -> the value it stands for
  for (size_t id = 0; id < n; ++id) {
    const ir::Node& nd = nodes[id];
    if (nd.kind == ir::NodeKind::kConstant) {
      ones[id] = all_ones(nd);
    } else if (nd.kind == ir::NodeKind::kApply) {
      const std::string& op = nd.op->name;
      if ((op == "broadcast_to" || op == "reshape") && ones[static_cast<size_t>(nd.inputs[0].node)]) {
        ones[id] = true;
      } else if (op == "mul") {
        for (int k = 0; k < 2; ++k) {
          const Value one = nd.inputs[static_cast<size_t>(k)], other = nd.inputs[static_cast<size_t>(1 - k)];
          const TensorMeta& om = gg.meta(other);
          if (ones[static_cast<size_t>(one.node)] && om.dtype == nd.outputs[0].dtype && om.shape == nd.outputs[0].shape) {
            alias[id] = other;
            break;
          }
        }
      }
    }
  }
  auto resolve = [&](Value v) {
    while (alias[static_cast<size_t>(v.node)].valid()) v = alias[static_cast<size_t>(v.node)];
    return v;
  };
  // Outputs of the decomposition that b's graph already has.
  std::vector<V> copied(n);
  for (size_t j = 0; j < ys.size() && j < outs.size(); ++j)
    if (ys[j].valid() && outs[j].index == 0 && nodes[static_cast<size_t>(outs[j].node)].outputs.size() == 1)
      copied[static_cast<size_t>(outs[j].node)] = {ys[j]};

  // An input the loss does not reach through differentiable ops gets
  // value_and_grad's dense zeros: no gradient flows there (invalid), rather
  // than a constant as large as the input.
  auto is_zeros = [&](Value v) {
    const ir::Node& nd = nodes[static_cast<size_t>(v.node)];
    if (nd.kind != ir::NodeKind::kConstant || !nd.data) return false;
    for (uint8_t byte : *nd.data)
      if (byte != 0) return false;
    return true;
  };
  std::vector<bool> need(n, false);
  for (size_t o = 1; o < gg.outputs().size(); ++o) {
    const Value r = resolve(gg.outputs()[o]);
    if (!is_zeros(r)) need[static_cast<size_t>(r.node)] = true;
  }
  for (size_t id = n; id-- > 0;) {
    if (!need[id] || !copied[id].empty()) continue;
    for (const Value& v : nodes[id].inputs) need[static_cast<size_t>(resolve(v).node)] = true;
  }
  for (size_t id = 0; id < n; ++id) {
    if (!need[id] || !copied[id].empty()) continue;
    const ir::Node& nd = nodes[id];
    switch (nd.kind) {
      case ir::NodeKind::kInput:
        for (size_t i = 0; i < sx.size(); ++i)
          if (sx[i].node == static_cast<int32_t>(id)) copied[id] = {xs[i]};
        for (size_t j = 0; j < sg.size(); ++j)
          if (sg[j].valid() && sg[j].node == static_cast<int32_t>(id)) copied[id] = {gs[j]};
        break;
      case ir::NodeKind::kConstant:
        copied[id] = {b.graph().add_constant(nd.outputs[0].dtype, nd.outputs[0].shape, *nd.data, node.loc)};
        break;
      case ir::NodeKind::kApply: {
        V in;
        for (const Value& v : nd.inputs) {
          const Value r = resolve(v);
          in.push_back(copied[static_cast<size_t>(r.node)].at(static_cast<size_t>(r.index)));
        }
        copied[id] = b.ops(nd.op->name.c_str(), in, nd.attrs);
        break;
      }
      default:
        fail(Code::kInternal, "[{}] unexpected {} node in a decomposition", name, ir::node_kind_name(nd.kind));
    }
  }
  for (size_t w = 0; w < which.size(); ++w) {
    const Value out = resolve(gg.outputs()[1 + w]);
    if (copied[static_cast<size_t>(out.node)].empty()) continue;  // no gradient flows (is_zeros)
    result[which[w]] = copied[static_cast<size_t>(out.node)].at(static_cast<size_t>(out.index));
  }
  return result;
}

namespace {
// Rules in op family files differentiate formulas through rules::vjp_of
// (ops/rule_helpers.h), which autodiff provides: set at load, as the
// runtime gives the passes their evaluator.
const int g_vjp_provided = rules::set_vjp(&vjp_of);
}  // namespace

}  // namespace spora::autodiff
