// 2-D pooling in NCHW: max_pool2d, avg_pool2d, adaptive_avg_pool2d and their
// gradients, with PyTorch semantics.
//
// Contract with kernels (what inference guarantees every plugin sees):
//  - Operands are dense rank-4 tensors of one dtype (f32, f64, f16, bf16)
//    whose spatial dims are >= 1 (N and C may be 0).
//  - max/avg attributes are canonical: kernel_size [kh, kw] > 0, stride
//    [sh, sw] > 0 (the kernel size when not given), padding [top, bottom,
//    left, right], each side at most half the kernel size (PyTorch's rule; it
//    keeps every window's first tap inside the input or its leading padding),
//    and for max_pool2d dilation [dh, dw] > 0.
//  - Output (oh, ow) covers input rows oh*sh - top + i*dh, i < kh (columns
//    alike). ceil_mode is already reflected in the output shape: the last
//    window may reach past the bottom/right padding; kernels ignore taps
//    outside [0, H) for max, and for avg the divisor is, as in PyTorch, the
//    window clipped to [-top, H + bottom) when count_include_pad, else the
//    window clipped to the input.
//  - max_pool2d_grad(x, dy) recomputes each window's argmax from x instead of
//    saving indices: the gradient goes to the first maximum in row-major
//    window order (a NaN counts as the maximum), matching max_pool2d.
//  - adaptive_avg_pool2d: bin oh covers rows [floor(oh*H/OH), ceil((oh+1)*H/OH));
//    the sizes come from the operand shapes (output_size / input_shape stay
//    in the attributes only so canonical attributes re-infer the same call).
//
// Gradient rules use the *_grad ops. avg_pool2d_grad and
// adaptive_avg_pool2d_grad are linear maps whose adjoints are the forward
// poolings. max_pool2d_grad is piecewise constant in x (no gradient) and
// linear in dy: d(dy) at each window is g at the window's argmax, selected
// tap by tap with the kernel's rule (first maximum in row-major window
// order, a NaN wins, taps outside the input never count).
#include <algorithm>
#include <array>
#include <limits>

#include "ir/op.h"
#include "ops/rule_helpers.h"
#include "support/error.h"

