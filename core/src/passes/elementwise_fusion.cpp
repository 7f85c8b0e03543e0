// Elementwise fusion: a maximal tree (or DAG) of elementwise ops whose
// intermediate values nobody else reads becomes one fused_elementwise node
// (ops/fused.h), which a plugin with a kernel for it runs in one pass over
// memory and every other device runs as its decomposition.
//
// A group grows from a root (the last op, whose float result leaves the
// group) up through the producers of its operands. A producer joins when it
// is an elementwise op (ops/fused.h's list), all of its readers are already
// in the group, it is not a graph output, its result has the root's shape
// (so nothing is recomputed per element of a broadcast) and its float
// operands have the root's dtype (bool values may flow inside). Producers
// are visited in decreasing node order, so by the time one is considered
// every reader it could have in the group has been decided. Scalar float
// constants become c: literals; a group keeps at most 16 distinct inputs.
// Groups of two or more ops are replaced (the fused node takes the root's
// source location); constants only the group read are dropped. An op the
// target runs faster alone (Target::runs_faster_alone: its own kernel is
// vectorised where a fused block would call a scalar function) is left
// out; the pass knows no device, the context's target answers.
// epilogue_fusion runs first (pipeline.cpp), so a linear/conv's bias and
// activation go to its post-ops, not here.
//
// Level 2: unlike the level-1 passes, fusion can change low bits -- f16 and
// bf16 intermediates stay f32 inside the fused kernel, and the cpu kernel's
// vectorised exp/tanh differ from libm's by an ulp -- and a compiled graph
// needs a kernel for fused_elementwise on its device (only eager dispatch
// falls back to the decomposition today).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <queue>
#include <set>

#include "ir/rewrite.h"
#include "ops/fused.h"
#include "passes/pass.h"
#include "passes/target.h"

namespace spora::passes {
namespace {

bool is_float(DType t) {
  return t == SPORA_DTYPE_F32 || t == SPORA_DTYPE_F64 || t == SPORA_DTYPE_F16 || t == SPORA_DTYPE_BF16;
}

// The double a one-element float constant holds, exactly.
bool scalar_constant(const ir::Graph& g, ir::Value v, DType T, double* out) {
  const ir::Node& n = g.node(v.node);
  if (n.kind != ir::NodeKind::kConstant || !n.data) return false;
  const TensorMeta& m = n.outputs[0];
  if (m.dtype != T || m.shape.numel() != 1) return false;
  const uint8_t* p = n.data->data();
  switch (T) {
    case SPORA_DTYPE_F32: { float f; std::memcpy(&f, p, 4); *out = f; return true; }
    case SPORA_DTYPE_F64: std::memcpy(out, p, 8); return true;
    case SPORA_DTYPE_F16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      const int e = (h >> 10) & 0x1f, mant = h & 0x3ff;
      double v = e == 0 ? std::ldexp(mant, -24) : e == 31 ? (mant ? NAN : HUGE_VAL) : std::ldexp(mant | 0x400, e - 25);
      *out = (h & 0x8000) ? -v : v;
      return true;
    }
    case SPORA_DTYPE_BF16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      const uint32_t bits = static_cast<uint32_t>(h) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      *out = f;
      return true;
    }
    default: return false;
  }
}

// An op node a program can express, computing in dtype T (or bool), that
// the target does not run better on its own.
bool fusible(const ir::Graph& g, const ir::Node& n, DType T, const Target& target) {
  if (n.kind != ir::NodeKind::kApply || n.outputs.size() != 1 || !fused::allowed_op(n.op->name)) return false;
  if (target.runs_faster_alone(*n.op, n.attrs)) return false;
  const DType out = n.outputs[0].dtype;
  if (out != T && out != SPORA_DTYPE_BOOL) return false;
  for (const ir::Value& v : n.inputs) {
    const DType d = g.meta(v).dtype;
    if (d != T && d != SPORA_DTYPE_BOOL) return false;
  }
  return true;
}

