// The vector-Jacobian product of a formula, which autodiff provides to the
// rules in op family files (rules::vjp_of, ops/rule_helpers.h; installed at
// load by vjp.cpp): the formula is built from simpler ops in a scratch
// graph, that graph is differentiated with value_and_grad, and the nodes
// the gradients need are copied into the graph being differentiated. The
// result is made of basic ops that have rules of their own, so it is
// differentiable again (higher order).
#pragma once
#include <functional>
#include <vector>

#include "autodiff/bprop.h"

namespace spora::autodiff {

// Builds an op's outputs from its inputs with basic ops.
using BuildFn = std::function<std::vector<Value>(GradBuilder& b, const std::vector<Value>& x)>;

// The vector-Jacobian product of f at `x` for the output cotangents `dy`
// (invalid: that output has none): one gradient per input, invalid for
// non-float inputs. `y`, when given (same size as dy), are f's outputs
// already in b's graph: gradients that need an output use them instead of
// recomputing it. The scratch graph is L = sum_j sum(f_j(x) * dy_j).
std::vector<Value> vjp_of(GradBuilder& b, const ir::Node& node, const std::vector<Value>& x,
                          const std::vector<Value>& y, const std::vector<Value>& dy, const BuildFn& build);

}  // namespace spora::autodiff