namespace spora {
namespace {

constexpr int64_t kMaxParam = std::numeric_limits<int32_t>::max();

const std::vector<DType> kFloat = {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16};

void check_input(const char* op, const char* what, const Shape& s, bool spatial) {
  if (s.rank != 4)
    fail(Code::kInvalidArgument, "[{}] {} must have rank 4 (N, C, H, W), got shape {}", op, what, s.str());
  if (spatial && (s[2] < 1 || s[3] < 1))
    fail(Code::kInvalidArgument, "[{}] {} must have non-empty spatial dims (H, W), got shape {}", op, what, s.str());
}

std::array<int64_t, 2> spatial_pair(const char* op, const std::vector<int64_t>& v, const char* name, int64_t min) {
  if (v.size() != 1 && v.size() != 2)
    fail(Code::kInvalidArgument, "[{}] {} must have 1 or 2 values, got {}", op, name, AttrValue::of_ints(v).str());
  for (int64_t x : v) {
    if (x < min)
      fail(Code::kInvalidArgument, "[{}] {} must be {}, got {}", op, name, min > 0 ? "positive" : "non-negative", x);
    if (x > kMaxParam) fail(Code::kInvalidArgument, "[{}] {} {} is too large (at most {})", op, name, x, kMaxParam);
  }
  return {v[0], v.size() == 2 ? v[1] : v[0]};
}

struct Window {
  int64_t k[2], stride[2], dil[2] = {1, 1}, pad[4];  // pad: top, bottom, left, right
  bool ceil = false;
};

Window parse_window(const char* op, const Attrs& a, bool dilated) {
  Window w;
  const auto k = spatial_pair(op, a.get_ints("kernel_size"), "kernel_size", 1);
  const auto& sv = a.get_ints("stride");
  const auto s = sv.empty() ? k : spatial_pair(op, sv, "stride", 1);
  const auto d = dilated ? spatial_pair(op, a.get_ints("dilation"), "dilation", 1) : std::array<int64_t, 2>{1, 1};
  for (int i = 0; i < 2; ++i) {
    w.k[i] = k[i];
    w.stride[i] = s[i];
    w.dil[i] = d[i];
  }
  const auto& p = a.get_ints("padding");
  if (p.size() != 1 && p.size() != 2 && p.size() != 4)
    fail(Code::kInvalidArgument, "[{}] padding must have 1, 2 or 4 values (top, bottom, left, right), got {}", op,
         AttrValue::of_ints(p).str());
  for (size_t i = 0; i < 4; ++i) {
    const size_t at = p.size() == 4 ? i : p.size() == 2 ? i / 2 : 0;
    w.pad[i] = p[at];
    const int64_t k_dim = w.k[i / 2];
    if (w.pad[i] < 0) fail(Code::kInvalidArgument, "[{}] padding must be non-negative, got {}", op, w.pad[i]);
    if (w.pad[i] > k_dim / 2)
      fail(Code::kInvalidArgument, "[{}] padding ({}) must be at most half the kernel size ({})", op, w.pad[i], k_dim);
  }
  w.ceil = a.get_bool("ceil_mode");
  return w;
}

void store_window(Attrs& a, const Window& w, bool dilated) {
  a.set("kernel_size", AttrValue::of_ints({w.k[0], w.k[1]}));
  a.set("stride", AttrValue::of_ints({w.stride[0], w.stride[1]}));
  a.set("padding", AttrValue::of_ints({w.pad[0], w.pad[1], w.pad[2], w.pad[3]}));
  if (dilated) a.set("dilation", AttrValue::of_ints({w.dil[0], w.dil[1]}));
}

// PyTorch's pooling_output_shape, with separate leading/trailing padding.
Shape pool_shape(const char* op, const Window& w, const Shape& x) {
  int64_t dims[4] = {x[0], x[1], 0, 0};
  for (int i = 0; i < 2; ++i) {
    const int64_t in = x[2 + i], lead = w.pad[2 * i];
    // Bounded so that the window arithmetic below cannot overflow.
    if (in > (int64_t{1} << 60))
      fail(Code::kInvalidArgument, "[{}] input dimension {} is too large for pooling", op, in);
    const int64_t padded = in + lead + w.pad[2 * i + 1];
    const int64_t ext = w.dil[i] * (w.k[i] - 1) + 1;
    if (padded < ext)
      fail(Code::kInvalidArgument,
           "[{}] the {}kernel ({}) is larger than the padded input ({}) along {}; the output would be empty", op,
           w.dil[i] > 1 ? "dilated " : "", ext, padded, i == 0 ? "height" : "width");
    const int64_t span = padded - ext;
    int64_t out = (w.ceil ? span / w.stride[i] + (span % w.stride[i] != 0) : span / w.stride[i]) + 1;
    // A window may not start in the trailing padding.
    if (w.ceil && (out - 1) * w.stride[i] >= in + lead) --out;
    dims[2 + i] = out;
  }
  return Shape::from(dims, 4, op);
}

Shape shape_attr(const char* op, const Attrs& a, const char* name) {
  const auto& v = a.get_ints(name);
  if (v.size() != 4)
    fail(Code::kInvalidArgument, "[{}] {} must have 4 values (N, C, H, W), got {}", op, name,
         AttrValue::of_ints(v).str());
  return Shape::from(v.data(), 4, op);
}

void set_out(OpCall& call, DType dt, const Shape& s) {
  call.out[0] = {dt, s};
  call.result[0] = s;
}

bool is_max(const OpDef& op) { return op.name.rfind("max_", 0) == 0; }

void infer_pool(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const char* name = op.name.c_str();
  check_input(name, "x", in[0].shape, true);
  const Window w = parse_window(name, call.attrs, is_max(op));
  const Shape y = pool_shape(name, w, in[0].shape);
  store_window(call.attrs, w, is_max(op));
  set_out(call, in[0].dtype, y);
}

void infer_max_pool_grad(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const char* name = op.name.c_str();
  check_input(name, "x", in[0].shape, true);
  check_input(name, "dy", in[1].shape, false);
  const Window w = parse_window(name, call.attrs, true);
  const Shape y = pool_shape(name, w, in[0].shape);
  if (y != in[1].shape)
    fail(Code::kInvalidArgument, "[{}] dy has shape {}, but max_pool2d of x {} gives {}", name, in[1].shape.str(),
         in[0].shape.str(), y.str());
  store_window(call.attrs, w, true);
  set_out(call, in[0].dtype, in[0].shape);
}

void infer_avg_pool_grad(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const char* name = op.name.c_str();
  check_input(name, "dy", in[0].shape, false);
  const Shape x = shape_attr(name, call.attrs, "input_shape");
  check_input(name, "input_shape", x, true);
  const Window w = parse_window(name, call.attrs, false);
  const Shape y = pool_shape(name, w, x);
  if (y != in[0].shape)
    fail(Code::kInvalidArgument, "[{}] dy has shape {}, but avg_pool2d of input_shape {} gives {}", name,
         in[0].shape.str(), x.str(), y.str());
  store_window(call.attrs, w, false);
  set_out(call, in[0].dtype, x);
}

void infer_adaptive(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const char* name = op.name.c_str();
  const Shape& x = in[0].shape;
  check_input(name, "x", x, true);
  const auto o = spatial_pair(name, call.attrs.get_ints("output_size"), "output_size", 1);
  call.attrs.set("output_size", AttrValue::of_ints({o[0], o[1]}));
  const int64_t dims[4] = {x[0], x[1], o[0], o[1]};
  set_out(call, in[0].dtype, Shape::from(dims, 4, name));
}

void infer_adaptive_grad(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const char* name = op.name.c_str();
  const Shape& dy = in[0].shape;
  check_input(name, "dy", dy, true);
  const Shape x = shape_attr(name, call.attrs, "input_shape");
  check_input(name, "input_shape", x, true);
  if (x[0] != dy[0] || x[1] != dy[1])
    fail(Code::kInvalidArgument, "[{}] dy {} and input_shape {} differ in batch or channels", name, dy.str(), x.str());
  set_out(call, in[0].dtype, x);
}

// One add or compare per window tap of every element on the small side;
// adaptive pooling touches each element of the big side about once.
Cost window_cost(const OpCall& c, const Shape& small, const Shape& big) {
  Cost cost;
  const AttrValue* k = c.attrs.find("kernel_size");
  cost.flops =
      k ? static_cast<double>(small.numel()) * static_cast<double>(k->ints[0]) * static_cast<double>(k->ints[1])
        : static_cast<double>(big.numel());
  for (int i = 0; i < c.num_inputs; ++i)
    cost.bytes += static_cast<double>(c.in[i].shape.numel()) * static_cast<double>(dtype_size(c.in[i].dtype));
  cost.bytes += static_cast<double>(c.out[0].shape.numel()) * static_cast<double>(dtype_size(c.out[0].dtype));
  return cost;
}
Cost forward_cost(const OpCall& c) { return window_cost(c, c.out[0].shape, c.in[0].shape); }
Cost backward_cost(const OpCall& c) { return window_cost(c, c.in[c.num_inputs - 1].shape, c.out[0].shape); }

std::vector<AttrSpec> window_attrs(bool max) {
  std::vector<AttrSpec> v = {{"kernel_size", AttrType::kInts, true, {}},
                             {"stride", AttrType::kInts, false, AttrValue::of_ints({})},
                             {"padding", AttrType::kInts, false, AttrValue::of_ints({0, 0})}};
  if (max) v.push_back({"dilation", AttrType::kInts, false, AttrValue::of_ints({1, 1})});
  v.push_back({"ceil_mode", AttrType::kBool, false, AttrValue::of_bool(false)});
  if (!max) v.push_back({"count_include_pad", AttrType::kBool, false, AttrValue::of_bool(true)});
  return v;
}

// ---- gradient rules ------------------------------------------------------------

using rules::attrs_from;
using rules::dims_of;
using rules::GradBuilder;
using rules::Rules;
using rules::shape_attr;
using rules::V;
using rules::Value;

V max_pool2d_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  return {b.op("max_pool2d_grad", {x[0], dy[0]}, n.attrs)};
}

V avg_pool2d_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  return {b.op("avg_pool2d_grad", {dy[0]}, attrs_from(n.attrs, {}, {{"input_shape", shape_attr(b, x[0])}}))};
}

