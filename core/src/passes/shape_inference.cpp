// Shape/type inference pass (see shape_inference.h). Registered first at O1:
// on a graph whose recorded types are current it changes nothing, and every
// later pass may rely on the types it sees.
#include "passes/shape_inference.h"

#include <memory>

#include "passes/pass.h"
#include "support/error.h"

namespace spora::passes {
namespace {

bool same(const TensorMeta& a, const TensorMeta& b) { return a.dtype == b.dtype && a.shape == b.shape; }
std::string type_str(const TensorMeta& m) { return std::string(dtype_name(m.dtype)) + " " + m.shape.str(); }

// A node without a location of its own (a sub-graph built without one)
// reports the location of the control-flow node that holds it.
const ir::SourceLoc& loc_of(const ir::Node& n, const ir::SourceLoc& outer) { return n.loc.empty() ? outer : n.loc; }

[[noreturn]] void cf_error(const char* tag, const std::string& msg, const ir::SourceLoc& loc) {
  fail(Code::kInvalidArgument, "{}", ir::with_loc(fmt::format("[{}] {}", tag, msg), loc));
}

bool infer(ir::Graph& g, const ir::SourceLoc& outer);

// The sub-graph with its inputs retyped to `args` and everything re-inferred;
// the original is shared with other graphs, so a changed one is a copy.
std::shared_ptr<ir::Graph> retyped(const std::shared_ptr<ir::Graph>& sub, const std::vector<TensorMeta>& args,
                                   const char* tag, const ir::SourceLoc& loc, bool* changed) {
  auto copy = std::make_shared<ir::Graph>(*sub);
  const std::vector<int32_t> ins = copy->inputs();
  if (ins.size() != args.size())
    cf_error(tag,
             fmt::format("sub-graph '{}' takes {} inputs, the node passes {}", sub->name(), ins.size(), args.size()),
             loc);
  bool any = false;
  for (size_t i = 0; i < ins.size(); ++i) {
    TensorMeta& m = copy->mutable_node(ins[i]).outputs[0];
    if (!same(m, args[i])) {
      m = args[i];
      any = true;
    }
  }
  any = infer(*copy, loc) || any;
  if (!any) return sub;
  *changed = true;
  return copy;
}

std::vector<TensorMeta> output_types(const ir::Graph& g) {
  std::vector<TensorMeta> out;
  for (const ir::Value& v : g.outputs()) out.push_back(g.meta(v));
  return out;
}

bool infer_if(ir::Graph& g, ir::Node& n, const ir::SourceLoc& loc) {
  std::vector<TensorMeta> args;
  if (n.inputs.empty()) cf_error("if", "has no condition", loc);
  for (size_t i = 1; i < n.inputs.size(); ++i) args.push_back(g.meta(n.inputs[i]));
  const TensorMeta& c = g.meta(n.inputs[0]);
  if (c.dtype != SPORA_DTYPE_BOOL || c.shape.numel() != 1)
    cf_error("if", "the condition must be a bool scalar, got " + type_str(c), loc);
  bool changed = false;
  for (auto& sub : n.subgraphs) sub = retyped(sub, args, "if", loc, &changed);
  const std::vector<TensorMeta> t = output_types(*n.subgraphs[0]), e = output_types(*n.subgraphs[1]);
  if (t.size() != e.size() || t.size() != n.outputs.size())
    cf_error("if",
             fmt::format("the branches return {} and {} values for {} outputs", t.size(), e.size(), n.outputs.size()),
             loc);
  for (size_t i = 0; i < t.size(); ++i) {
    if (!same(t[i], e[i]))
      cf_error(
          "if",
          fmt::format("output {} is {} in the then graph but {} in the else graph", i, type_str(t[i]), type_str(e[i])),
          loc);
    if (!same(n.outputs[i], t[i])) {
      n.outputs[i] = t[i];
      changed = true;
    }
  }
  return changed;
}

bool infer_while(ir::Graph& g, ir::Node& n, const ir::SourceLoc& loc) {
  std::vector<TensorMeta> args;
  for (const ir::Value& v : n.inputs) args.push_back(g.meta(v));
  bool changed = false;
  for (auto& sub : n.subgraphs) sub = retyped(sub, args, "while", loc, &changed);
  const std::vector<TensorMeta> c = output_types(*n.subgraphs[0]), b = output_types(*n.subgraphs[1]);
  if (c.size() != 1 || c[0].dtype != SPORA_DTYPE_BOOL || c[0].shape.numel() != 1)
    cf_error("while", "the cond graph must return one bool scalar", loc);
  if (b.size() != args.size() || n.outputs.size() != args.size())
    cf_error("while", fmt::format("the body returns {} values for {} loop-carried values", b.size(), args.size()), loc);
  for (size_t i = 0; i < args.size(); ++i) {
    // A loop whose body changes a carried value's type has no static type.
    if (!same(b[i], args[i]))
      cf_error("while",
               fmt::format("loop-carried value {} is {} but the body returns {} for it", i, type_str(args[i]),
                           type_str(b[i])),
               loc);
    if (!same(n.outputs[i], args[i])) {
      n.outputs[i] = args[i];
      changed = true;
    }
  }
  return changed;
}

bool infer_apply(const ir::Graph& g, ir::Node& n, const ir::SourceLoc& loc) {
  if (n.inputs.size() > static_cast<size_t>(kMaxOpInputs))
    fail(Code::kInvalidArgument, "{}", ir::with_loc("[" + n.op->name + "] too many inputs", loc));
  TensorMeta metas[kMaxOpInputs];
  for (size_t i = 0; i < n.inputs.size(); ++i) metas[i] = g.meta(n.inputs[i]);
  OpCall call;
  try {
    infer_call(*n.op, metas, static_cast<int>(n.inputs.size()), n.attrs, call);
  } catch (const Error& e) {
    throw Error(e.code(), ir::with_loc(e.what(), loc));
  }
  // Later nodes refer to outputs by index: their number cannot change.
  if (call.num_outputs != static_cast<int>(n.outputs.size()))
    fail(Code::kInvalidArgument, "{}",
         ir::with_loc(
             fmt::format("[{}] now has {} outputs, the graph uses {}", n.op->name, call.num_outputs, n.outputs.size()),
             loc));
  bool changed = false;
  for (int i = 0; i < call.num_outputs; ++i) {
    const TensorMeta now{call.out[i].dtype, call.result[i]};
    TensorMeta& old = n.outputs[static_cast<size_t>(i)];
    if (!same(old, now)) {
      old = now;
      changed = true;
    }
  }
  return changed;
}

bool infer(ir::Graph& g, const ir::SourceLoc& outer) {
  bool changed = false;
  for (size_t id = 0; id < g.nodes().size(); ++id) {
    ir::Node& n = g.mutable_node(static_cast<int32_t>(id));
    const ir::SourceLoc& loc = loc_of(n, outer);
    switch (n.kind) {
      case ir::NodeKind::kInput:
      case ir::NodeKind::kWeight:
      case ir::NodeKind::kConstant: break;  // the sources of every type
      case ir::NodeKind::kApply:
        if (!n.op) fail(Code::kInvalidArgument, "{}", ir::with_loc(fmt::format("[graph] node %{} has no op", id), loc));
        changed = infer_apply(g, n, loc) || changed;
        break;
      case ir::NodeKind::kIf:
      case ir::NodeKind::kWhile:
        if (n.subgraphs.size() != 2 || !n.subgraphs[0] || !n.subgraphs[1])
          fail(Code::kInvalidArgument, "{}",
               ir::with_loc(fmt::format("[{}] node %{} needs two sub-graphs", node_kind_name(n.kind), id), loc));
        changed = (n.kind == ir::NodeKind::kIf ? infer_if(g, n, loc) : infer_while(g, n, loc)) || changed;
        break;
    }
  }
  return changed;
}

}  // namespace

bool infer_shapes(ir::Graph& g) { return infer(g, {}); }

SPORA_PASS("shape_inference", 1, [](ir::Graph& g, const PassContext&) { return infer_shapes(g); });

}  // namespace spora::passes
