// 2-D convolution in NCHW: conv2d, conv2d_bias, conv2d_transpose and the
// gradients conv2d_grad_input / conv2d_grad_weight.
//
// Bias is a separate op (conv2d_bias) rather than an optional input: the
// registry has fixed input counts, and a distinct op lets plugins plan the
// fused bias (a oneDNN bias argument) without inspecting descriptors.
//
// Contract with kernels (what inference guarantees every plugin sees):
//  - All operands are dense rank-4 tensors of one dtype (f32, f64, f16,
//    bf16); bias is [O].
//  - Weights are [O, C/groups, kH, kW] for every op. conv2d_transpose's
//    weight [C_in, C_out/groups, kH, kW] is the same array seen from the
//    other side, so conv2d_transpose(x, w) is conv2d_grad_input(dy=x, w) and
//    one kernel serves both.
//  - Attributes are canonical: stride [sh, sw] > 0, dilation [dh, dw] > 0,
//    padding [top, bottom, left, right] >= 0 with pad_mode already resolved
//    (and rewritten to "explicit"), groups > 0 dividing both channel counts.
//    Output (oh, ow) of the forward conv reads input
//    (oh*sh - top + kh*dh, ow*sw - left + kw*dw) for each tap (kh, kw).
//  - conv2d / conv2d_bias / conv2d_grad_weight: the forward relation holds
//    exactly, OH = (H + top + bottom - dh*(kH-1) - 1) / sh + 1 (floor).
//  - conv2d_grad_input / conv2d_transpose: the big side's size is given
//    (input_shape, or output_padding), so bottom/right do not determine it;
//    kernels scatter with top/left only and drop taps that land outside.
//    input_shape / weight_shape / output_padding stay in the attributes (so
//    canonical attributes re-infer to the same call) but kernels never need
//    them: the operand shapes carry them.
//
// Gradient rules: conv2d/conv2d_bias use conv2d_grad_input/conv2d_grad_weight
// (the bias's gradient sums dy over N, H, W). The grads are bilinear, and
// their adjoints are convolutions again:
//   conv2d_grad_input(dy, w):  d(dy) = conv2d(g, w),  dw = conv2d_grad_weight(g, dy)
//   conv2d_grad_weight(x, dy): dx = conv2d_grad_input(dy, g), d(dy) = conv2d(x, g)
// conv2d_transpose(x, w) is the adjoint of conv2d(., w) (cropped to x's size
// where output_padding made the transposed output larger than conv2d's
// input would need): dx = conv2d(g, w) cropped, dw = conv2d_grad_weight(g, x
// zero-padded to conv2d(g, w)'s size).
#include <algorithm>
#include <array>
#include <limits>

#include "ir/op.h"
#include "ir/sharding.h"
#include "ops/rule_helpers.h"
#include "ops/shard_rules.h"
#include "support/error.h"

namespace spora {
namespace {

// Spatial parameters above this are certainly mistakes, and the bound keeps
// every size computation below far from int64 overflow.
constexpr int64_t kMaxParam = std::numeric_limits<int32_t>::max();

const std::vector<DType> kFloat = {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16};

int64_t mul(const char* op, int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) fail(Code::kInvalidArgument, "[{}] size computation overflows int64", op);
  return r;
}
int64_t add(const char* op, int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) fail(Code::kInvalidArgument, "[{}] size computation overflows int64", op);
  return r;
}

void check_rank4(const char* op, const char* what, const Shape& s, const char* layout) {
  if (s.rank != 4) fail(Code::kInvalidArgument, "[{}] {} must have rank 4 {}, got shape {}", op, what, layout, s.str());
}

// An ints attribute with one value per spatial dim; one value means both.
std::array<int64_t, 2> spatial_pair(const char* op, const Attrs& a, const char* name, int64_t min) {
  const auto& v = a.get_ints(name);
  if (v.size() != 1 && v.size() != 2)
    fail(Code::kInvalidArgument, "[{}] {} must have 1 or 2 values, got {}", op, name, AttrValue::of_ints(v).str());
  for (int64_t x : v) {
    if (x < min)
      fail(Code::kInvalidArgument, "[{}] {} must be {}, got {}", op, name, min > 0 ? "positive" : "non-negative", x);
    if (x > kMaxParam) fail(Code::kInvalidArgument, "[{}] {} {} is too large (at most {})", op, name, x, kMaxParam);
  }
  return {v[0], v.size() == 2 ? v[1] : v[0]};
}

