#include "ir/graph.h"

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
