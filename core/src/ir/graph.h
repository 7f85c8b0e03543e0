// The graph IR: a typed dataflow graph of parameters, constants and op
// applications, with sub-graphs for control flow. Every node carries the
// dtype and shape of each output, its device (empty = not yet placed) and
// the user's source location.
//
// Nodes live in a vector in topological order (an input always refers to an
// earlier node); values are (node, output) index pairs, which keeps copies,
// JSON and passes simple. Passes that remove nodes rebuild the graph through
// GraphRewriter-style copies rather than editing indices in place.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/shape.h"
#include "ir/attrs.h"
#include "ir/op.h"

namespace spora::ir {

struct SourceLoc {
  std::string file;
  int32_t line = 0;
  bool empty() const { return file.empty() && line == 0; }
  std::string str() const;  // "model.py:17" or ""
};

// An output of a node.
struct Value {
  int32_t node = -1;
  int32_t index = 0;
  bool valid() const { return node >= 0; }
  bool operator==(const Value& o) const { return node == o.node && index == o.index; }
  bool operator!=(const Value& o) const { return !(*this == o); }
};

enum class NodeKind : int32_t {
  kInput = 0,     // data fed on every run
  kWeight = 1,    // a parameter: persistent state bound by name (trainable)
  kConstant = 2,  // host data baked into the graph
  kApply = 3,     // an op of the registry
  kIf = 4,        // subgraphs[0] if inputs[0] (a bool scalar) else subgraphs[1]
  kWhile = 5,     // subgraphs[0] = cond, subgraphs[1] = body over loop-carried values
};

const char* node_kind_name(NodeKind k);

class Graph;

struct Node {
  NodeKind kind = NodeKind::kApply;
  std::string name;            // inputs/weights: the binding name; apply: optional label
  const OpDef* op = nullptr;   // kApply
  std::vector<Value> inputs;
  Attrs attrs;                 // kApply: validated, defaults filled (as infer_call leaves them)
  std::vector<TensorMeta> outputs;
  std::string device;          // "" until placed
  SourceLoc loc;
  std::shared_ptr<const std::vector<uint8_t>> data;  // kConstant: dense row-major bytes
  std::vector<std::shared_ptr<Graph>> subgraphs;      // kIf / kWhile
};

class Graph {
 public:
  explicit Graph(std::string name = "main") : name_(std::move(name)) {}

  const std::string& name() const { return name_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const Node& node(int32_t id) const { return nodes_.at(static_cast<size_t>(id)); }
  Node& mutable_node(int32_t id) { return nodes_.at(static_cast<size_t>(id)); }
  const TensorMeta& meta(Value v) const;

  // Builders. Errors (unknown op, bad shapes) name the op and `loc`.
  Value add_input(const std::string& name, DType dtype, const Shape& shape);
  Value add_weight(const std::string& name, DType dtype, const Shape& shape);
  Value add_constant(DType dtype, const Shape& shape, std::vector<uint8_t> bytes, const SourceLoc& loc = {});
  // Runs the op's inference; returns the node's outputs.
  std::vector<Value> add_op(const std::string& op, const std::vector<Value>& inputs, const Attrs& attrs,
                            const SourceLoc& loc = {});
  // Control flow. The sub-graphs are copied into the node; their inputs
  // (sub-graphs take no weights) are bound by position.
  //  if:    `cond` is a bool scalar; then_graph and else_graph each take
  //         `inputs` and return the same number and types of outputs, which
  //         are the node's outputs.
  //  while: `inputs` are the initial loop-carried values; cond_graph takes
  //         them and returns one bool scalar; body_graph takes them and
  //         returns their next values (same types). The node's outputs are
  //         the final values.
  // Type and arity mismatches are kInvalidArgument errors naming "[if]" or
  // "[while]" and `loc`.
  std::vector<Value> add_if(Value cond, const Graph& then_graph, const Graph& else_graph,
                            const std::vector<Value>& inputs, const SourceLoc& loc = {});
  std::vector<Value> add_while(const Graph& cond_graph, const Graph& body_graph, const std::vector<Value>& inputs,
                               const SourceLoc& loc = {});
  // Appends a fully formed node (used by deserialisation and passes); checks
  // that its inputs exist.
  int32_t append(Node node);

  void set_outputs(std::vector<Value> outputs);
  const std::vector<Value>& outputs() const { return outputs_; }
  // Input and weight nodes, in creation order.
  std::vector<int32_t> inputs() const;
  std::vector<int32_t> weights() const;

 private:
  std::string name_;
  std::vector<Node> nodes_;
  std::vector<Value> outputs_;
};

// "[matmul] ... (model.py:17)": appends the location to an error message.
std::string with_loc(const std::string& message, const SourceLoc& loc);

// Copies the nodes of `src` into `dst` with src's input nodes replaced by
// `args` (one per input, same types; src must have no weights). Returns the
// values in `dst` of src's outputs. Used to call a graph inside another
// (autodiff of control flow).
std::vector<Value> inline_graph(Graph& dst, const Graph& src, const std::vector<Value>& args);

}  // namespace spora::ir
