// Elementwise ops: unary maps and binary ops with numpy broadcasting.
#include "ops/registry.h"
#include "support/error.h"

namespace spora {
namespace {

const std::vector<DType> kFloat = {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16};

void infer_unary(const OpDef&, const TensorMeta* in, OpCall& call) {
  call.out[0] = in[0];
  call.result[0] = in[0].shape;
}

// Output is the broadcast shape; kernels get inputs padded to its rank so
// they only handle size-1 dims, never rank differences.
void infer_binary(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const Shape out = broadcast_shapes(in[0].shape, in[1].shape, op.name.c_str());
  call.in[0].shape = pad_to_rank(in[0].shape, out.rank);
  call.in[1].shape = pad_to_rank(in[1].shape, out.rank);
  call.out[0] = {in[0].dtype, out};
  call.result[0] = out;
}

void unary(OpRegistry& r, const char* name, const char* doc) {
  r.add(OpDef{name, {"x"}, {"y"}, {}, kFloat, infer_unary, doc});
}

void binary(OpRegistry& r, const char* name, const char* doc) {
  r.add(OpDef{name, {"x", "y"}, {"z"}, {}, kFloat, infer_binary, doc});
}

}  // namespace

void register_elementwise_ops(OpRegistry& r) {
  unary(r, "neg", "-x");
  unary(r, "exp", "e^x");
  unary(r, "log", "natural logarithm");
  unary(r, "tanh", "hyperbolic tangent");
  unary(r, "relu", "max(x, 0)");
  unary(r, "sigmoid", "1 / (1 + e^-x)");
  binary(r, "add", "x + y, broadcasting");
  binary(r, "sub", "x - y, broadcasting");
  binary(r, "mul", "x * y, broadcasting");
  binary(r, "div", "x / y, broadcasting");
}

SPORA_OP_FAMILY(register_elementwise_ops);

}  // namespace spora