V avg_pool2d_grad_bp(GradBuilder& b, const ir::Node& n, const V&, const V&, const V& dy) {
  return {b.op("avg_pool2d", {dy[0]}, attrs_from(n.attrs, {"input_shape"}))};
}

V adaptive_avg_pool2d_bp(GradBuilder& b, const ir::Node&, const V& x, const V&, const V& dy) {
  Attrs a;
  a.set("input_shape", shape_attr(b, x[0]));
  return {b.op("adaptive_avg_pool2d_grad", {dy[0]}, a)};
}

V adaptive_avg_pool2d_grad_bp(GradBuilder& b, const ir::Node&, const V& x, const V&, const V& dy) {
  const Shape s = b.meta(x[0]).shape;
  Attrs a;
  a.set("output_size", AttrValue::of_ints({s.dims[2], s.dims[3]}));
  return {b.op("adaptive_avg_pool2d", {dy[0]}, a)};
}

// max_pool2d_grad(x, dy) sends dy[o] to the argmax of window o; its
// adjoint in dy reads g there. Each window tap (i, j) is a strided slice of
// x (and g) padded so that every window fits; a running selection keeps the
// first maximum like the kernel.
V max_pool2d_grad_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  const TensorMeta xm = b.meta(x[0]);
  const Shape xs = xm.shape, ys = b.meta(x[1]).shape;
  const auto& ks = n.attrs.get_ints("kernel_size");
  const auto& st = n.attrs.get_ints("stride");
  const auto& pd = n.attrs.get_ints("padding");
  const auto& dl = n.attrs.get_ints("dilation");
  const int64_t oh = ys.dims[2], ow = ys.dims[3], h = xs.dims[2], w = xs.dims[3];
  if (ys.numel() == 0) {
    Attrs z;
    z.set("shape", AttrValue::of_ints(dims_of(ys)));
    z.set("dtype", AttrValue::of_string(dtype_name(b.meta(x[1]).dtype)));
    return {Value{}, b.op("zeros", {}, z)};
  }
  // Padded extents that hold every window (ceil_mode may reach past the
  // trailing padding).
  const int64_t hp = std::max(h + pd[0] + pd[1], (oh - 1) * st[0] + (ks[0] - 1) * dl[0] + 1);
  const int64_t wp = std::max(w + pd[2] + pd[3], (ow - 1) * st[1] + (ks[1] - 1) * dl[1] + 1);
  Attrs pa;
  pa.set("pads", AttrValue::of_ints({0, 0, 0, 0, pd[0], hp - h - pd[0], pd[2], wp - w - pd[2]}));
  const Value xp = b.op("pad", {x[0]}, pa);
  const Value gp = b.op("pad", {dy[0]}, pa);
  const DType d = xm.dtype;
  Shape plane;
  for (int64_t v : {int64_t{1}, int64_t{1}, oh, ow}) plane.push_back(v);
  Value best, sel, have;
  for (int64_t i = 0; i < ks[0]; ++i) {
    for (int64_t j = 0; j < ks[1]; ++j) {
      // Which windows have this tap inside the input (known statically).
      std::vector<uint8_t> inside(static_cast<size_t>(oh * ow));
      bool any = false, all = true;
      for (int64_t r = 0; r < oh; ++r)
        for (int64_t q = 0; q < ow; ++q) {
          const int64_t ih = r * st[0] - pd[0] + i * dl[0], iw = q * st[1] - pd[2] + j * dl[1];
          const bool in = ih >= 0 && ih < h && iw >= 0 && iw < w;
          inside[static_cast<size_t>(r * ow + q)] = in;
          any = any || in;
          all = all && in;
        }
      if (!any) continue;
      Attrs sa;
      sa.set("begin", AttrValue::of_ints({0, 0, i * dl[0], j * dl[1]}));
      sa.set("end", AttrValue::of_ints({xs.dims[0], xs.dims[1], i * dl[0] + (oh - 1) * st[0] + 1,
                                        j * dl[1] + (ow - 1) * st[1] + 1}));
      sa.set("strides", AttrValue::of_ints({1, 1, st[0], st[1]}));
      const Value xt = b.op("strided_slice", {xp}, sa);
      const Value gt = b.op("strided_slice", {gp}, sa);
      const Value valid = all ? Value{} : b.graph().add_constant(SPORA_DTYPE_BOOL, plane, inside, n.loc);
      if (!best.valid()) {  // the first tap that is inside anywhere
        const Value zero = b.scalar(0, d);
        best = valid.valid() ? b.op("where", {valid, xt, zero}) : xt;
        sel = valid.valid() ? b.op("where", {valid, gt, zero}) : gt;
        have = valid;
        continue;
      }
      // A strictly larger value, or the first NaN, takes over; so does any
      // tap of a window that had none inside yet.
      const Value nan_t = b.op("not_equal", {xt, xt});
      const Value nan_best = b.op("not_equal", {best, best});
      Value take = b.op("logical_or", {b.op("greater", {xt, best}),
                                       b.op("logical_and", {nan_t, b.op("logical_not", {nan_best})})});
      if (have.valid()) take = b.op("logical_or", {take, b.op("logical_not", {have})});
      if (valid.valid()) take = b.op("logical_and", {take, valid});
      best = b.op("where", {take, xt, best});
      sel = b.op("where", {take, gt, sel});
      if (have.valid()) have = valid.valid() ? b.op("logical_or", {have, valid}) : Value{};
    }
  }
  return {Value{}, sel};
}

}  // namespace

