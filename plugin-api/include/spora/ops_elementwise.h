/* Op codes and flag bits of the elementwise op table (ops_elementwise.def).
 * Pure C, also valid C++ and OpenCL C (the ze plugin's kernels include it).
 * Codes are positions in the table; they are internal to one build (core
 * and plugins pass op names across the plugin ABI, never these codes). */
#ifndef SPORA_OPS_ELEMENTWISE_H_
#define SPORA_OPS_ELEMENTWISE_H_

#define SPORA_EW_F_FUSIBLE 1 /* may appear in a fused_elementwise program */
#define SPORA_EW_F_METHOD 2  /* also a Tensor method in Python (x.exp()) */
#define SPORA_EW_F_SMOOTH 4  /* smooth: its gradient is checked to second order */
#define SPORA_EW_F_ATTRS 8   /* takes attributes */

enum spora_ew_op {
#define SPORA_EW_OP(Id, name, kind, arity, cost, flags) SPORA_EW_##Id,
#include "ops_elementwise.def"
  SPORA_EW_COUNT
};

#endif /* SPORA_OPS_ELEMENTWISE_H_ */