struct Group {
  std::vector<int32_t> members;  // increasing node ids; the last is the root
  // A one-element constant kept as an input rather than a literal: literals
  // are rank 0, and when every other input has a lower rank than the root
  // (x of shape (4) + a constant of shape (1,1)) it carries the rank.
  int32_t carrier = -1;
};

std::vector<Group> find_groups(const ir::Graph& g, const Target& target) {
  const auto& nodes = g.nodes();
  const size_t n = nodes.size();
  std::vector<std::vector<int32_t>> readers(n);
  for (size_t id = 0; id < n; ++id)
    for (const ir::Value& v : nodes[id].inputs) readers[static_cast<size_t>(v.node)].push_back(static_cast<int32_t>(id));
  std::vector<bool> is_output(n, false);
  for (const ir::Value& v : g.outputs()) is_output[static_cast<size_t>(v.node)] = true;

  std::vector<int32_t> group_of(n, -1);
  std::vector<Group> groups;
  for (size_t r = n; r-- > 0;) {
    const ir::Node& root = nodes[r];
    if (group_of[r] >= 0 || root.kind != ir::NodeKind::kApply || root.outputs.size() != 1) continue;
    const DType T = root.outputs[0].dtype;
    if (!is_float(T) || !fusible(g, root, T, target)) continue;
    const Shape& shape = root.outputs[0].shape;
    const int32_t gid = static_cast<int32_t>(groups.size());
    std::vector<int32_t> members = {static_cast<int32_t>(r)};
    group_of[r] = gid;
    // Distinct values read from outside (literal constants aside).
    std::set<std::pair<int32_t, int32_t>> ext;
    double c;
    auto add_operands = [&](const ir::Node& m) {
      for (const ir::Value& v : m.inputs)
        if (group_of[static_cast<size_t>(v.node)] != gid && !scalar_constant(g, v, T, &c)) ext.insert({v.node, v.index});
    };
    add_operands(root);
    std::priority_queue<int32_t> frontier;
    for (const ir::Value& v : root.inputs) frontier.push(v.node);
    int32_t last_seen = -1;
    while (!frontier.empty()) {
      const int32_t p = frontier.top();
      frontier.pop();
      if (p == last_seen) continue;  // pushed more than once
      last_seen = p;
      const ir::Node& pn = nodes[static_cast<size_t>(p)];
      if (group_of[static_cast<size_t>(p)] >= 0 || is_output[static_cast<size_t>(p)]) continue;
      if (!fusible(g, pn, T, target) || pn.outputs[0].shape != shape || pn.device != root.device) continue;
      bool all_in = true;
      for (int32_t rd : readers[static_cast<size_t>(p)]) all_in = all_in && group_of[static_cast<size_t>(rd)] == gid;
      if (!all_in) continue;
      if (static_cast<int>(members.size()) >= fused::kMaxInstructions) break;
      // The inputs the group would read with p inside.
      std::set<std::pair<int32_t, int32_t>> next = ext;
      next.erase({p, 0});
      for (const ir::Value& v : pn.inputs)
        if (group_of[static_cast<size_t>(v.node)] != gid && !scalar_constant(g, v, T, &c)) next.insert({v.node, v.index});
      if (static_cast<int>(next.size()) > fused::kMaxInputs) continue;
      ext = std::move(next);
      group_of[static_cast<size_t>(p)] = gid;
      members.push_back(p);
      for (const ir::Value& v : pn.inputs) frontier.push(v.node);
    }
    int32_t carrier = -1;
    bool keep = members.size() >= 2;
    if (keep) {
      int32_t rank = 0;
      for (const auto& [node, index] : ext) rank = std::max(rank, g.meta({node, index}).shape.rank);
      if (rank < shape.rank) {
        for (int32_t m : members)
          for (const ir::Value& v : nodes[static_cast<size_t>(m)].inputs)
            if (scalar_constant(g, v, T, &c) && g.meta(v).shape.rank == shape.rank) carrier = v.node;
        keep = static_cast<int>(ext.size()) < fused::kMaxInputs;  // else no room for it: leave the group unfused
      }
    }
    if (!keep) {
      for (int32_t m : members) group_of[static_cast<size_t>(m)] = -1;
      continue;
    }
    std::sort(members.begin(), members.end());
    groups.push_back({std::move(members), carrier});
  }
  return groups;
}