// padding: 1 value (all sides), 2 ([h, w], both sides) or 4 (top, bottom,
// left, right).
std::array<int64_t, 4> padding4(const char* op, const Attrs& a) {
  const auto& v = a.get_ints("padding");
  if (v.size() != 1 && v.size() != 2 && v.size() != 4)
    fail(Code::kInvalidArgument, "[{}] padding must have 1, 2 or 4 values (top, bottom, left, right), got {}", op,
         AttrValue::of_ints(v).str());
  for (int64_t x : v) {
    if (x < 0) fail(Code::kInvalidArgument, "[{}] padding must be non-negative, got {}", op, x);
    if (x > kMaxParam) fail(Code::kInvalidArgument, "[{}] padding {} is too large (at most {})", op, x, kMaxParam);
  }
  if (v.size() == 1) return {v[0], v[0], v[0], v[0]};
  if (v.size() == 2) return {v[0], v[0], v[1], v[1]};
  return {v[0], v[1], v[2], v[3]};
}

struct Geom {
  int64_t stride[2], dil[2], pad[4];  // pad: top, bottom, left, right
  int64_t groups;
};

Geom parse_geom(const char* op, const Attrs& a) {
  Geom g;
  const auto s = spatial_pair(op, a, "stride", 1), d = spatial_pair(op, a, "dilation", 1);
  const auto p = padding4(op, a);
  for (int i = 0; i < 2; ++i) {
    g.stride[i] = s[i];
    g.dil[i] = d[i];
  }
  std::copy(p.begin(), p.end(), g.pad);
  g.groups = a.get_int("groups");
  if (g.groups < 1) fail(Code::kInvalidArgument, "[{}] groups must be positive, got {}", op, g.groups);
  if (g.groups > kMaxParam) fail(Code::kInvalidArgument, "[{}] groups {} is too large", op, g.groups);
  return g;
}

// Extent of a dilated kernel of size k.
int64_t extent(const char* op, int64_t k, int64_t dil) { return add(op, mul(op, dil, k - 1), 1); }

// Resolves pad_mode against the input's spatial size (h, w) and the kernel.
void resolve_pad_mode(const char* op, const Attrs& a, Geom& g, int64_t h, int64_t w, int64_t kh, int64_t kw) {
  const std::string& mode = a.find("pad_mode")->s;
  if (mode == "explicit") return;
  if (mode != "same" && mode != "valid")
    fail(Code::kInvalidArgument, "[{}] pad_mode must be \"explicit\", \"same\" or \"valid\", got \"{}\"", op, mode);
  for (int64_t p : g.pad)
    if (p != 0) fail(Code::kInvalidArgument, "[{}] padding must be zero when pad_mode is \"{}\"", op, mode);
  if (mode == "valid") return;
  // TF/PyTorch "same": output = ceil(in / stride); odd padding goes to the end.
  const int64_t in[2] = {h, w}, k[2] = {kh, kw};
  for (int i = 0; i < 2; ++i) {
    const int64_t out = in[i] / g.stride[i] + (in[i] % g.stride[i] != 0);
    const int64_t need = add(op, mul(op, std::max<int64_t>(out - 1, 0), g.stride[i]), extent(op, k[i], g.dil[i]));
    const int64_t total = std::max<int64_t>(need - in[i], 0);
    g.pad[2 * i] = total / 2;
    g.pad[2 * i + 1] = total - total / 2;
  }
}

void store_geom(Attrs& a, const Geom& g) {
  a.set("stride", AttrValue::of_ints({g.stride[0], g.stride[1]}));
  a.set("dilation", AttrValue::of_ints({g.dil[0], g.dil[1]}));
  a.set("padding", AttrValue::of_ints({g.pad[0], g.pad[1], g.pad[2], g.pad[3]}));
  a.set("groups", AttrValue::of_int(g.groups));
}

