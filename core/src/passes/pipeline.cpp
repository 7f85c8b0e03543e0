// The order of the optimisation pipeline, first to last: one list, read
// top to bottom. Each pass's level (where it is defined) decides whether an
// opt level runs it; its needs are checked against this order on first use.
#include "passes/pass.h"

namespace spora::passes {

const std::vector<std::string>& pipeline_order() {
  static const std::vector<std::string> order = {
      // Types current before anything reads them.
      "shape_inference",
      // Branches with constant conditions spliced in, so that everything
      // after sees their nodes; dce then drops the unused conditions.
      "inline",
      "dce",
      "cse",
      "algebraic_simplify",
      "constant_folding",
      // Before the fusions, which build new nodes without the recompute
      // marks; after cse, which would fold nothing back (copies are marked
      // 0) but has fewer nodes to copy.
      "recompute",
      // Gradient all_reduces into buckets: after cse (which could merge two
      // identical reductions first) and recompute; the fusions after it
      // never touch collectives.
      "allreduce_fusion",
      // Before elementwise_fusion: a linear/conv's bias, residual and
      // activation go to its post-ops rather than into a fused block.
      "epilogue_fusion",
      // After epilogue_fusion, whose conv2d_act it fuses with a max pooling.
      "conv_pool_fusion",
      // The backward ops of those convolutions and poolings, before
      // elementwise_fusion takes their relu mask.
      "conv_pool_grad_fusion",
      "elementwise_fusion",
      // Last: it marks values whose producer and every reader pass them in
      // a blocked layout, so no pass after it may add a reader.
      "blocked_handoff",
  };
  return order;
}

}  // namespace spora::passes
