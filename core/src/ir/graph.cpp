#include "ir/graph.h"

#include "ir/verifier.h"
#include "support/error.h"

namespace spora::ir {

std::string SourceLoc::str() const {
  if (empty()) return "";
  return file + ":" + std::to_string(line);
}

std::string with_loc(const std::string& message, const SourceLoc& loc) {
  return loc.empty() ? message : message + " (" + loc.str() + ")";
}

const char* node_kind_name(NodeKind k) {
  switch (k) {
    case NodeKind::kInput: return "input";
    case NodeKind::kWeight: return "weight";
    case NodeKind::kConstant: return "constant";
    case NodeKind::kApply: return "apply";
    case NodeKind::kIf: return "if";
    case NodeKind::kWhile: return "while";
  }
  return "unknown";
}

const TensorMeta& Graph::meta(Value v) const {
  if (v.node < 0 || v.node >= static_cast<int32_t>(nodes_.size()))
    fail(Code::kInvalidArgument, "[graph] value %{} does not exist in graph '{}'", v.node, name_);
  const Node& n = nodes_[static_cast<size_t>(v.node)];
  if (v.index < 0 || v.index >= static_cast<int32_t>(n.outputs.size()))
    fail(Code::kInvalidArgument, "[graph] node %{} has no output {}", v.node, v.index);
  return n.outputs[static_cast<size_t>(v.index)];
}

namespace {
Node leaf(NodeKind kind, const std::string& name, DType dtype, const Shape& shape) {
  if (!dtype_valid(dtype)) fail(Code::kInvalidArgument, "[graph] {} '{}' has an invalid dtype", node_kind_name(kind), name);
  Node n;
  n.kind = kind;
  n.name = name;
  n.outputs.push_back({dtype, shape});
  return n;
}
}  // namespace

Value Graph::add_input(const std::string& name, DType dtype, const Shape& shape) {
  for (const Node& n : nodes_)
    if ((n.kind == NodeKind::kInput || n.kind == NodeKind::kWeight) && n.name == name)
      fail(Code::kInvalidArgument, "[graph] an input or weight named '{}' already exists", name);
  return {append(leaf(NodeKind::kInput, name, dtype, shape)), 0};
}

Value Graph::add_weight(const std::string& name, DType dtype, const Shape& shape) {
  for (const Node& n : nodes_)
    if ((n.kind == NodeKind::kInput || n.kind == NodeKind::kWeight) && n.name == name)
      fail(Code::kInvalidArgument, "[graph] an input or weight named '{}' already exists", name);
  return {append(leaf(NodeKind::kWeight, name, dtype, shape)), 0};
}

Value Graph::add_constant(DType dtype, const Shape& shape, std::vector<uint8_t> bytes, const SourceLoc& loc) {
  Node n = leaf(NodeKind::kConstant, "", dtype, shape);
  const size_t want = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
  if (bytes.size() != want)
    fail(Code::kInvalidArgument, "{}", with_loc(fmt::format("[constant] shape {} of {} needs {} bytes, got {}",
                                                            shape.str(), dtype_name(dtype), want, bytes.size()),
                                                loc));
  n.data = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  n.loc = loc;
  return {append(std::move(n)), 0};
}

std::vector<Value> Graph::add_op(const std::string& op, const std::vector<Value>& inputs, const Attrs& attrs,
                                 const SourceLoc& loc) {
  const OpDef* def = OpRegistry::get().find(op);
  if (!def) fail(Code::kNotFound, "{}", with_loc("[" + op + "] unknown op", loc));
  if (inputs.size() > static_cast<size_t>(kMaxOpInputs))
    fail(Code::kInvalidArgument, "{}", with_loc("[" + op + "] too many inputs", loc));
  TensorMeta metas[kMaxOpInputs];
  for (size_t i = 0; i < inputs.size(); ++i) metas[i] = meta(inputs[i]);
  OpCall call;
  try {
    infer_call(*def, metas, static_cast<int>(inputs.size()), attrs, call);
  } catch (const Error& e) {
    throw Error(e.code(), with_loc(e.what(), loc));
  }
  Node n;
  n.kind = NodeKind::kApply;
  n.op = def;
  n.inputs = inputs;
  n.attrs = call.attrs;
  if (const AttrValue* strategy = attrs.find(kStrategyAttr)) n.attrs.set(kStrategyAttr, *strategy);
  // Kept as an int: a bool mark is true = 1 (this op), false = 0.
  if (const AttrValue* mark = attrs.find(kRecomputeAttr)) n.attrs.set(kRecomputeAttr, AttrValue::of_int(mark->i));
  for (int i = 0; i < call.num_outputs; ++i) n.outputs.push_back({call.out[i].dtype, call.result[i]});
  n.loc = loc;
  const int32_t id = append(std::move(n));
  std::vector<Value> out;
  for (int i = 0; i < call.num_outputs; ++i) out.push_back({id, i});
  return out;
}

int32_t Graph::append(Node node) {
  const int32_t id = static_cast<int32_t>(nodes_.size());
  for (const Value& v : node.inputs)
    if (v.node < 0 || v.node >= id || v.index < 0 ||
        v.index >= static_cast<int32_t>(nodes_[static_cast<size_t>(v.node)].outputs.size()))
      fail(Code::kInvalidArgument, "[graph] node %{} uses value %{}.{}, which is not an earlier node's output", id,
           v.node, v.index);
  nodes_.push_back(std::move(node));
  return id;
}

void Graph::set_outputs(std::vector<Value> outputs) {
  for (const Value& v : outputs) meta(v);  // validates
  outputs_ = std::move(outputs);
}

namespace {

std::string type_str(const TensorMeta& m) { return std::string(dtype_name(m.dtype)) + " " + m.shape.str(); }
bool same_type(const TensorMeta& a, const TensorMeta& b) { return a.dtype == b.dtype && a.shape == b.shape; }

[[noreturn]] void cf_error(const char* tag, const std::string& msg, const SourceLoc& loc) {
  fail(Code::kInvalidArgument, "{}", with_loc(fmt::format("[{}] {}", tag, msg), loc));
}

// A sub-graph must be well formed and take exactly `args` (inputs only).
void check_subgraph(const char* tag, const char* what, const Graph& g, const std::vector<TensorMeta>& args,
                    const SourceLoc& loc) {
  try {
    verify(g);
  } catch (const Error& e) {
    cf_error(tag, fmt::format("{} graph '{}' is malformed: {}", what, g.name(), e.what()), loc);
  }
  if (!g.weights().empty())
    cf_error(tag,
             fmt::format("{} graph '{}' has weight '{}'; sub-graphs take only inputs (pass the weight in as an input)",
                         what, g.name(), g.node(g.weights()[0]).name),
             loc);
  const std::vector<int32_t> ins = g.inputs();
  if (ins.size() != args.size())
    cf_error(tag,
             fmt::format("{} graph '{}' takes {} inputs, the node passes {}", what, g.name(), ins.size(), args.size()),
             loc);
  for (size_t i = 0; i < ins.size(); ++i) {
    const TensorMeta& m = g.node(ins[i]).outputs[0];
    if (!same_type(m, args[i]))
      cf_error(tag,
               fmt::format("{} graph '{}' input {} ('{}') is {}, the node passes {}", what, g.name(), i,
                           g.node(ins[i]).name, type_str(m), type_str(args[i])),
               loc);
  }
}

std::vector<TensorMeta> output_types(const Graph& g) {
  std::vector<TensorMeta> out;
  for (const Value& v : g.outputs()) out.push_back(g.meta(v));
  return out;
}

}  // namespace

std::vector<Value> Graph::add_if(Value cond, const Graph& then_graph, const Graph& else_graph,
                                 const std::vector<Value>& inputs, const SourceLoc& loc) {
  auto value_meta = [&](Value v, const char* what) -> const TensorMeta& {
    try {
      return meta(v);
    } catch (const Error& e) {
      cf_error("if", fmt::format("{}: {}", what, e.what()), loc);
    }
  };
  const TensorMeta& c = value_meta(cond, "condition");
  if (c.dtype != SPORA_DTYPE_BOOL || c.shape.numel() != 1)
    cf_error("if", fmt::format("the condition must be a bool scalar, got {}", type_str(c)), loc);
  std::vector<TensorMeta> args;
  for (const Value& v : inputs) args.push_back(value_meta(v, "input"));
  check_subgraph("if", "then", then_graph, args, loc);
  check_subgraph("if", "else", else_graph, args, loc);
  const std::vector<TensorMeta> t = output_types(then_graph), e = output_types(else_graph);
  if (t.size() != e.size())
    cf_error("if", fmt::format("the then graph returns {} outputs, the else graph {}", t.size(), e.size()), loc);
  for (size_t i = 0; i < t.size(); ++i)
    if (!same_type(t[i], e[i]))
      cf_error("if", fmt::format("output {} is {} in the then graph but {} in the else graph", i, type_str(t[i]),
                                 type_str(e[i])),
               loc);
  Node n;
  n.kind = NodeKind::kIf;
  n.inputs.push_back(cond);
  n.inputs.insert(n.inputs.end(), inputs.begin(), inputs.end());
  n.outputs = t;
  n.loc = loc;
  n.subgraphs = {std::make_shared<Graph>(then_graph), std::make_shared<Graph>(else_graph)};
  const int32_t id = append(std::move(n));
  std::vector<Value> out;
  for (size_t i = 0; i < t.size(); ++i) out.push_back({id, static_cast<int32_t>(i)});
  return out;
}

std::vector<Value> Graph::add_while(const Graph& cond_graph, const Graph& body_graph, const std::vector<Value>& inputs,
                                    const SourceLoc& loc) {
  std::vector<TensorMeta> args;
  for (const Value& v : inputs) {
    try {
      args.push_back(meta(v));
    } catch (const Error& e) {
      cf_error("while", fmt::format("initial value: {}", e.what()), loc);
    }
  }
  check_subgraph("while", "cond", cond_graph, args, loc);
  check_subgraph("while", "body", body_graph, args, loc);
  const std::vector<TensorMeta> c = output_types(cond_graph), b = output_types(body_graph);
  if (c.size() != 1 || c[0].dtype != SPORA_DTYPE_BOOL || c[0].shape.numel() != 1)
    cf_error("while",
             fmt::format("the cond graph must return one bool scalar, it returns {}",
                         c.size() == 1 ? type_str(c[0]) : std::to_string(c.size()) + " values"),
             loc);
  if (b.size() != args.size())
    cf_error("while",
             fmt::format("the body graph returns {} values for {} loop-carried values", b.size(), args.size()), loc);
  for (size_t i = 0; i < b.size(); ++i)
    if (!same_type(b[i], args[i]))
      cf_error("while",
               fmt::format("loop-carried value {} is {} but the body graph returns {} for it", i, type_str(args[i]),
                           type_str(b[i])),
               loc);
  Node n;
  n.kind = NodeKind::kWhile;
  n.inputs = inputs;
  n.outputs = args;
  n.loc = loc;
  n.subgraphs = {std::make_shared<Graph>(cond_graph), std::make_shared<Graph>(body_graph)};
  const int32_t id = append(std::move(n));
  std::vector<Value> out;
  for (size_t i = 0; i < args.size(); ++i) out.push_back({id, static_cast<int32_t>(i)});
  return out;
}

std::vector<Value> inline_graph(Graph& dst, const Graph& src, const std::vector<Value>& args) {
  if (!src.weights().empty())
    fail(Code::kInvalidArgument, "[graph] cannot inline graph '{}': it has weights", src.name());
  const auto& nodes = src.nodes();
  std::vector<int32_t> id_map(nodes.size(), -1);
  std::vector<Value> arg_of(nodes.size());
  size_t next = 0;
  auto tr = [&](Value v) -> Value {
    const size_t id = static_cast<size_t>(v.node);
    if (nodes[id].kind == NodeKind::kInput) return arg_of[id];
    return {id_map[id], v.index};
  };
  for (size_t id = 0; id < nodes.size(); ++id) {
    const Node& n = nodes[id];
    if (n.kind == NodeKind::kInput) {
      if (next >= args.size())
        fail(Code::kInvalidArgument, "[graph] inlining '{}' needs more than {} arguments", src.name(), args.size());
      if (!same_type(dst.meta(args[next]), n.outputs[0]))
        fail(Code::kInvalidArgument, "[graph] inlining '{}': argument {} is {}, input '{}' is {}", src.name(), next,
             type_str(dst.meta(args[next])), n.name, type_str(n.outputs[0]));
      arg_of[id] = args[next++];
      continue;
    }
    Node copy = n;
    for (Value& v : copy.inputs) v = tr(v);
    id_map[id] = dst.append(std::move(copy));
  }
  if (next != args.size())
    fail(Code::kInvalidArgument, "[graph] inlining '{}' takes {} arguments, got {}", src.name(), next, args.size());
  std::vector<Value> out;
  for (const Value& v : src.outputs()) out.push_back(tr(v));
  return out;
}

std::vector<int32_t> Graph::inputs() const {
  std::vector<int32_t> out;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].kind == NodeKind::kInput) out.push_back(static_cast<int32_t>(i));
  return out;
}

std::vector<int32_t> Graph::weights() const {
  std::vector<int32_t> out;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].kind == NodeKind::kWeight) out.push_back(static_cast<int32_t>(i));
  return out;
}

}  // namespace spora::ir