void register_pool_ops(OpRegistry& r) {
  auto reg = [&r](OpDef d, const Rules& rules) {
    rules.apply(d);
    r.add(std::move(d));
  };
  reg(OpDef{"max_pool2d",
            {"x"},
            {"y"},
            window_attrs(true),
            kFloat,
            infer_pool,
            "2-D max pooling, NCHW (PyTorch semantics; padding counts as -inf; stride defaults to kernel_size)",
            {},
            false,
            false,
            forward_cost},
      {max_pool2d_bp});
  reg(OpDef{"avg_pool2d",
            {"x"},
            {"y"},
            window_attrs(false),
            kFloat,
            infer_pool,
            "2-D average pooling, NCHW (PyTorch semantics, count_include_pad)",
            {},
            false,
            false,
            forward_cost},
      {avg_pool2d_bp});
  reg(OpDef{"max_pool2d_grad",
            {"x", "dy"},
            {"dx"},
            window_attrs(true),
            kFloat,
            infer_max_pool_grad,
            "gradient of max_pool2d: dy routed to each window's first maximum in x",
            {},
            false,
            false,
            backward_cost},
      {max_pool2d_grad_bp});
  auto avg_grad = window_attrs(false);
  avg_grad.push_back({"input_shape", AttrType::kInts, true, {}});
  reg(OpDef{"avg_pool2d_grad",
            {"dy"},
            {"dx"},
            avg_grad,
            kFloat,
            infer_avg_pool_grad,
            "gradient of avg_pool2d with respect to its input (shape input_shape)",
            {},
            false,
            false,
            backward_cost},
      {avg_pool2d_grad_bp});
  reg(OpDef{"adaptive_avg_pool2d",
            {"x"},
            {"y"},
            {{"output_size", AttrType::kInts, true, {}}},
            kFloat,
            infer_adaptive,
            "average over output_size bins of PyTorch's adaptive pooling, NCHW",
            {},
            false,
            false,
            forward_cost},
      {adaptive_avg_pool2d_bp});
  reg(OpDef{"adaptive_avg_pool2d_grad",
            {"dy"},
            {"dx"},
            {{"input_shape", AttrType::kInts, true, {}}},
            kFloat,
            infer_adaptive_grad,
            "gradient of adaptive_avg_pool2d with respect to its input (shape input_shape)",
            {},
            false,
            false,
            backward_cost},
      {adaptive_avg_pool2d_grad_bp});
}

SPORA_OP_FAMILY(register_pool_ops);

}  // namespace spora
