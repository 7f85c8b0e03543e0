// Algebraic simplification: identities that remove work without changing a
// single bit of the result -- x*1, x+0, x-0, x/1 (when the constant does not
// broadcast x to a larger shape or another dtype), neg(neg(x)), reshapes to
// the same shape or of reshapes, identity and composed transposes.
#include <cstring>

#include "ir/rewrite.h"
#include "passes/pass.h"

namespace spora::passes {
namespace {

// True if `v` is a constant whose every element equals `want`.
bool constant_equal(const ir::Graph& g, ir::Value v, double want) {
  const ir::Node& n = g.node(v.node);
  if (n.kind != ir::NodeKind::kConstant) return false;
  const TensorMeta& m = n.outputs[0];
  const int64_t count = m.shape.numel();
  if (count == 0) return false;
  const uint8_t* p = n.data->data();
  for (int64_t i = 0; i < count; ++i) {
    double x;
    switch (m.dtype) {
      case SPORA_DTYPE_F32: { float f; std::memcpy(&f, p + 4 * i, 4); x = f; break; }
      case SPORA_DTYPE_F64: std::memcpy(&x, p + 8 * i, 8); break;
      case SPORA_DTYPE_I32: { int32_t t; std::memcpy(&t, p + 4 * i, 4); x = t; break; }
      case SPORA_DTYPE_I64: { int64_t t; std::memcpy(&t, p + 8 * i, 8); x = static_cast<double>(t); break; }
      default: return false;  // 16-bit floats: not worth decoding here
    }
    if (x != want) return false;
  }
  return true;
}

// `keep` may replace node `n` only if the result keeps its dtype and shape.
bool same_type(const ir::Graph& g, ir::Value keep, const ir::Node& n) {
  const TensorMeta& a = g.meta(keep);
  return a.dtype == n.outputs[0].dtype && a.shape == n.outputs[0].shape;
}

// The replacement for node `n` (a value of the source graph), or invalid.
ir::Value simplify(const ir::Graph& g, const ir::Node& n) {
  if (n.kind != ir::NodeKind::kApply || n.outputs.size() != 1) return {};
  const std::string& op = n.op->name;
  auto in = [&](size_t i) { return n.inputs[i]; };
  if (op == "mul") {
    if (constant_equal(g, in(1), 1) && same_type(g, in(0), n)) return in(0);
    if (constant_equal(g, in(0), 1) && same_type(g, in(1), n)) return in(1);
  } else if (op == "add") {
    if (constant_equal(g, in(1), 0) && same_type(g, in(0), n)) return in(0);
    if (constant_equal(g, in(0), 0) && same_type(g, in(1), n)) return in(1);
  } else if (op == "sub") {
    if (constant_equal(g, in(1), 0) && same_type(g, in(0), n)) return in(0);
  } else if (op == "div") {
    if (constant_equal(g, in(1), 1) && same_type(g, in(0), n)) return in(0);
  } else if (op == "neg") {
    const ir::Node& p = g.node(in(0).node);
    if (p.kind == ir::NodeKind::kApply && p.op->name == "neg") return p.inputs[0];
  } else if (op == "reshape" || op == "transpose") {
    if (same_type(g, in(0), n)) {
      if (op == "reshape") return in(0);
      const auto& perm = n.attrs.get_ints("perm");
      bool identity = true;
      for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == static_cast<int64_t>(i);
      if (identity) return in(0);
    }
  }
  return {};
}

bool simplify_graph(ir::Graph& g, const PassContext&) {
  ir::Rewriter rw(g);
  bool changed = false;
  for (size_t id = 0; id < g.nodes().size(); ++id) {
    const ir::Node& n = g.nodes()[id];
    const ir::Value r = simplify(g, n);
    if (r.valid()) {
      rw.set({static_cast<int32_t>(id), 0}, rw.map(r));
      changed = true;
      continue;
    }
    // reshape(reshape(x)) -> reshape(x); transpose(transpose(x)) -> one transpose.
    if (n.kind == ir::NodeKind::kApply && (n.op->name == "reshape" || n.op->name == "transpose")) {
      const ir::Node& p = g.node(n.inputs[0].node);
      if (p.kind == ir::NodeKind::kApply && p.op == n.op) {
        ir::Node merged = n;
        merged.inputs = {rw.map(p.inputs[0])};
        if (n.op->name == "transpose") {
          const auto &outer = n.attrs.get_ints("perm"), &inner = p.attrs.get_ints("perm");
          std::vector<int64_t> perm;
          for (int64_t o : outer) perm.push_back(inner[static_cast<size_t>(o)]);
          merged.attrs.set("perm", AttrValue::of_ints(perm));
        }
        const int32_t nid = rw.out().append(std::move(merged));
        rw.set({static_cast<int32_t>(id), 0}, {nid, 0});
        changed = true;
        continue;
      }
    }
    rw.copy(static_cast<int32_t>(id));
  }
  if (changed) g = rw.finish();
  return changed;
}

}  // namespace
SPORA_PASS("algebraic_simplify", 1, simplify_graph, {"shape_inference"});
}  // namespace spora::passes