// Output shape of conv2d of x [N,C,H,W] with w [O,C/g,kH,kW]; checks channels.
Shape conv_forward_shape(const char* op, const Geom& g, const Shape& x, const Shape& w) {
  const int64_t c = x[1], o = w[0], cg = w[1], kh = w[2], kw = w[3];
  if (kh < 1 || kw < 1)
    fail(Code::kInvalidArgument, "[{}] kernel size must be positive, got weight shape {}", op, w.str());
  if (c % g.groups != 0)
    fail(Code::kInvalidArgument, "[{}] groups ({}) must divide the input channels ({})", op, g.groups, c);
  if (o % g.groups != 0)
    fail(Code::kInvalidArgument, "[{}] groups ({}) must divide the output channels ({}, weight dim 0)", op, g.groups,
         o);
  if (cg != c / g.groups)
    fail(Code::kInvalidArgument,
         "[{}] weight shape {} has {} input channels per group, but x has {} channels in {} group(s) ({} per group)",
         op, w.str(), cg, c, g.groups, c / g.groups);
  int64_t dims[4] = {x[0], o, 0, 0};
  for (int i = 0; i < 2; ++i) {
    const int64_t padded = add(op, add(op, x[2 + i], g.pad[2 * i]), g.pad[2 * i + 1]);
    const int64_t ext = extent(op, w[2 + i], g.dil[i]);
    if (padded < ext)
      fail(Code::kInvalidArgument,
           "[{}] the {}kernel ({}) is larger than the padded input ({}) along {}; the output would be empty", op,
           g.dil[i] > 1 ? "dilated " : "", ext, padded, i == 0 ? "height" : "width");
    dims[2 + i] = (padded - ext) / g.stride[i] + 1;
  }
  return Shape::from(dims, 4, op);
}

Shape shape_attr(const char* op, const Attrs& a, const char* name) {
  const auto& v = a.get_ints(name);
  if (v.size() != 4)
    fail(Code::kInvalidArgument, "[{}] {} must have 4 values, got {}", op, name, AttrValue::of_ints(v).str());
  return Shape::from(v.data(), 4, op);
}

void set_out(OpCall& call, DType dt, const Shape& s) {
  call.out[0] = {dt, s};
  call.result[0] = s;
}

void infer_conv2d(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const char* name = op.name.c_str();
  const Shape &x = in[0].shape, &w = in[1].shape;
  check_rank4(name, "x", x, "(N, C, H, W)");
  check_rank4(name, "w", w, "(O, C/groups, kH, kW)");
  Geom g = parse_geom(name, call.attrs);
  resolve_pad_mode(name, call.attrs, g, x[2], x[3], w[2], w[3]);
  const Shape y = conv_forward_shape(name, g, x, w);
  if (call.num_inputs == 3) {
    const Shape& b = in[2].shape;
    if (b.rank != 1 || b[0] != w[0])
      fail(Code::kInvalidArgument, "[{}] bias must have shape ({},) (the output channels), got {}", name, w[0],
           b.str());
  }
  store_geom(call.attrs, g);
  call.attrs.set("pad_mode", AttrValue::of_string("explicit"));
  set_out(call, in[0].dtype, y);
}

void infer_grad_input(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const char* name = op.name.c_str();
  const Shape &dy = in[0].shape, &w = in[1].shape;
  check_rank4(name, "dy", dy, "(N, O, OH, OW)");
  check_rank4(name, "w", w, "(O, C/groups, kH, kW)");
  const Shape x = shape_attr(name, call.attrs, "input_shape");
  Geom g = parse_geom(name, call.attrs);
  resolve_pad_mode(name, call.attrs, g, x[2], x[3], w[2], w[3]);
  const Shape y = conv_forward_shape(name, g, x, w);
  if (y != dy)
    fail(Code::kInvalidArgument, "[{}] dy has shape {}, but conv2d of input_shape {} with weight {} gives {}", name,
         dy.str(), x.str(), w.str(), y.str());
  store_geom(call.attrs, g);
  call.attrs.set("pad_mode", AttrValue::of_string("explicit"));
  set_out(call, in[0].dtype, x);
}

void infer_grad_weight(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const char* name = op.name.c_str();
  const Shape &x = in[0].shape, &dy = in[1].shape;
  check_rank4(name, "x", x, "(N, C, H, W)");
  check_rank4(name, "dy", dy, "(N, O, OH, OW)");
  const Shape w = shape_attr(name, call.attrs, "weight_shape");
  Geom g = parse_geom(name, call.attrs);
  resolve_pad_mode(name, call.attrs, g, x[2], x[3], w[2], w[3]);
  const Shape y = conv_forward_shape(name, g, x, w);
  if (y != dy)
    fail(Code::kInvalidArgument, "[{}] dy has shape {}, but conv2d of x {} with weight_shape {} gives {}", name,
         dy.str(), x.str(), w.str(), y.str());
  store_geom(call.attrs, g);
  call.attrs.set("pad_mode", AttrValue::of_string("explicit"));
  set_out(call, in[0].dtype, w);
}

