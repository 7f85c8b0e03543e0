// Moving a value between layouts (ir/sharding.h) on one rank, all in one
// place: partial sums are all-reduced, or reduce-scattered straight into a
// wanted split; splits that must go are all-gathered over their axis;
// splits that must come are local slices of this rank's block (no
// communication); a partial sum that must come keeps the value on
// coordinate 0 of its axes and zero elsewhere (no communication). Each step
// is an op added to the rank's graph.
#pragma once
#include "ir/graph.h"
#include "ir/sharding.h"
#include "parallel/mesh.h"

namespace spora::parallel {

// `v` (a value of `g` laid out as `from`) laid out as `to`; `v` itself when
// they are equal. A partial sum over an axis the mesh lacks: kInternal.
ir::Value redistribute(ir::Graph& g, const Mesh& mesh, ir::Value v, const TensorLayout& from,
                       const TensorLayout& to, const ir::SourceLoc& loc);

// The shape of this rank's block of a tensor of `global` shape.
Shape local_shape(const Mesh& mesh, const Shape& global, const TensorLayout& l);

}  // namespace spora::parallel
