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
#include <algorithm>
#include <array>
#include <limits>

#include "ir/op.h"
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

}  // namespace

void register_pool_ops(OpRegistry& r) {
  r.add(OpDef{"max_pool2d",
              {"x"},
              {"y"},
              window_attrs(true),
              kFloat,
              infer_pool,
              "2-D max pooling, NCHW (PyTorch semantics; padding counts as -inf; stride defaults to kernel_size)",
              {},
              false,
              false,
              forward_cost});
  r.add(OpDef{"avg_pool2d",
              {"x"},
              {"y"},
              window_attrs(false),
              kFloat,
              infer_pool,
              "2-D average pooling, NCHW (PyTorch semantics, count_include_pad)",
              {},
              false,
              false,
              forward_cost});
  r.add(OpDef{"max_pool2d_grad",
              {"x", "dy"},
              {"dx"},
              window_attrs(true),
              kFloat,
              infer_max_pool_grad,
              "gradient of max_pool2d: dy routed to each window's first maximum in x",
              {},
              false,
              false,
              backward_cost});
  auto avg_grad = window_attrs(false);
  avg_grad.push_back({"input_shape", AttrType::kInts, true, {}});
  r.add(OpDef{"avg_pool2d_grad",
              {"dy"},
              {"dx"},
              avg_grad,
              kFloat,
              infer_avg_pool_grad,
              "gradient of avg_pool2d with respect to its input (shape input_shape)",
              {},
              false,
              false,
              backward_cost});
  r.add(OpDef{"adaptive_avg_pool2d",
              {"x"},
              {"y"},
              {{"output_size", AttrType::kInts, true, {}}},
              kFloat,
              infer_adaptive,
              "average over output_size bins of PyTorch's adaptive pooling, NCHW",
              {},
              false,
              false,
              forward_cost});
  r.add(OpDef{"adaptive_avg_pool2d_grad",
              {"dy"},
              {"dx"},
              {{"input_shape", AttrType::kInts, true, {}}},
              kFloat,
              infer_adaptive_grad,
              "gradient of adaptive_avg_pool2d with respect to its input (shape input_shape)",
              {},
              false,
              false,
              backward_cost});
}

SPORA_OP_FAMILY(register_pool_ops);

}  // namespace spora