// The program and the inputs (values of g) of one group.
std::string program_of(const ir::Graph& g, const Group& grp, std::vector<ir::Value>* inputs) {
  const DType T = g.node(grp.members.back()).outputs[0].dtype;
  fused::Program prog;
  std::vector<std::pair<int32_t, int>> temp;  // member node id -> instruction
  for (int32_t id : grp.members) {
    const ir::Node& n = g.node(id);
    fused::Instr ins;
    ins.op = n.op;
    ins.attrs = n.attrs;
    for (const ir::Value& v : n.inputs) {
      fused::Operand o;
      auto t = std::find_if(temp.begin(), temp.end(), [&](const auto& e) { return e.first == v.node; });
      double c;
      if (t != temp.end()) {
        o.kind = fused::Operand::kTemp;
        o.index = t->second;
      } else if (v.node != grp.carrier && scalar_constant(g, v, T, &c)) {
        o.kind = fused::Operand::kConst;
        o.value = c;
      } else {
        o.kind = fused::Operand::kInput;
        auto it = std::find(inputs->begin(), inputs->end(), v);
        o.index = static_cast<int>(it - inputs->begin());
        if (it == inputs->end()) inputs->push_back(v);
      }
      ins.args.push_back(o);
    }
    temp.push_back({id, static_cast<int>(prog.instrs.size())});
    prog.instrs.push_back(std::move(ins));
  }
  return fused::format(prog);
}

// Drops constant nodes nothing reads any more.
void drop_unread_constants(ir::Graph& g) {
  const auto& nodes = g.nodes();
  std::vector<bool> read(nodes.size(), false);
  for (const auto& n : nodes)
    for (const ir::Value& v : n.inputs) read[static_cast<size_t>(v.node)] = true;
  for (const ir::Value& v : g.outputs()) read[static_cast<size_t>(v.node)] = true;
  bool any = false;
  for (size_t id = 0; id < nodes.size(); ++id) any = any || (nodes[id].kind == ir::NodeKind::kConstant && !read[id]);
  if (!any) return;
  ir::Rewriter rw(g);
  for (size_t id = 0; id < nodes.size(); ++id)
    if (nodes[id].kind != ir::NodeKind::kConstant || read[id]) rw.copy(static_cast<int32_t>(id));
  g = rw.finish();
}

bool elementwise_fusion(ir::Graph& g, const PassContext& ctx) {
  const std::vector<Group> groups = find_groups(g, ctx.target_in_use());
  if (groups.empty()) return false;
  std::vector<int32_t> root_of(g.nodes().size(), -1);  // member -> group index
  for (size_t k = 0; k < groups.size(); ++k)
    for (int32_t id : groups[k].members) root_of[static_cast<size_t>(id)] = static_cast<int32_t>(k);
  ir::Rewriter rw(g);
  for (size_t id = 0; id < g.nodes().size(); ++id) {
    const int32_t k = root_of[id];
    if (k < 0) {
      rw.copy(static_cast<int32_t>(id));
      continue;
    }
    const Group& grp = groups[static_cast<size_t>(k)];
    if (grp.members.back() != static_cast<int32_t>(id)) continue;  // read only inside the group
    std::vector<ir::Value> inputs;
    Attrs attrs;
    attrs.set("program", AttrValue::of_string(program_of(g, grp, &inputs)));
    for (ir::Value& v : inputs) v = rw.map(v);
    const ir::Node& root = g.node(static_cast<int32_t>(id));
    const ir::Value fusedv = rw.out().add_op(fused::kOpName, inputs, attrs, root.loc)[0];
    rw.out().mutable_node(fusedv.node).device = root.device;
    rw.set({static_cast<int32_t>(id), 0}, fusedv);
  }
  g = rw.finish();
  drop_unread_constants(g);
  return true;
}

}  // namespace
SPORA_PASS("elementwise_fusion", 2, elementwise_fusion, {"shape_inference"});
}  // namespace spora::passes
