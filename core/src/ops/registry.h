// The op registry: one entry per primitive with its schema (inputs, outputs,
// typed attributes with defaults, dtypes) and its shape/dtype inference.
// Inference also prepares what a plugin's kernel sees (see OpCall), so that
// every plugin gets canonical, already-validated descriptions.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ir/dtype.h"
#include "ir/shape.h"
#include "ops/attrs.h"

namespace spora {

constexpr int kMaxOpInputs = 8;
constexpr int kMaxOpOutputs = 4;

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

struct OpDef {
  std::string name;
  std::vector<std::string> inputs;   // input names, for messages and schemas
  std::vector<std::string> outputs;
  std::vector<AttrSpec> attrs;
  std::vector<DType> dtypes;         // accepted input dtypes (all inputs share one)
  InferFn infer = nullptr;
  std::string doc;

  std::string schema() const;  // one-line schema text
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
};

// Validates inputs and attributes against the schema and runs inference.
// Errors name the op: "[matmul] shapes (2,3) and (4,5) do not contract".
void infer_call(const OpDef& op, const TensorMeta* inputs, int num_inputs, const Attrs& attrs, OpCall& call);

// Registration functions, one per op family file.
void register_elementwise_ops(OpRegistry& r);
void register_matmul_ops(OpRegistry& r);
void register_reduce_ops(OpRegistry& r);
void register_layout_ops(OpRegistry& r);
void register_softmax_ops(OpRegistry& r);

}  // namespace spora
