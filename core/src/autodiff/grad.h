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
ir::Graph value_and_grad(const ir::Graph& g, const std::vector<int32_t>& wrt, int32_t output);

}  // namespace spora::autodiff
