// ONNX converters: convolution, pooling, batch normalisation (inference).
// Spora's conv and pool ops are 2-D, NCHW (1-D ones run as 2-D with a
// height of 1; 3-D is refused); ONNX pads are [top, left, bottom, right]
// (begins, then ends), Spora's [top, bottom, left, right].
#include "io/onnx_import.h"

namespace spora::io::onnx {
namespace {

void need_4d(Ctx& c, ir::Value x) {
  if (c.meta(x).shape.rank != 4)
    c.error("only 2-D (NCHW, rank-4) inputs are supported, got shape " + c.meta(x).shape.str());
}

// The spatial rank of a convolution's or pooling's input (N, C, spatial...):
// 2 maps directly, 1 as 2-D with a height of 1; 3-D has no op in Spora's
// library.
int spatial_rank(Ctx& c, ir::Value x) {
  const Shape& s = c.meta(x).shape;
  if (s.rank == 5)
    c.error("3-D convolution and pooling (rank-5 input) are not supported: Spora's op library has 1-D (as 2-D) "
            "and 2-D only, got shape " + s.str());
  if (s.rank != 3 && s.rank != 4) c.error("input must be (N, C, L) or (N, C, H, W), got shape " + s.str());
  return s.rank - 2;
}

// (N, C, L) as (N, C, 1, L); the inverse drops that axis again.
ir::Value lift(Ctx& c, ir::Value x) {
  Attrs a;
  a.set("axes", AttrValue::of_ints({2}));
  return c.op("expand_dims", {x}, a);
}
ir::Value unlift(Ctx& c, ir::Value y) {
  Attrs a;
  a.set("axes", AttrValue::of_ints({2}));
  return c.op("squeeze", {y}, a);
}

// A per-axis attribute of `r` values as the 2-D form's 2 (1-D: the added
// height gets `lifted`).
std::vector<int64_t> spatial_attr(Ctx& c, const char* name, int64_t dflt, int r, int64_t lifted) {
  std::vector<int64_t> v = c.attr_ints(name, std::vector<int64_t>(static_cast<size_t>(r), dflt));
  if (v.size() != static_cast<size_t>(r))
    c.error(std::string("attribute ") + name + " must have " + std::to_string(r) + " values for a " +
            std::to_string(r) + "-D op");
  if (r == 1) v.insert(v.begin(), lifted);
  return v;
}

std::vector<int64_t> pair_attr(Ctx& c, const char* name, int64_t dflt, int r) {
  std::vector<int64_t> v = spatial_attr(c, name, dflt, r, 1);
  // Strides and dilations divide sizes (SAME padding): 0 would be a
  // division by zero, not an error message.
  if (v[0] < 1 || v[1] < 1)
    c.error(std::string("attribute ") + name + " must be >= 1, got [" + std::to_string(v[0]) + ", " +
            std::to_string(v[1]) + "]");
  return v;
}

// Spora padding for the node's pads / auto_pad, on the (lifted) 2-D input
// `x`. SAME_* pads are computed from the input's spatial size (fixed at
// import).
std::vector<int64_t> spora_pads(Ctx& c, const Shape& x, const std::vector<int64_t>& kernel,
                                const std::vector<int64_t>& stride, const std::vector<int64_t>& dilation, int r) {
  const std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  if (auto_pad == "NOTSET") {
    std::vector<int64_t> p = c.attr_ints("pads", std::vector<int64_t>(static_cast<size_t>(2 * r), 0));
    if (p.size() != static_cast<size_t>(2 * r))
      c.error("attribute pads must have " + std::to_string(2 * r) + " values for a " + std::to_string(r) + "-D op");
    if (r == 1) return {0, 0, p[0], p[1]};
    return {p[0], p[2], p[1], p[3]};
  }
  if (auto_pad == "VALID") return {0, 0, 0, 0};
  if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") c.error("auto_pad '" + auto_pad + "' is not valid");
  std::vector<int64_t> out(4);
  for (int i = 0; i < 2; ++i) {
    const int64_t in = x[2 + i], s = stride[i];
    const int64_t o = (in + s - 1) / s;
    const int64_t eff = (kernel[i] - 1) * dilation[i] + 1;
    const int64_t total = std::max<int64_t>(0, (o - 1) * s + eff - in);
    const int64_t small = total / 2, big = total - small;
    out[2 * i] = auto_pad == "SAME_UPPER" ? small : big;
    out[2 * i + 1] = auto_pad == "SAME_UPPER" ? big : small;
  }
  return out;
}

// The weight's spatial sizes (its dims after the two channel dims), checked
// against the input's spatial rank and a kernel_shape attribute.
std::vector<int64_t> weight_kernel(Ctx& c, ir::Value w, int r) {
  const Shape& ws = c.meta(w).shape;
  if (ws.rank != r + 2) c.error("weight must be rank " + std::to_string(r + 2) + ", got " + ws.str());
  std::vector<int64_t> kernel(ws.dims + 2, ws.dims + ws.rank);
  if (c.has_attr("kernel_shape") && c.attr_ints("kernel_shape", {}) != kernel)
    c.error("kernel_shape does not match the weight's shape " + ws.str());
  return kernel;
}

void conv(Ctx& c, const Node&) {
  c.max_outputs(1);
  ir::Value x = c.in(0), w = c.in(1);
  const int r = spatial_rank(c, x);
  std::vector<int64_t> kernel = weight_kernel(c, w, r);
  if (r == 1) {
    x = lift(c, x);
    w = lift(c, w);
    kernel.insert(kernel.begin(), 1);
  }
  const auto stride = pair_attr(c, "strides", 1, r), dilation = pair_attr(c, "dilations", 1, r);
  Attrs a;
  a.set("stride", AttrValue::of_ints(stride));
  a.set("dilation", AttrValue::of_ints(dilation));
  a.set("padding", AttrValue::of_ints(spora_pads(c, c.meta(x).shape, kernel, stride, dilation, r)));
  a.set("groups", AttrValue::of_int(c.attr_int("group", 1)));
  ir::Value y = c.has_in(2) ? c.op("conv2d_bias", {x, w, c.in(2)}, a) : c.op("conv2d", {x, w}, a);
  c.out(0, r == 1 ? unlift(c, y) : y);
}

// ConvTranspose: Spora's conv2d_transpose takes ONNX's weight layout
// (C_in, C_out/group, k...) and output size rule; the bias is added after.
void conv_transpose(Ctx& c, const Node&) {
  c.max_outputs(1);
  ir::Value x = c.in(0), w = c.in(1);
  const int r = spatial_rank(c, x);
  std::vector<int64_t> kernel = weight_kernel(c, w, r);
  if (c.has_attr("output_shape"))
    c.error("attribute output_shape is not supported (give pads and output_padding instead)");
  const std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID")
    c.error("auto_pad '" + auto_pad + "' is not supported for ConvTranspose (give pads instead)");
  if (r == 1) {
    x = lift(c, x);
    w = lift(c, w);
  }
  const auto stride = pair_attr(c, "strides", 1, r), dilation = pair_attr(c, "dilations", 1, r);
  std::vector<int64_t> pads = {0, 0, 0, 0};
  if (auto_pad == "NOTSET") pads = spora_pads(c, c.meta(x).shape, kernel, stride, dilation, r);
  Attrs a;
  a.set("stride", AttrValue::of_ints(stride));
  a.set("dilation", AttrValue::of_ints(dilation));
  a.set("padding", AttrValue::of_ints(pads));
  a.set("output_padding", AttrValue::of_ints(spatial_attr(c, "output_padding", 0, r, 0)));
  a.set("groups", AttrValue::of_int(c.attr_int("group", 1)));
  ir::Value y = c.op("conv2d_transpose", {x, w}, a);
  if (r == 1) y = unlift(c, y);
  if (c.has_in(2)) {
    const ir::Value b = c.in(2);
    const Shape& bs = c.meta(b).shape;
    if (bs.rank != 1) c.error("bias must be 1-D, got " + bs.str());
    Attrs shape;  // (C, 1, ...) broadcasts over the spatial axes
    std::vector<int64_t> dims(static_cast<size_t>(r + 1), 1);
    dims[0] = bs[0];
    shape.set("shape", AttrValue::of_ints(dims));
    y = c.op("add", {y, c.op("reshape", {b}, shape)});
  }
  c.out(0, y);
}

void pool(Ctx& c, const Node& n, bool max) {
  c.max_outputs(1);  // MaxPool's Indices output is not supported
  ir::Value x = c.in(0);
  const int r = spatial_rank(c, x);
  if (!c.has_attr("kernel_shape")) c.error("attribute kernel_shape is required");
  const auto kernel = spatial_attr(c, "kernel_shape", 1, r, 1);
  if (r == 1) x = lift(c, x);
  const auto stride = pair_attr(c, "strides", 1, r), dilation = pair_attr(c, "dilations", 1, r);
  if (max && c.attr_int("storage_order", 0) != 0) c.error("storage_order 1 (column major) is not supported");
  Attrs a;
  a.set("kernel_size", AttrValue::of_ints(kernel));
  a.set("stride", AttrValue::of_ints(stride));
  a.set("padding", AttrValue::of_ints(spora_pads(c, c.meta(x).shape, kernel, stride, dilation, r)));
  a.set("ceil_mode", AttrValue::of_bool(c.attr_int("ceil_mode", 0) != 0));
  if (max) {
    a.set("dilation", AttrValue::of_ints(dilation));
  } else {
    if (dilation != std::vector<int64_t>{1, 1}) c.error("dilated average pooling is not supported");
    // ONNX's default excludes the padding from the count; Spora's includes it.
    a.set("count_include_pad", AttrValue::of_bool(c.attr_int("count_include_pad", 0) != 0));
  }
  const ir::Value y = c.op(max ? "max_pool2d" : "avg_pool2d", {x}, a);
  c.out(0, r == 1 ? unlift(c, y) : y);
  (void)n;
}

// GlobalAveragePool / GlobalMaxPool: the reduction over every spatial axis,
// kept as size-1 axes.
void global_pool(Ctx& c, const char* reduce) {
  c.max_outputs(1);
  const ir::Value x = c.in(0);
  const int r = c.meta(x).shape.rank;
  if (r < 3) c.error("input must have rank >= 3 (N, C, spatial...), got " + c.meta(x).shape.str());
  std::vector<int64_t> axes;
  for (int i = 2; i < r; ++i) axes.push_back(i);
  Attrs a;
  a.set("axes", AttrValue::of_ints(axes));
  a.set("keepdims", AttrValue::of_bool(true));
  c.out(0, c.op(reduce, {x}, a));
}

void global_avg_pool(Ctx& c, const Node&) { global_pool(c, "mean"); }

void global_max_pool(Ctx& c, const Node&) { global_pool(c, "max"); }

// LRN across channels: x / (bias + alpha / size * sum of x^2 over the
// channel window)^beta. The window sum is an average pool (padding counted)
// over the channels of an (N, 1, C, H*W) view, times size.
void lrn(Ctx& c, const Node&) {
  c.max_outputs(1);
  const ir::Value x = c.in(0);
  const Shape& s = c.meta(x).shape;
  need_4d(c, x);
  const int64_t size = c.attr_int("size", 0);
  if (size < 1) c.error("attribute size must be >= 1");
  const DType d = c.meta(x).dtype;
  const float alpha = c.attr_float("alpha", 1e-4f), beta = c.attr_float("beta", 0.75f), bias = c.attr_float("bias", 1.f);
  Attrs view, back, pool;
  view.set("shape", AttrValue::of_ints({-1, 1, s[1], s[2] * s[3]}));
  back.set("shape", AttrValue::of_ints({-1, s[1], s[2], s[3]}));
  pool.set("kernel_size", AttrValue::of_ints({size, 1}));
  pool.set("stride", AttrValue::of_ints({1, 1}));
  pool.set("padding", AttrValue::of_ints({(size - 1) / 2, size / 2, 0, 0}));
  pool.set("count_include_pad", AttrValue::of_bool(true));
  const ir::Value sq = c.op("reshape", {c.op("mul", {x, x})}, view);
  const ir::Value mean = c.op("reshape", {c.op("avg_pool2d", {sq}, pool)}, back);
  // alpha / size * (mean * size) = alpha * mean
  const ir::Value base = c.op("add", {c.op("mul", {mean, c.scalar(d, alpha)}), c.scalar(d, bias)});
  c.out(0, c.op("div", {x, c.op("pow", {base, c.scalar(d, beta)})}));
}

// LayerNormalization (opset 17): over the dimensions from axis on; the
// bias is optional.
void layer_norm(Ctx& c, const Node&) {
  c.max_outputs(1);  // Mean and InvStdDev
  const ir::Value x = c.in(0), scale = c.in(1);
  const Shape& s = c.meta(x).shape;
  int64_t axis = c.attr_int("axis", -1);
  if (axis < -s.rank || axis >= s.rank) c.error("axis " + std::to_string(axis) + " is out of range");
  if (axis < 0) axis += s.rank;
  ir::Value bias;
  if (c.has_in(2)) {
    bias = c.in(2);
  } else {
    const TensorMeta& m = c.meta(scale);
    bias = c.graph().add_constant(m.dtype, m.shape, std::vector<uint8_t>(static_cast<size_t>(m.shape.numel()) * dtype_size(m.dtype), 0), c.loc());
  }
  Attrs a;
  a.set("normalized_ndim", AttrValue::of_int(s.rank - axis));
  a.set("eps", AttrValue::of_float(c.attr_float("epsilon", 1e-5f)));
  c.out(0, c.graph().add_op("layer_norm", {x, scale, bias}, a, c.loc()).at(0));
}

// InstanceNormalization is group normalisation with one group per channel.
void instance_norm(Ctx& c, const Node&) {
  c.max_outputs(1);
  const ir::Value x = c.in(0);
  if (c.meta(x).shape.rank < 3) c.error("input must have rank >= 3");
  Attrs a;
  a.set("groups", AttrValue::of_int(c.meta(x).shape[1]));
  a.set("eps", AttrValue::of_float(c.attr_float("epsilon", 1e-5f)));
  c.out(0, c.graph().add_op("group_norm", {x, c.in(1), c.in(2)}, a, c.loc()).at(0));
}

void batch_norm(Ctx& c, const Node&) {
  c.max_outputs(1);  // running statistics outputs exist only in training mode
  if (c.attr_int("training_mode", 0) != 0) c.error("training_mode = 1 is not supported (inference only)");
  if (c.opset() < 9 && c.attr_int("spatial", 1) == 0) c.error("spatial = 0 (per-activation statistics) is not supported");
  Attrs a;
  a.set("training", AttrValue::of_bool(false));
  a.set("eps", AttrValue::of_float(c.attr_float("epsilon", 1e-5f)));
  a.set("momentum", AttrValue::of_float(1.0 - c.attr_float("momentum", 0.9f)));
  const std::vector<ir::Value> y =
      c.graph().add_op("batch_norm", {c.in(0), c.in(1), c.in(2), c.in(3), c.in(4)}, a, c.loc());
  c.out(0, y.at(0));
}

}  // namespace

void add_nn_converters(std::map<std::string, Converter>& m) {
  m["Conv"] = conv;
  m["ConvTranspose"] = conv_transpose;
  m["MaxPool"] = [](Ctx& c, const Node& n) { pool(c, n, true); };
  m["AveragePool"] = [](Ctx& c, const Node& n) { pool(c, n, false); };
  m["GlobalAveragePool"] = global_avg_pool;
  m["BatchNormalization"] = batch_norm;
  m["GlobalMaxPool"] = global_max_pool;
  m["LRN"] = lrn;
  m["LayerNormalization"] = layer_norm;
  m["InstanceNormalization"] = instance_norm;
}

}  // namespace spora::io::onnx
