// Collective ops in graphs over a communicator: all_reduce(x);
// all_gather(x), reduce_scatter(x) and all_to_all(x) along dims (what the SPMD pass,
// parallel/, inserts to move tensors between layouts).
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
//
// all_gather(x) {axis, group, size}: y is every rank's x concatenated along
// `axis` in rank order (size = the communicator's size, which inference
// needs and the run checks). reduce_scatter(x) {axis, group, size, op}: the
// reduction over ranks of x, of which rank r keeps block r along `axis`
// (x's dim must divide by size). Gradients, with the job's loss the sum of
// every rank's: all_gather's is reduce_scatter (sum) of the adjoints; a
// reduce_scatter (sum)'s is all_gather of them; mean scales by 1/size.
//
// all_to_all(x) {split_axis, concat_axis, group, size}: x cut into `size`
// blocks along split_axis, block j sent to rank j; the blocks received are
// concatenated along concat_axis in rank order (a split moving from one dim
// to another). Its gradient is all_to_all with the two axes swapped.
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


int64_t norm_axis(const OpDef& op, int64_t axis, int rank) {
  if (axis < -rank || axis >= rank)
    fail(Code::kInvalidArgument, "[{}] axis {} is out of range for rank {}", op.name, axis, rank);
  return axis < 0 ? axis + rank : axis;
}

void check_group(const OpDef& op, const Attrs& a) {
  if (a.get_int("group") <= 0)
    fail(Code::kInvalidArgument, "[{}] group {} is not a communicator id (spora_comm_id gives ids > 0)", op.name,
         a.get_int("group"));
  if (a.get_int("size") < 1) fail(Code::kInvalidArgument, "[{}] size {} must be >= 1", op.name, a.get_int("size"));
}

void infer_all_gather(const OpDef& op, const TensorMeta* in, OpCall& call) {
  check_group(op, call.attrs);
  if (in[0].shape.rank == 0) fail(Code::kInvalidArgument, "[{}] x must have rank >= 1", op.name);
  const int64_t axis = norm_axis(op, call.attrs.get_int("axis"), in[0].shape.rank);
  call.attrs.set("axis", AttrValue::of_int(axis));
  Shape s = in[0].shape;
  s.dims[axis] *= call.attrs.get_int("size");
  call.num_outputs = 1;
  call.out[0] = {in[0].dtype, s};
  call.result[0] = s;
}

void infer_reduce_scatter(const OpDef& op, const TensorMeta* in, OpCall& call) {
  check_group(op, call.attrs);
  const AttrValue* mode = call.attrs.find("op");
  reduce_op_from_name(mode ? mode->s : "", op.name);
  if (mode->s == "mean" && in[0].dtype == SPORA_DTYPE_BOOL)
    fail(Code::kInvalidArgument, "[{}] mean of bool is not defined", op.name);
  if (in[0].shape.rank == 0) fail(Code::kInvalidArgument, "[{}] x must have rank >= 1", op.name);
  const int64_t axis = norm_axis(op, call.attrs.get_int("axis"), in[0].shape.rank);
  call.attrs.set("axis", AttrValue::of_int(axis));
  const int64_t n = call.attrs.get_int("size");
  Shape s = in[0].shape;
  if (s.dims[axis] % n != 0)
    fail(Code::kInvalidArgument, "[{}] dim {} of shape {} does not divide over {} ranks", op.name, axis, s.str(), n);
  s.dims[axis] /= n;
  call.num_outputs = 1;
  call.out[0] = {in[0].dtype, s};
  call.result[0] = s;
}

Attrs without(const Attrs& a, const char* name) {
  Attrs out;
  for (const auto& [k, v] : a.items())
    if (k != name) out.set(k, v);
  return out;
}

V all_gather_bp(GradBuilder& b, const ir::Node& n, const V&, const V&, const V& dy) {
  Attrs a = n.attrs;
  a.set("op", AttrValue::of_string("sum"));
  return {b.op("reduce_scatter", {dy[0]}, a)};
}