// PyTorch ConvTranspose2d: out = (H-1)*s - top - bottom + d*(k-1) + 1 + output_padding.
void infer_transpose(const OpDef& op, const TensorMeta* in, OpCall& call) {
  const char* name = op.name.c_str();
  const Shape &x = in[0].shape, &w = in[1].shape;
  check_rank4(name, "x", x, "(N, C_in, H, W)");
  check_rank4(name, "w", w, "(C_in, C_out/groups, kH, kW)");
  const Geom g = parse_geom(name, call.attrs);
  const auto op_pad = spatial_pair(name, call.attrs, "output_padding", 0);
  const int64_t cin = x[1];
  if (w[0] != cin)
    fail(Code::kInvalidArgument, "[{}] weight shape {} must have the input channels ({}) in dim 0", name, w.str(), cin);
  if (cin % g.groups != 0)
    fail(Code::kInvalidArgument, "[{}] groups ({}) must divide the input channels ({})", name, g.groups, cin);
  if (w[2] < 1 || w[3] < 1)
    fail(Code::kInvalidArgument, "[{}] kernel size must be positive, got weight shape {}", name, w.str());
  int64_t dims[4] = {x[0], mul(name, w[1], g.groups), 0, 0};
  for (int i = 0; i < 2; ++i) {
    if (op_pad[i] >= std::max(g.stride[i], g.dil[i]))
      fail(Code::kInvalidArgument, "[{}] output_padding ({}) must be smaller than stride ({}) or dilation ({})", name,
           op_pad[i], g.stride[i], g.dil[i]);
    int64_t n = add(name, mul(name, x[2 + i] - 1, g.stride[i]), extent(name, w[2 + i], g.dil[i]));
    n = add(name, n, op_pad[i]) - g.pad[2 * i] - g.pad[2 * i + 1];
    if (n < 1)
      fail(Code::kInvalidArgument, "[{}] the output {} would be {}: padding is too large for input {} and kernel {}",
           name, i == 0 ? "height" : "width", n, x.str(), w.str());
    dims[2 + i] = n;
  }
  store_geom(call.attrs, g);
  call.attrs.set("output_padding", AttrValue::of_ints({op_pad[0], op_pad[1]}));
  set_out(call, in[0].dtype, Shape::from(dims, 4, name));
}

// 2 flops per multiply-add: every element on the forward output's side (y,
// dy, or the transpose's input) meets every weight of its group once.
Cost conv_cost(const OpCall& c, const Shape& small, const Shape& w) {
  Cost cost;
  const double per_image = static_cast<double>(small[2]) * static_cast<double>(small[3]);
  cost.flops = 2.0 * static_cast<double>(small[0]) * per_image * static_cast<double>(w.numel());
  for (int i = 0; i < c.num_inputs; ++i)
    cost.bytes += static_cast<double>(c.in[i].shape.numel()) * static_cast<double>(dtype_size(c.in[i].dtype));
  cost.bytes += static_cast<double>(c.out[0].shape.numel()) * static_cast<double>(dtype_size(c.out[0].dtype));
  return cost;
}
Cost forward_cost(const OpCall& c) { return conv_cost(c, c.out[0].shape, c.in[1].shape); }
Cost grad_input_cost(const OpCall& c) { return conv_cost(c, c.in[0].shape, c.in[1].shape); }
Cost grad_weight_cost(const OpCall& c) { return conv_cost(c, c.in[1].shape, c.out[0].shape); }

std::vector<AttrSpec> conv_attrs() {
  return {{"stride", AttrType::kInts, false, AttrValue::of_ints({1, 1})},
          {"padding", AttrType::kInts, false, AttrValue::of_ints({0, 0})},
          {"pad_mode", AttrType::kString, false, AttrValue::of_string("explicit")},
          {"dilation", AttrType::kInts, false, AttrValue::of_ints({1, 1})},
          {"groups", AttrType::kInt, false, AttrValue::of_int(1)}};
}

std::vector<AttrSpec> with(std::vector<AttrSpec> v, AttrSpec extra) {
  v.push_back(std::move(extra));
  return v;
}

// ---- gradient rules ------------------------------------------------------------

using rules::attrs_from;
using rules::dims_of;
using rules::GradBuilder;
using rules::shape_attr;
using rules::V;
using rules::Value;
using rules::Rules;

