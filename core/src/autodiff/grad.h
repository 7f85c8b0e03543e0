// Reverse-mode autodiff as an IR-to-IR transform.
#pragma once
#include <vector>

#include "ir/graph.h"

namespace spora::autodiff {

// Returns a graph computing every output of `g` followed by the gradient of
// output `output` with respect to each node in `wrt` (input or weight nodes
// of `g`, in order). The output is summed first if it is not a scalar (the
// gradient of sum(y)). Node ids of `g` are kept, so values of `g` are
// values of the result. Apply it again for higher order. Errors name the op
// and source location of the node whose rule is missing.
//
// `seed`, when valid, is a value of `g` with the output's dtype and shape
// that replaces the ones the output's adjoint starts from: the result is
// then the vector-Jacobian product seed^T * d(output)/d(wrt) (the eager
// tape's sensitivity).
ir::Graph value_and_grad(const ir::Graph& g, const std::vector<int32_t>& wrt, int32_t output,
                         ir::Value seed = {});

// The same with respect to values of `g` (outputs of any node, not only of
// inputs and weights). The gradient with respect to an intermediate value is
// its adjoint: the derivative of the output with respect to that value as a
// variable; other wrt values are still differentiated through it.
ir::Graph value_and_grad_values(const ir::Graph& g, const std::vector<ir::Value>& wrt, int32_t output,
                                ir::Value seed = {});

}  // namespace spora::autodiff
