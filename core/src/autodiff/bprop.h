// Reverse-mode rules. Each differentiable op has a bprop: given the op's
// inputs x, outputs y and the adjoints dy of its outputs (invalid where an
// output has none), it adds nodes to the graph that compute the adjoint of
// every input (an invalid Value = no gradient flows to that input). Bprops
// are written with the same graph builder as any graph, so the backward
// graph is itself differentiable (higher order) and serialisable.
#pragma once
#include <vector>

#include "ir/builder.h"
#include "ir/graph.h"
#include "ir/op.h"

namespace spora::autodiff {

using ir::Value;

// Rules are written with the general graph builder.
using GradBuilder = ir::Builder;

// The rule type is the registry's (ir/op.h): op family files
// register rules with their ops (OpDef::bprop / differentiable).
using BpropFn = spora::BpropFn;

struct BpropEntry {
  BpropFn fn = nullptr;       // null: the op is not differentiable
  bool differentiable = true;
};

// The op's rule by name: its own (OpDef::bprop / differentiable) or one
// registered by name below (families whose rules still live in
// autodiff/bprop_*.cpp); nullptr when it has neither. grad() takes an op's
// own rule straight from its OpDef; this serves the rest, the C API's
// spora_op_gradient and rules that reuse another op's rule.
const BpropEntry* find_bprop(const std::string& op);
std::vector<std::string> ops_with_bprop_rules();

// For families not yet moved into their op files; fails when the op
// already has a rule of its own (OpDef::bprop).
void register_bprop(const char* op, BpropFn fn);
void register_not_differentiable(const char* op);

// Bprop files register themselves: SPORA_BPROPS(register_fn).
int add_bprop_family(void (*fn)());
#define SPORA_BPROPS(fn) static const int spora_bprop_family_##fn = ::spora::autodiff::add_bprop_family(fn)

}  // namespace spora::autodiff
