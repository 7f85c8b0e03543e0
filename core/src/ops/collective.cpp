// Collective ops in graphs: all_reduce(x) over a communicator.
//
// Contract: "group" is the id of a live communicator (spora_comm_id), looked
// up when the plan runs, so a graph may be compiled before the communicator
// exists; "op" is sum, prod, max, min or mean. y has x's dtype and shape.
// No plugin kernel exists for it: the scheduler runs it itself through the
// communicator's collective plugin (sched/executor.cpp), on host-addressable
// memory, in the device stream's order. Every rank must run the same graph.
//
// Gradient: for y = sum_r x_r on every rank, the loss of the whole job is
// sum_r L_r, so dL/dx_r = sum_r' dy_r': the gradient is the all_reduce (sum)
// of the adjoints; for mean it is the mean of them. prod, max and min are
// not differentiated (their gradient needs every rank's input, which no rank
// holds).
#include "ops/collective.h"

#include <spora/plugin.h>

#include "ir/op.h"
#include "ops/rule_helpers.h"
#include "support/error.h"

namespace spora {
namespace {

void infer_all_reduce(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const AttrValue* mode = call.attrs.find("op");
  reduce_op_from_name(mode ? mode->s : "", op.name);
  if (call.attrs.get_int("group") <= 0)
    fail(Code::kInvalidArgument, "[{}] group {} is not a communicator id (spora_comm_id gives ids > 0)", op.name,
         call.attrs.get_int("group"));
  if (mode->s == "mean" && in[0].dtype == SPORA_DTYPE_BOOL)
    fail(Code::kInvalidArgument, "[{}] mean of bool is not defined", op.name);
  call.num_outputs = 1;
  call.out[0] = in[0];
  call.result[0] = in[0].shape;
}

using rules::GradBuilder;
using rules::V;

V all_reduce_bp(GradBuilder& b, const ir::Node& n, const V&, const V&, const V& dy) {
  const AttrValue* mode = n.attrs.find("op");
  const std::string m = mode ? mode->s : "sum";
  if (m != "sum" && m != "mean")
    throw Error(Code::kUnimplemented, ir::with_loc("[all_reduce] the gradient of op '" + m +
                                                       "' is not defined; only sum and mean are differentiable",
                                                   n.loc));
  return {b.op("all_reduce", {dy[0]}, n.attrs)};
}

void register_collective_ops(OpRegistry& r) {
  OpDef d{"all_reduce",
          {"x"},
          {"y"},
          {AttrSpec{"op", AttrType::kString, false, AttrValue::of_string("sum")},
           AttrSpec{"group", AttrType::kInt, true, {}}},
          {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16, SPORA_DTYPE_I32, SPORA_DTYPE_I64,
           SPORA_DTYPE_U8, SPORA_DTYPE_BOOL},
          infer_all_reduce,
          "y = op over every rank of the communicator `group` of x (sum, prod, max, min, mean)"};
  d.in_place = true;  // the plugin reduces in place when y shares x's memory
  d.bprop = all_reduce_bp;
  r.add(std::move(d));
}

}  // namespace

bool is_collective_op(const OpDef& op) { return op.name == "all_reduce"; }

int32_t reduce_op_from_name(const std::string& name, const std::string& who) {
  if (name == "sum") return SPORA_REDUCE_SUM;
  if (name == "prod") return SPORA_REDUCE_PROD;
  if (name == "max") return SPORA_REDUCE_MAX;
  if (name == "min") return SPORA_REDUCE_MIN;
  if (name == "mean" || name == "avg") return SPORA_REDUCE_AVG;
  fail(Code::kInvalidArgument, "[{}] unknown reduce op '{}'; expected sum, prod, max, min or mean", who, name);
}

const char* reduce_op_name(int32_t op) {
  switch (op) {
    case SPORA_REDUCE_SUM: return "sum";
    case SPORA_REDUCE_PROD: return "prod";
    case SPORA_REDUCE_MAX: return "max";
    case SPORA_REDUCE_MIN: return "min";
    case SPORA_REDUCE_AVG: return "mean";
    default: return "?";
  }
}

SPORA_OP_FAMILY(register_collective_ops);

}  // namespace spora
