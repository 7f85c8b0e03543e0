// Compile-time evaluation of one node through the context's Evaluator
// (evaluator.h), shared by constant folding and inlining (whose conditions
// are computed from constants).
#pragma once
#include <optional>
#include <vector>

#include "ir/graph.h"
#include "passes/evaluator.h"

namespace spora::passes {

// Runs `n`'s op over `inputs` with `ev`. Nothing when it fails (logged at
// debug level, naming `pass`): the node is left for run time.
std::optional<std::vector<HostValue>> evaluate_node(const Evaluator& ev, const ir::Node& n,
                                                    const std::vector<HostValue>& inputs, const char* pass);

}  // namespace spora::passes