V reduce_scatter_bp(GradBuilder& b, const ir::Node& n, const V&, const V&, const V& dy) {
  const std::string m = n.attrs.find("op")->s;
  if (m != "sum" && m != "mean")
    throw Error(Code::kUnimplemented, ir::with_loc("[reduce_scatter] the gradient of op '" + m +
                                                       "' is not defined; only sum and mean are differentiable",
                                                   n.loc));
  ir::Value g = b.op("all_gather", {dy[0]}, without(n.attrs, "op"));
  if (m == "mean") g = rules::mul(b, g, rules::k(b, 1.0 / static_cast<double>(n.attrs.get_int("size")), g));
  return {g};
}

void infer_all_to_all(const OpDef& op, const TensorMeta* in, OpCall& call) {
  check_group(op, call.attrs);
  const int rank = in[0].shape.rank;
  if (rank == 0) fail(Code::kInvalidArgument, "[{}] x must have rank >= 1", op.name);
  const int64_t sa = norm_axis(op, call.attrs.get_int("split_axis"), rank);
  const int64_t ca = norm_axis(op, call.attrs.get_int("concat_axis"), rank);
  call.attrs.set("split_axis", AttrValue::of_int(sa));
  call.attrs.set("concat_axis", AttrValue::of_int(ca));
  const int64_t n = call.attrs.get_int("size");
  Shape s = in[0].shape;
  if (s.dims[sa] % n != 0)
    fail(Code::kInvalidArgument, "[{}] split_axis {} of shape {} does not divide over {} ranks", op.name, sa, s.str(),
         n);
  s.dims[sa] /= n;
  s.dims[ca] *= n;
  call.num_outputs = 1;
  call.out[0] = {in[0].dtype, s};
  call.result[0] = s;
}

V all_to_all_bp(GradBuilder& b, const ir::Node& n, const V&, const V&, const V& dy) {
  Attrs a = n.attrs;
  a.set("split_axis", AttrValue::of_int(n.attrs.get_int("concat_axis")));
  a.set("concat_axis", AttrValue::of_int(n.attrs.get_int("split_axis")));
  return {b.op("all_to_all", {dy[0]}, a)};
}

const std::vector<DType> kCollectiveTypes = {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16,
                                             SPORA_DTYPE_I32, SPORA_DTYPE_I64, SPORA_DTYPE_U8,  SPORA_DTYPE_BOOL};

void register_collective_ops(OpRegistry& r) {
  const AttrSpec group{"group", AttrType::kInt, true, {}}, size{"size", AttrType::kInt, true, {}},
      axis{"axis", AttrType::kInt, false, AttrValue::of_int(0)};
  OpDef g{"all_gather", {"x"}, {"y"}, {axis, group, size}, kCollectiveTypes, infer_all_gather,
          "y = every rank's x of the communicator `group` (of `size` ranks) concatenated along axis, in rank order"};
  g.bprop = all_gather_bp;
  r.add(std::move(g));
  OpDef rs{"reduce_scatter",
           {"x"},
           {"y"},
           {axis, group, size, AttrSpec{"op", AttrType::kString, false, AttrValue::of_string("sum")}},
           kCollectiveTypes,
           infer_reduce_scatter,
           "y = block `rank` along axis of op (sum, prod, max, min, mean) over every rank of x; the dim must "
           "divide by size"};
  rs.bprop = reduce_scatter_bp;
  r.add(std::move(rs));
  OpDef a2a{"all_to_all",
            {"x"},
            {"y"},
            {AttrSpec{"split_axis", AttrType::kInt, false, AttrValue::of_int(0)},
             AttrSpec{"concat_axis", AttrType::kInt, false, AttrValue::of_int(0)}, group, size},
            kCollectiveTypes,
            infer_all_to_all,
            "x cut into size blocks along split_axis, block j to rank j; what each rank receives concatenated "
            "along concat_axis in rank order"};
  a2a.bprop = all_to_all_bp;
  r.add(std::move(a2a));
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

bool is_collective_op(const OpDef& op) {
  return op.name == "all_reduce" || op.name == "all_gather" || op.name == "reduce_scatter" ||
         op.name == "all_to_all";
}

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
