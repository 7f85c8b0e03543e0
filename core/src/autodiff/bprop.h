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

namespace spora::autodiff {

using ir::Value;

// Rules are written with the general graph builder.
using GradBuilder = ir::Builder;

using BpropFn = std::vector<Value> (*)(GradBuilder& b, const ir::Node& node, const std::vector<Value>& x,
                                       const std::vector<Value>& y, const std::vector<Value>& dy);

struct BpropEntry {
  BpropFn fn = nullptr;       // null: the op is not differentiable
  bool differentiable = true;
};

// nullptr when the op has no registered rule (neither a bprop nor a
// not-differentiable mark).
const BpropEntry* find_bprop(const std::string& op);
std::vector<std::string> ops_with_bprop_rules();

void register_bprop(const char* op, BpropFn fn);
void register_not_differentiable(const char* op);

// Bprop files register themselves: SPORA_BPROPS(register_fn).
int add_bprop_family(void (*fn)());
#define SPORA_BPROPS(fn) static const int spora_bprop_family_##fn = ::spora::autodiff::add_bprop_family(fn)

}  // namespace spora::autodiff
