// Sharding rules shared by several op families (ir/sharding.h says what a
// rule answers). Families register them with their ops through
// rules::Rules::shard; rules only they need stay in their own file (matmul,
// reshape, the optimizer updates). They live in ops/ because the SPMD pass
// (parallel/) sits above the ops and the rules sit with them.
//
// Every rule is conservative: where it cannot keep a split or a partial sum
// exactly, it asks for the input replicated (the pass then gathers or
// all-reduces), so a graph partitioned with these rules computes what the
// unpartitioned graph computes.
#pragma once
#include "ir/sharding.h"

namespace spora::shard {

// What an elementwise op may do with partial sums (sum_r x_r is the true
// value): kNone resolves them first; kAdditive (add, sub) keeps them when
// every input is partial over the same axes; kScaling (mul) when exactly one
// input is partial; kFirst (div, neg) when only input 0 is.
enum class Partial { kNone, kAdditive, kScaling, kFirst };

// Broadcasting elementwise ops: the output takes the splits of its inputs
// (first come first served per mesh axis), every input is asked for the
// output's layout on its non-broadcast dims.
bool elementwise(const ShardQuery& q, ShardPlan& p, Partial partial);
bool elementwise_plain(const ShardQuery& q, ShardPlan& p);     // Partial::kNone
bool elementwise_additive(const ShardQuery& q, ShardPlan& p);  // add, sub
bool elementwise_scaling(const ShardQuery& q, ShardPlan& p);   // mul
bool elementwise_first(const ShardQuery& q, ShardPlan& p);     // div, neg

// Elementwise along every dim but attribute "axis" (softmax, log_softmax and
// their gradients): that dim is replicated.
bool along_axis(const ShardQuery& q, ShardPlan& p);

// Whether `size` splits evenly over mesh axis `axis`.
inline bool divides(const ShardQuery& q, int64_t size, int axis) {
  return axis == kReplicated || (axis >= 0 && axis < static_cast<int>(q.mesh.size()) &&
                                 size % q.mesh[static_cast<size_t>(axis)] == 0);
}

}  // namespace spora::shard
