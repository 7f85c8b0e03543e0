// Re-casting late readers of an exact up-cast (mixed_precision.cpp's
// bf16 -> f32 casts): a value read early in the forward pass and again late
// in the backward pass would keep its f32 copy alive in between; giving the
// late readers their own cast, placed just before them, keeps only the
// bf16 source (half the bytes, and often alive anyway for a bf16 matmul's
// backward). bf16/f16 -> f32 is exact, so the numbers do not change.
#pragma once
#include "ir/graph.h"

namespace spora::passes {

// Rewrites `g` in place; returns whether anything changed. Only values of at
// least kMinRematBytes, and readers more than kRematGap nodes after the
// previous reader of the same cast.
bool rematerialize_upcasts(ir::Graph& g);

constexpr int64_t kMinRematBytes = 256 * 1024;
constexpr int32_t kRematGap = 16;

}  // namespace spora::passes
