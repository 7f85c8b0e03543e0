// The convolution problem handed to oneDNN, shared by onednn_conv.cpp (conv2d
// and its gradients) and onednn_epilogue.cpp (conv2d_act, conv2d_add_act):
// checked canonical attributes (core/src/ops/conv.cpp) turned into oneDNN's
// strides, dilations and paddings, and the operand descriptors.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <string>

#include "cpu_kernels.h"

namespace spora::cpu {

struct ConvDesc {
  dnnl::memory::dims strides, dilates, pad_l, pad_r;
  // Plain layouts of the tensors (NCHW, [G]OIHW, X) and "any" layouts for
  // the primitive to choose from.
  dnnl::memory::desc x_user, w_user, y_user, b_user, x_any, w_any, y_any;
  int64_t out_channels = 0, groups = 1;
};

// oneDNN requires (in - extent + pad_l + pad_r) / stride + 1 == out. The
// canonical bottom/right padding satisfies it except for the backward-data
// ops, whose big side comes from input_shape or output_padding: there the
// right padding is derived from the sizes (it may be negative, which oneDNN
// accepts down to 1 - stride).
inline int64_t conv_right_pad(int64_t in, int64_t out, int64_t ext, int64_t stride, int64_t pad_l, int64_t pad_r) {
  const int64_t span = in - ext + pad_l + pad_r;
  if (span >= 0 && span / stride + 1 == out) return pad_r;
  return (out - 1) * stride + ext - in - pad_l;
}

// Fills `d` for the forward convolution x [N,C,H,W] * w [O,C/g,kH,kW] ->
// y [N,O,OH,OW] in `dt`; returns an error naming the op when the shapes or
// attributes do not fit.
inline spora_plugin_error_t* conv_desc(const plugin::KernelPlan& p, const plugin::Shape& x, const plugin::Shape& w,
                                       const plugin::Shape& y, dnnl::memory::data_type dt, ConvDesc* d) {
  using dnnl::memory;
  using tag = memory::format_tag;
  if (x.rank != 4 || w.rank != 4 || y.rank != 4) return plugin::invalid(p, "operands must be rank 4");
  const auto stride = p.attrs.get_ints("stride"), dil = p.attrs.get_ints("dilation"), pad = p.attrs.get_ints("padding");
  const int64_t groups = p.attrs.get_int("groups", 1);
  if (stride.size() != 2 || dil.size() != 2 || pad.size() != 4 || groups < 1 || stride[0] < 1 || stride[1] < 1 ||
      dil[0] < 1 || dil[1] < 1 || *std::min_element(pad.begin(), pad.end()) < 0)
    return plugin::invalid(p, "expects canonical stride, dilation, padding and groups attributes");
  constexpr int64_t kMax = int64_t{1} << 31;  // inference's bound; keeps the sizes below exact
  for (int64_t v : {stride[0], stride[1], dil[0], dil[1], pad[0], pad[1], pad[2], pad[3], groups, w.dims[2], w.dims[3]})
    if (v > kMax) return plugin::unsupported(p, "parameters beyond 2^31");
  const int64_t o_all = w.dims[0], cg = w.dims[1];
  if (x.dims[0] != y.dims[0] || y.dims[1] != o_all || o_all % groups != 0 || x.dims[1] % groups != 0 ||
      x.dims[1] / groups != cg)
    return plugin::invalid(p, "shapes " + x.str() + ", " + w.str() + ", " + y.str() + " do not fit groups");

  d->strides = {stride[0], stride[1]};
  d->dilates = {dil[0] - 1, dil[1] - 1};
  d->pad_l = {pad[0], pad[2]};
  d->pad_r.assign(2, 0);
  for (int i = 0; i < 2; ++i) {
    const int64_t ext = dil[i] * (w.dims[2 + i] - 1) + 1;
    d->pad_r[i] = conv_right_pad(x.dims[2 + i], y.dims[2 + i], ext, stride[i], pad[2 * i], pad[2 * i + 1]);
  }
  const memory::dims xd(x.dims, x.dims + 4), yd(y.dims, y.dims + 4);
  const memory::dims wd =
      groups > 1 ? memory::dims{groups, o_all / groups, cg, w.dims[2], w.dims[3]} : memory::dims(w.dims, w.dims + 4);
  d->x_user = memory::desc(xd, dt, tag::nchw);
  d->y_user = memory::desc(yd, dt, tag::nchw);
  d->w_user = memory::desc(wd, dt, groups > 1 ? tag::goihw : tag::oihw);
  d->b_user = memory::desc({o_all}, dt, tag::x);
  d->x_any = memory::desc(xd, dt, tag::any);
  d->y_any = memory::desc(yd, dt, tag::any);
  d->w_any = memory::desc(wd, dt, tag::any);
  d->out_channels = o_all;
  d->groups = groups;
  return nullptr;
}

}  // namespace spora::cpu
