// Softmax family along one axis: softmax, log_softmax and their gradients.
//
// Contract with kernels (what inference hands them):
//  - attr "axis" is non-negative and names a dim of in[0];
//  - a rank-0 input is presented as shape (1,) with axis 0, so kernels never
//    see rank 0 (the user-visible result stays a scalar);
//  - softmax_grad / log_softmax_grad take in[0] = y, the forward op's
//    output, and in[1] = dy, with equal shapes and dtypes; out[0] = dx has
//    that shape too:
//      softmax_grad:     dx = y * (dy - sum(dy * y, axis))
//      log_softmax_grad: dx = dy - exp(y) * sum(dy, axis)
//    Taking y rather than x saves the backward pass a recomputation and is
//    what both forward ops' autodiff rules have at hand.
//  - the output dtype is the input dtype; f16/bf16 compute in f32.
#include "ir/op.h"
#include "support/error.h"

namespace spora {
namespace {

const std::vector<DType> kFloat = {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16};

Shape kernel_shape(const Shape& s) {
  if (s.rank > 0) return s;
  Shape one;
  one.push_back(1);
  return one;
}

void set_axis(const OpDef& op, const Shape& s, OpCall& call) {
  const int32_t ax = normalize_axis(call.attrs.get_int("axis"), s.rank, op.name.c_str());
  call.attrs.set("axis", AttrValue::of_int(ax));
}

void infer_softmax(const OpDef& op, const TensorMeta* in, OpCall& call) {
  set_axis(op, in[0].shape, call);
  call.in[0].shape = kernel_shape(in[0].shape);
  call.out[0] = call.in[0];
  call.result[0] = in[0].shape;
}

void infer_softmax_grad(const OpDef& op, const TensorMeta* in, OpCall& call) {
  if (in[0].shape != in[1].shape)
    fail(Code::kInvalidArgument, "[{}] y has shape {} but dy has shape {}; they must match", op.name,
         in[0].shape.str(), in[1].shape.str());
  set_axis(op, in[0].shape, call);
  call.in[0].shape = call.in[1].shape = kernel_shape(in[0].shape);
  call.out[0] = call.in[0];
  call.result[0] = in[0].shape;
}

// exp, a max and a sum per element; the grads read two inputs.
Cost softmax_cost(const OpCall& c) {
  const double n = static_cast<double>(c.out[0].shape.numel());
  const double es = static_cast<double>(dtype_size(c.out[0].dtype));
  return Cost{4 * n, es * n * (c.num_inputs + 1)};
}

void add(OpRegistry& r, const char* name, std::vector<std::string> inputs, InferFn infer, const char* doc) {
  std::string out = inputs.size() == 1 ? "y" : "dx";
  r.add(OpDef{name,
              std::move(inputs),
              {std::move(out)},
              {{"axis", AttrType::kInt, false, AttrValue::of_int(-1)}},
              kFloat,
              infer,
              doc,
              {},
              false,
              false,
              softmax_cost});
}

}  // namespace

void register_softmax_ops(OpRegistry& r) {
  add(r, "softmax", {"x"}, infer_softmax, "exp(x) / sum(exp(x)) along axis, computed stably");
  add(r, "log_softmax", {"x"}, infer_softmax, "x - log(sum(exp(x))) along axis, computed stably");
  add(r, "softmax_grad", {"y", "dy"}, infer_softmax_grad,
      "gradient of softmax from its output y: y * (dy - sum(dy * y, axis))");
  add(r, "log_softmax_grad", {"y", "dy"}, infer_softmax_grad,
      "gradient of log_softmax from its output y: dy - exp(y) * sum(dy, axis)");
}

SPORA_OP_FAMILY(register_softmax_ops);

}  // namespace spora