V conv2d_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  const Value dx = b.op("conv2d_grad_input", {dy[0], x[1]}, attrs_from(n.attrs, {}, {{"input_shape", shape_attr(b, x[0])}}));
  const Value dw =
      b.op("conv2d_grad_weight", {x[0], dy[0]}, attrs_from(n.attrs, {}, {{"weight_shape", shape_attr(b, x[1])}}));
  if (x.size() == 2) return {dx, dw};
  Attrs s;
  s.set("axes", AttrValue::of_ints({0, 2, 3}));
  return {dx, dw, b.op("sum", {dy[0]}, s)};
}

V conv2d_grad_input_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  const Value ddy = b.op("conv2d", {dy[0], x[1]}, attrs_from(n.attrs, {"input_shape"}));
  const Value dw = b.op("conv2d_grad_weight", {dy[0], x[0]},
                        attrs_from(n.attrs, {"input_shape"}, {{"weight_shape", shape_attr(b, x[1])}}));
  return {ddy, dw};
}

V conv2d_grad_weight_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  const Value dx = b.op("conv2d_grad_input", {x[1], dy[0]},
                        attrs_from(n.attrs, {"weight_shape"}, {{"input_shape", shape_attr(b, x[0])}}));
  const Value ddy = b.op("conv2d", {x[0], dy[0]}, attrs_from(n.attrs, {"weight_shape"}));
  return {dx, ddy};
}

V conv2d_transpose_bp(GradBuilder& b, const ir::Node& n, const V& x, const V&, const V& dy) {
  const Shape xs = b.meta(x[0]).shape;
  const Attrs conv = attrs_from(n.attrs, {"output_padding"}, {{"pad_mode", AttrValue::of_string("explicit")}});
  Value dx = b.op("conv2d", {dy[0], x[1]}, conv);
  const Shape full = b.meta(dx).shape;  // >= x's spatial size
  Value xp = x[0];
  if (full != xs) {
    Attrs s;
    s.set("starts", AttrValue::of_ints({0, 0, 0, 0}));
    s.set("ends", AttrValue::of_ints(dims_of(xs)));
    dx = b.op("slice", {dx}, s);
    Attrs p;
    p.set("pads", AttrValue::of_ints({0, 0, 0, 0, 0, full.dims[2] - xs.dims[2], 0, full.dims[3] - xs.dims[3]}));
    xp = b.op("pad", {x[0]}, p);
  }
  Attrs gw = conv;
  gw.set("weight_shape", shape_attr(b, x[1]));
  return {dx, b.op("conv2d_grad_weight", {dy[0], xp}, gw)};
}

// Sharding (ir/sharding.h) of conv2d and its gradients: the batch dim N may
// be split (every sample is independent) and, with groups == 1, the output
// channels O (each is its own filter); channels in and the spatial dims stay
// whole (a spatial split would need halo exchange). In the gradients a split
// of the dim summed over becomes a partial sum: O for grad_input, N for
// grad_weight. Attributes holding global shapes get the local ones.
bool shard_conv(const ShardQuery& q, ShardPlan& p) {
  const std::string& name = q.op->name;
  const bool grouped = q.attrs->get_int("groups") != 1;
  auto axis = [&](size_t in, int dim) {
    const TensorLayout& l = q.in_layouts[in];
    return l.free ? kReplicated : l.dims[static_cast<size_t>(dim)];
  };
  uint32_t used = 0;
  auto take = [&](int a, int64_t size) {
    if (a == kReplicated || (used & (1u << a)) || !shard::divides(q, size, a)) return kReplicated;
    used |= 1u << a;
    return a;
  };
  auto nchw = [](int n, int c) {
    TensorLayout l = TensorLayout::replicated(4);
    l.dims[0] = n;
    l.dims[1] = c;
    return l;
  };
  p.local_attrs = *q.attrs;
  if (name == "conv2d" || name == "conv2d_bias") {
    const int n = take(axis(0, 0), q.in[0].shape.dims[0]);
    const int o = grouped ? kReplicated : take(axis(1, 0), q.in[1].shape.dims[0]);
    p.in = {nchw(n, kReplicated), nchw(o, kReplicated)};
    if (name == "conv2d_bias") {
      TensorLayout b = TensorLayout::replicated(1);
      b.dims[0] = o;
      p.in.push_back(b);
    }
    p.out = {nchw(n, o)};
    return true;
  }
  if (name == "conv2d_grad_input") {  // (dy [N, O, ..], w [O, C, ..]) -> dx [N, C, ..]
    const int n = take(axis(0, 0), q.in[0].shape.dims[0]);
    int o = axis(0, 1) != kReplicated ? axis(0, 1) : axis(1, 0);
    o = grouped ? kReplicated : take(o, q.in[1].shape.dims[0]);
    p.in = {nchw(n, o), nchw(o, kReplicated)};
    TensorLayout dx = nchw(n, kReplicated);
    if (o != kReplicated) dx.partial = 1u << o;
    p.out = {dx};
    std::vector<int64_t> shape = q.attrs->get_ints("input_shape");
    if (n != kReplicated) shape[0] /= q.mesh[static_cast<size_t>(n)];
    p.local_attrs.set("input_shape", AttrValue::of_ints(shape));
    p.attrs_changed = true;
    return true;
  }
  if (name == "conv2d_grad_weight") {  // (x [N, C, ..], dy [N, O, ..]) -> dw [O, C/g, ..]
    const int n = take(axis(0, 0) != kReplicated ? axis(0, 0) : axis(1, 0), q.in[0].shape.dims[0]);
    const int o = grouped ? kReplicated : take(axis(1, 1), q.in[1].shape.dims[1]);
    p.in = {nchw(n, kReplicated), nchw(n, o)};
    TensorLayout dw = nchw(o, kReplicated);
    if (n != kReplicated) dw.partial = 1u << n;
    p.out = {dw};
    std::vector<int64_t> shape = q.attrs->get_ints("weight_shape");
    if (o != kReplicated) shape[0] /= q.mesh[static_cast<size_t>(o)];
    p.local_attrs.set("weight_shape", AttrValue::of_ints(shape));
    p.attrs_changed = true;
    return true;
  }
  return false;
}

}  // namespace

