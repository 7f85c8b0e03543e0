// Reverse-mode rules. Each differentiable op has a bprop: given the op's
// inputs x, outputs y and the adjoints dy of its outputs (invalid where an
// output has none), it adds nodes to the graph that compute the adjoint of
// every input (an invalid Value = no gradient flows to that input). Bprops
// are written with the same graph builder as any graph, so the backward
// graph is itself differentiable (higher order) and serialisable.
//
// Every rule is registered with its op by the op's family file
// (OpDef::bprop / differentiable, ops/<family>.cpp); grad() takes it
// straight from the node's OpDef.
#pragma once
#include <optional>
#include <string>

#include "ir/builder.h"
#include "ir/graph.h"
#include "ir/op.h"

namespace spora::autodiff {

using ir::Value;

// Rules are written with the general graph builder.
using GradBuilder = ir::Builder;

// The rule type is the registry's (ir/op.h).
using BpropFn = spora::BpropFn;

struct BpropEntry {
  BpropFn fn = nullptr;  // null: the op is not differentiable
  bool differentiable = true;
};

// The op's gradient rule: its bprop, or "not differentiable"; nullopt when
// the op has neither (no rule yet) or is unknown. For the C API
// (spora_op_gradient).
std::optional<BpropEntry> find_bprop(const OpDef& op);
std::optional<BpropEntry> find_bprop(const std::string& op);

}  // namespace spora::autodiff
