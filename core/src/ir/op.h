// The op registry: one entry per primitive with its schema (inputs, outputs,
// typed attributes with defaults, dtypes) and its shape/dtype inference.
// Inference also prepares what a plugin's kernel sees (see OpCall), so that
// every plugin gets canonical, already-validated descriptions.
//
// The op *interface* is part of the IR (as in TVM's ir/op.h): nodes point at
// OpDefs, building a graph infers through them, the verifier and JSON use
// them. The op *definitions* live above, one family per file in ops/, and
// register themselves here (SPORA_OP_FAMILY).
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <spora/spora.h>

#include "ir/dtype.h"
#include "ir/shape.h"
#include "ir/attrs.h"

namespace spora {

namespace ir {
class Builder;
struct Node;
struct Value;
}  // namespace ir

constexpr int kMaxOpInputs = SPORA_MAX_OP_INPUTS;
constexpr int kMaxOpOutputs = SPORA_MAX_OP_OUTPUTS;

struct TensorMeta {
  DType dtype = SPORA_DTYPE_INVALID;
  Shape shape;
};

struct AttrSpec {
  std::string name;
  AttrType type;
  bool required = false;
  AttrValue default_value;  // used when not required and not given
};

// The result of inference for one call.
struct OpCall {
  int num_inputs = 0;
  TensorMeta in[kMaxOpInputs];    // inputs as the kernel sees them (e.g. rank-padded)
  int num_outputs = 0;
  TensorMeta out[kMaxOpOutputs];  // outputs as the kernel sees them
  Shape result[kMaxOpOutputs];    // outputs as the user sees them (same element count)
  Attrs attrs;                    // validated, defaults filled, normalised
  bool view = false;              // output 0 aliases input 0's memory (no kernel)
};

struct OpDef;
using InferFn = void (*)(const OpDef& op, const TensorMeta* inputs, OpCall& call);

// Estimated work of one call, for scheduling and fusion decisions.
struct Cost {
  double flops = 0;  // arithmetic operations
  double bytes = 0;  // bytes read and written
};
using CostFn = Cost (*)(const OpCall& call);

// Reverse-mode rule: given the op's inputs x, outputs y and the adjoints dy
// of its outputs (invalid where an output has none), adds nodes to `b` that
// compute the adjoint of every input (an invalid Value: no gradient flows
// to that input). Written with the graph builder, so backward graphs are
// differentiable again. Helpers: ops/rule_helpers.h.
using BpropFn = std::vector<ir::Value> (*)(ir::Builder& b, const ir::Node& node, const std::vector<ir::Value>& x,
                                           const std::vector<ir::Value>& y, const std::vector<ir::Value>& dy);
// Decomposition: the op's outputs rebuilt from simpler ops, from `x` (the
// op's inputs in the builder's graph) and its validated attributes; used
// where a device's plugin has no kernel for the op.
using DecomposeFn = std::vector<ir::Value> (*)(ir::Builder& b, const std::vector<ir::Value>& x, const Attrs& attrs);
// Sharding rule (ir/sharding.h): given the layouts of an op's inputs over a
// device mesh, the layouts it wants them in and the layouts of its outputs;
// false when the op has no sharded form for them (the SPMD pass then runs it
// on replicated inputs). Used by parallel/spmd_pass.cpp.
struct ShardQuery;
struct ShardPlan;
using ShardingFn = bool (*)(const ShardQuery& q, ShardPlan& plan);
// The node attribute that carries a user's sharding strategy (a string, see
// docs/parallel.md). Every op accepts it; inference ignores it and only the
// graph node keeps it, so kernels never see it.
inline constexpr const char* kStrategyAttr = "strategy";
// The node attribute that marks an op for recomputation (passes/recompute.h):
// an int, 0 = never recomputed (also the pass's own copies, so CSE keeps
// them apart from the originals), 1 = this op (Primitive.recompute()),
// >= 2 = an op of one recomputed Cell call, the number naming the call.
// Every op accepts it; like "strategy", only the graph node keeps it.
inline constexpr const char* kRecomputeAttr = "recompute";

struct OpDef {
  std::string name;
  std::vector<std::string> inputs;   // input names, for messages and schemas
  std::vector<std::string> outputs;  // output names; see dynamic_outputs
  std::vector<AttrSpec> attrs;
  // Accepted dtypes of the typed inputs, which must all share one dtype.
  // Inputs not listed in `typed_inputs` are checked by `infer`.
  std::vector<DType> dtypes;
  InferFn infer = nullptr;
  std::string doc;
  // Indices of the inputs `dtypes` applies to; empty = all of them.
  std::vector<int> typed_inputs;
  // The last input may repeat (concat, stack): 1..kMaxOpInputs of it.
  bool variadic = false;
  // Inference decides how many outputs there are (split); `outputs` then
  // names the repeated output.
  bool dynamic_outputs = false;
  // Work estimate; when null, one flop per output element and the bytes of
  // every operand (right for elementwise and layout ops).
  CostFn cost = nullptr;
  // Kernels accept output 0 aliasing an input of the same dtype and shape
  // (elementwise ops): the memory planner may then compute in place. Keep
  // this after `cost`: families initialise OpDefs by position up to cost.
  bool in_place = false;
  // Ops with several outputs computed in place (the optimizer updates) name,
  // per output, the one input it may overwrite (-1: none); their kernels
  // read each element of that input only before writing the same element of
  // the output. Null: output 0 may overwrite any input (elementwise ops).
  int (*in_place_input)(const OpCall& call, int output) = nullptr;

  // What the transforms need, registered with the op by its family file.
  // Gradient: `bprop` when set; otherwise `differentiable == false` says no
  // gradient flows (argmax, comparisons); an op with neither has no
  // gradient rule (grad fails on it).
  BpropFn bprop = nullptr;
  bool differentiable = true;
  DecomposeFn decompose = nullptr;
  // May appear in a fused_elementwise program (from the elementwise table).
  bool fusible = false;
  ShardingFn sharding = nullptr;

  std::string schema() const;  // one-line schema text
  Cost estimate(const OpCall& call) const;
};

class OpRegistry {
 public:
  static const OpRegistry& get();

  const OpDef* find(std::string_view name) const;
  const std::vector<std::unique_ptr<OpDef>>& ops() const { return ops_; }

  void add(OpDef def);

 private:
  OpRegistry();
  std::vector<std::unique_ptr<OpDef>> ops_;  // sorted by name once built
  // By name, for find(): every eager op call looks its op up by name, and a
  // hash beats a binary search of string compares there.
  std::unordered_map<std::string_view, const OpDef*> by_name_;
};

// Validates inputs and attributes against the schema and runs inference.
// Errors name the op: "[matmul] shapes (2,3) and (4,5) do not contract".
void infer_call(const OpDef& op, const TensorMeta* inputs, int num_inputs, const Attrs& attrs, OpCall& call);

// Op family files register themselves at load time:
//   void register_my_ops(OpRegistry& r) { r.add(OpDef{...}); }
//   SPORA_OP_FAMILY(register_my_ops);
int add_op_family(void (*fn)(OpRegistry&));
#define SPORA_OP_FAMILY(fn) static const int spora_op_family_##fn = ::spora::add_op_family(fn)

}  // namespace spora