void register_conv_ops(OpRegistry& r) {
  auto reg = [&r](OpDef d, const Rules& rules) {
    rules.apply(d);
    r.add(std::move(d));
  };
  reg(OpDef{"conv2d",
            {"x", "w"},
            {"y"},
            conv_attrs(),
            kFloat,
            infer_conv2d,
            "2-D cross-correlation, NCHW; w is (O, C/groups, kH, kW); padding (1, 2 or 4 values: top, bottom, "
            "left, right) or pad_mode \"same\" | \"valid\"",
            {},
            false,
            false,
            forward_cost},
      {conv2d_bp, nullptr, true, shard_conv});
  reg(OpDef{"conv2d_bias",
            {"x", "w", "b"},
            {"y"},
            conv_attrs(),
            kFloat,
            infer_conv2d,
            "conv2d plus a per-output-channel bias b (O,)",
            {},
            false,
            false,
            forward_cost},
      {conv2d_bp, nullptr, true, shard_conv});
  reg(OpDef{"conv2d_grad_input",
            {"dy", "w"},
            {"dx"},
            with(conv_attrs(), {"input_shape", AttrType::kInts, true, {}}),
            kFloat,
            infer_grad_input,
            "gradient of conv2d with respect to x (shape input_shape), given dy and w",
            {},
            false,
            false,
            grad_input_cost},
      {conv2d_grad_input_bp, nullptr, true, shard_conv});
  reg(OpDef{"conv2d_grad_weight",
            {"x", "dy"},
            {"dw"},
            with(conv_attrs(), {"weight_shape", AttrType::kInts, true, {}}),
            kFloat,
            infer_grad_weight,
            "gradient of conv2d with respect to w (shape weight_shape), given x and dy",
            {},
            false,
            false,
            grad_weight_cost},
      {conv2d_grad_weight_bp, nullptr, true, shard_conv});
  reg(OpDef{"conv2d_transpose",
            {"x", "w"},
            {"y"},
            {{"stride", AttrType::kInts, false, AttrValue::of_ints({1, 1})},
             {"padding", AttrType::kInts, false, AttrValue::of_ints({0, 0})},
             {"output_padding", AttrType::kInts, false, AttrValue::of_ints({0, 0})},
             {"dilation", AttrType::kInts, false, AttrValue::of_ints({1, 1})},
             {"groups", AttrType::kInt, false, AttrValue::of_int(1)}},
            kFloat,
            infer_transpose,
            "transposed 2-D convolution (PyTorch ConvTranspose2d), NCHW; w is (C_in, C_out/groups, kH, kW)",
            {},
            false,
            false,
            grad_input_cost},
      {conv2d_transpose_bp});
}

SPORA_OP_FAMILY(register_conv_ops);

}  // namespace spora
