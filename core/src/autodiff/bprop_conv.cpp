// Gradient rules of convolution and pooling.
//
// conv2d/conv2d_bias use conv2d_grad_input/conv2d_grad_weight (the bias's
// gradient sums dy over N, H, W). The grads are bilinear, and their
// adjoints are convolutions again:
//   conv2d_grad_input(dy, w):  d(dy) = conv2d(g, w),  dw = conv2d_grad_weight(g, dy)
//   conv2d_grad_weight(x, dy): dx = conv2d_grad_input(dy, g), d(dy) = conv2d(x, g)
// conv2d_transpose(x, w) is the adjoint of conv2d(., w) (cropped to x's size
// where output_padding made the transposed output larger than conv2d's
// input would need): dx = conv2d(g, w) cropped, dw = conv2d_grad_weight(g, x
// zero-padded to conv2d(g, w)'s size).
//
// Pooling uses the *_grad ops. avg_pool2d_grad and adaptive_avg_pool2d_grad
// are linear maps whose adjoints are the forward poolings. max_pool2d_grad
// is piecewise constant in x (no gradient) and linear in dy: d(dy) at each
// window is g at the window's argmax, selected here tap by tap with the
// kernel's rule (first maximum in row-major window order, a NaN wins, taps
// outside the input never count).
#include <algorithm>

#include "autodiff/bprop.h"
#include "autodiff/rule_helpers.h"

namespace spora::autodiff {
namespace {

// The node's attributes without `drop`, plus `extra` (name, value) pairs.
Attrs attrs_from(const Attrs& from, std::initializer_list<const char*> drop,
                 std::initializer_list<std::pair<const char*, AttrValue>> extra = {}) {
  Attrs a;
  for (const auto& [name, value] : from.items()) {
    bool skip = false;
    for (const char* d : drop) skip = skip || name == d;
    if (!skip) a.set(name, value);
  }
  for (const auto& [name, value] : extra) a.set(name, value);
  return a;
}

AttrValue shape_attr(GradBuilder& b, Value v) { return AttrValue::of_ints(dims_of(b.meta(v).shape)); }

// ---- convolution --------------------------------------------------------------

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

// ---- pooling ------------------------------------------------------------------

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

void register_rules() {
  register_bprop("conv2d", conv2d_bp);
  register_bprop("conv2d_bias", conv2d_bp);
  register_bprop("conv2d_grad_input", conv2d_grad_input_bp);
  register_bprop("conv2d_grad_weight", conv2d_grad_weight_bp);
  register_bprop("conv2d_transpose", conv2d_transpose_bp);
  register_bprop("max_pool2d", max_pool2d_bp);
  register_bprop("max_pool2d_grad", max_pool2d_grad_bp);
  register_bprop("avg_pool2d", avg_pool2d_bp);
  register_bprop("avg_pool2d_grad", avg_pool2d_grad_bp);
  register_bprop("adaptive_avg_pool2d", adaptive_avg_pool2d_bp);
  register_bprop("adaptive_avg_pool2d_grad", adaptive_avg_pool2d_grad_bp);
}
SPORA_BPROPS(register_rules);

}  // namespace
}  // namespace spora::autodiff
