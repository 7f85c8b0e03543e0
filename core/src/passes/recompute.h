// Recomputation (activation checkpointing; MindSpore's Cell.recompute() and
// Primitive.recompute()): forward values of marked ops are not kept for the
// backward pass; each backward reader reads a copy of the op, computed
// again just before the first backward reader from the nearest values that
// are kept (the checkpoints). The originals then die once the forward pass
// has read them, and the memory plan reuses their bytes.
//
// Which ops: those whose node carries the "recompute" attribute (ir/op.h,
// kRecomputeAttr) with a value >= 1. A value of 1 marks one op
// (Primitive.recompute()); a value >= 2 names one call of a recomputed
// Cell, whose outputs -- values the forward pass reads outside that call --
// are kept, as MindSpore keeps a recomputed cell's outputs. Also kept:
// graph outputs, the outputs of collectives (recomputing them would
// communicate again) and of ops that update an input in place, and the
// root of a view that stays alive into the backward pass (the view holds
// its memory anyway; a copy would hold it twice). Random ops
// are copied with their seed and offset attributes and inputs, so a copy
// draws the same numbers as the original (dropout's mask included).
//
// Forward and backward: the forward pass ends at the last node that the
// first `forward_outputs` graph outputs depend on (value_and_grad puts the
// function's outputs first); readers after it are backward readers. Marked
// nodes after it are not recomputed.
//
// The copies carry recompute = 0, so CSE does not fold them back onto the
// originals, and a second run of the pass finds nothing to do. Execution
// follows node order (sched/plan_build.h), so a copy placed just before its
// reader is computed there.
#pragma once
#include <cstdint>

#include "ir/graph.h"

namespace spora::passes {

struct RecomputeOptions {
  // The graph outputs the forward pass computes, first in the output list.
  int32_t forward_outputs = 1;
};

struct RecomputeStats {
  int32_t copies = 0;          // op nodes computed again in the backward pass
  int32_t dropped = 0;         // forward values no backward node reads any more
  uint64_t dropped_bytes = 0;  // their bytes
};

// Rewrites `g` in place (a no-op without marked ops). Throws spora::Error
// (kInvalidArgument) for forward_outputs < 1.
RecomputeStats recompute(ir::Graph& g, const RecomputeOptions& options = {});

// Marks the op nodes with ids in [first, end) that carry no recompute
// attribute yet with `mark` (1: each op on its own; >= 2: one recomputed
// region whose outputs are kept; 0: never recomputed); returns how many it
// marked. Earlier marks win, so a Primitive's own mark survives the Cell
// call around it. Throws (kInvalidArgument) for a range outside the graph
// or a negative mark.
int32_t mark_recompute(ir::Graph& g, int32_t first, int32_t end, int64_t mark);

}  // namespace spora::passes
