// Shape/type inference as a pass: every node's output types recomputed from
// the types of the graph's inputs, weights and constants, in order, through
// each op's registered inference (control-flow sub-graphs included).
//
// Nodes record their types when they are built; this pass is what brings
// them up to date after something upstream changed: an input given a new
// shape (the executor does this to plan a run whose batch differs from the
// one the graph was built with), or a graph edited or loaded from a file.
#pragma once
#include "ir/graph.h"

namespace spora::passes {

// Re-infers every node's output types in place; returns true when any
// changed. Op attributes are kept as they are, so an op whose attribute
// fixes a shape (reshape without -1, broadcast_to, the shape-carrying
// attributes of creation ops and conv gradients) fails when its input no
// longer fits. Errors are Code::kInvalidArgument (or the op's own code),
// name the op and the node's source location, e.g.
// "[matmul] shapes (7,30) and (20,10) do not contract (30 vs 20) (model.py:3)";
// on error `g` may be partly updated (callers work on a copy).
bool infer_shapes(ir::Graph& g);

}  // namespace spora::passes
