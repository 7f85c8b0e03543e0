// The Spora op -> ONNX (opset 17) mapping of the exporter. Each exporter
// writes the node's used outputs under Emitter::out(i); ops ONNX 17 lacks
// (gelu, silu, rsqrt, var, ...) are written as the few ONNX ops they are.
// Ops that only make sense while training (gradients, optimizer updates,
// random draws, collectives) have no entry: exporting them is an error.
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "io/onnx_export.h"
#include "io/onnx_proto.h"

namespace spora::io::onnx {
namespace {

using A = OAttr;

std::vector<int64_t> all_axes(int rank) {
  std::vector<int64_t> v(static_cast<size_t>(rank));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

void unary(std::map<std::string, Exporter>& m, const char* spora, const char* onnx) {
  m[spora] = [onnx](Emitter& e) { e.emit(onnx, {e.in(0)}, {e.out(0)}); };
}

void binary(std::map<std::string, Exporter>& m, const char* spora, const char* onnx) {
  m[spora] = [onnx](Emitter& e) { e.emit(onnx, {e.in(0), e.in(1)}, {e.out(0)}); };
}

// gelu at opset 17 (Gelu itself is opset 20): the erf form
// x/2 (1 + erf(x/sqrt 2)) or the tanh form
// x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
std::string gelu(Emitter& e, const std::string& x, DType d, bool tanh_form, const std::string& out = "") {
  std::string inner;
  if (tanh_form) {
    const std::string x3 = e.op("Mul", {e.op("Mul", {x, x}), x});
    const std::string s = e.op("Add", {x, e.op("Mul", {x3, e.scalar(d, 0.044715)})});
    inner = e.op("Tanh", {e.op("Mul", {s, e.scalar(d, std::sqrt(2.0 / M_PI))})});
  } else {
    inner = e.op("Erf", {e.op("Mul", {x, e.scalar(d, M_SQRT1_2)})});
  }
  const std::string half_x = e.op("Mul", {x, e.scalar(d, 0.5)});
  const std::string one_plus = e.op("Add", {inner, e.scalar(d, 1.0)});
  if (out.empty()) return e.op("Mul", {half_x, one_plus});
  e.emit("Mul", {half_x, one_plus}, {out});
  return out;
}

// The epilogue activations of linear_act / conv2d_act (ops/epilogue.cpp).
void activation(Emitter& e, const std::string& x, DType d, const std::string& act, const std::string& out) {
  if (act == "none") e.emit("Identity", {x}, {out});
  else if (act == "relu") e.emit("Relu", {x}, {out});
  else if (act == "sigmoid") e.emit("Sigmoid", {x}, {out});
  else if (act == "tanh") e.emit("Tanh", {x}, {out});
  else if (act == "gelu" || act == "gelu_tanh") gelu(e, x, d, act == "gelu_tanh", out);
  else e.error("activation '" + act + "' has no ONNX mapping");
}

// y = x @ w^T + b. Rank-2 x is one Gemm (which the importer reads back as
// linear); higher ranks are MatMul with the transposed weight, then Add.
std::string linear(Emitter& e) {
  const int r = e.in_meta(0).shape.rank;
  if (r == 2) return e.op("Gemm", {e.in(0), e.in(1), e.in(2)}, {A::of_int("transB", 1)});
  const std::string wt = e.op("Transpose", {e.in(1)}, {A::of_ints("perm", {1, 0})});
  return e.op("Add", {e.op("MatMul", {e.in(0), wt}), e.in(2)});
}

std::string transpose_last2(Emitter& e, const std::string& x, int rank) {
  std::vector<int64_t> perm = all_axes(rank);
  std::swap(perm[static_cast<size_t>(rank - 1)], perm[static_cast<size_t>(rank - 2)]);
  return e.op("Transpose", {x}, {A::of_ints("perm", perm)});
}

// Spora's 2-D padding (1, 2 or 4 values: top, bottom, left, right) as
// ONNX's pads (top, left, bottom, right).
std::vector<int64_t> onnx_pads(Emitter& e, const std::vector<int64_t>& p) {
  if (p.size() == 1) return {p[0], p[0], p[0], p[0]};
  if (p.size() == 2) return {p[0], p[1], p[0], p[1]};
  if (p.size() == 4) return {p[0], p[2], p[1], p[3]};
  e.error("padding must have 1, 2 or 4 values");
}

std::vector<int64_t> pair(Emitter& e, const char* name) {
  std::vector<int64_t> v = e.ints_attr(name);
  if (v.size() == 1) v.push_back(v[0]);
  if (v.size() != 2) e.error(std::string("attribute ") + name + " must have 2 values");
  return v;
}

void conv(Emitter& e, size_t bias, size_t residual, bool act, const std::string& out) {
  if (e.has_attr("pad_mode") && e.string_attr("pad_mode") != "explicit")
    e.error("pad_mode '" + e.string_attr("pad_mode") + "' was not resolved to explicit padding");
  const Shape& w = e.in_meta(1).shape;
  std::vector<std::string> ins = {e.in(0), e.in(1)};
  if (bias) ins.push_back(e.in(bias));
  const std::vector<A> attrs = {A::of_ints("kernel_shape", {w[2], w[3]}), A::of_ints("strides", pair(e, "stride")),
                                A::of_ints("dilations", pair(e, "dilation")),
                                A::of_ints("pads", onnx_pads(e, e.ints_attr("padding"))),
                                A::of_int("group", e.int_attr("groups"))};
  if (!residual && !act) return e.emit("Conv", ins, {out}, attrs);
  std::string y = e.op("Conv", ins, attrs);
  if (residual) y = e.op("Add", {y, e.in(residual)});
  activation(e, y, e.out_meta(0).dtype, act ? e.string_attr("activation") : "none", out);
}

void conv(Emitter& e, size_t bias, size_t residual, bool act) { conv(e, bias, residual, act, e.out(0)); }

// `prefix` names the pooling's attributes ("pool_" in conv2d_act_pool).
void pool(Emitter& e, bool max, const std::string& x, const std::string& prefix, const std::string& out) {
  auto name = [&](const char* n) { return prefix + n; };
  std::vector<A> attrs = {A::of_ints("kernel_shape", pair(e, name("kernel_size").c_str())),
                          A::of_ints("strides", pair(e, name("stride").c_str())),
                          A::of_ints("pads", onnx_pads(e, e.ints_attr(name("padding").c_str()))),
                          A::of_int("ceil_mode", e.bool_attr(name("ceil_mode").c_str()))};
  if (max) attrs.push_back(A::of_ints("dilations", pair(e, name("dilation").c_str())));
  else attrs.push_back(A::of_int("count_include_pad", e.bool_attr(name("count_include_pad").c_str())));
  e.emit(max ? "MaxPool" : "AveragePool", {x}, {out}, attrs);
}

void pool(Emitter& e, bool max) { pool(e, max, e.in(0), "", e.out(0)); }

// conv2d_act_pool (the conv_pool_fusion pass's op): conv2d_act, then a
// MaxPool with the pool_ attributes; with keep_activation the activation is
// output 1.
void conv_act_pool(Emitter& e) {
  const bool keep = e.has_attr("keep_activation") && e.bool_attr("keep_activation");
  const std::string act = keep ? e.out(1) : e.fresh("act");
  conv(e, 2, 0, true, act);
  pool(e, true, act, "pool_", e.out(0));
}

// The reductions' axes: empty means all (ONNX would read no axes as all too,
// but listing them keeps noop_with_empty_axes out of it).
std::vector<int64_t> reduce_axes(Emitter& e) {
  std::vector<int64_t> axes = e.ints_attr("axes");
  if (axes.empty()) axes = all_axes(e.in_meta(0).shape.rank);
  return axes;
}

// ReduceSum takes its axes as an input since opset 13; the others as an
// attribute until opset 18.
std::string reduce(Emitter& e, const char* onnx, const std::string& x, const std::vector<int64_t>& axes,
                   bool keepdims, const std::string& out = "") {
  std::vector<std::string> ins = {x};
  std::vector<A> attrs = {A::of_int("keepdims", keepdims)};
  if (std::string(onnx) == "ReduceSum") ins.push_back(e.ints(axes));
  else attrs.push_back(A::of_ints("axes", axes));
  if (out.empty()) return e.op(onnx, ins, attrs);
  e.emit(onnx, ins, {out}, attrs);
  return out;
}

void reduction(std::map<std::string, Exporter>& m, const char* spora, const char* onnx) {
  m[spora] = [onnx](Emitter& e) {
    if (e.in_meta(0).shape.rank == 0) return e.emit("Identity", {e.in(0)}, {e.out(0)});
    reduce(e, onnx, e.in(0), reduce_axes(e), e.bool_attr("keepdims"), e.out(0));
  };
}

// var / std with Bessel's correction: sum((x - mean)^2) / (n - correction).
void variance(Emitter& e, bool sqrt) {
  const Shape& s = e.in_meta(0).shape;
  const DType d = e.in_meta(0).dtype;
  const std::vector<int64_t> axes = reduce_axes(e);
  int64_t n = 1;
  for (int64_t a : axes) n *= s[static_cast<int>(a < 0 ? a + s.rank : a)];
  const std::string mean = reduce(e, "ReduceMean", e.in(0), axes, true);
  const std::string diff = e.op("Sub", {e.in(0), mean});
  const std::string ss = reduce(e, "ReduceSum", e.op("Mul", {diff, diff}), axes, e.bool_attr("keepdims"));
  const double denom = static_cast<double>(n - e.int_attr("correction"));
  if (!sqrt) return e.emit("Div", {ss, e.scalar(d, denom)}, {e.out(0)});
  e.emit("Sqrt", {e.op("Div", {ss, e.scalar(d, denom)})}, {e.out(0)});
}

void arg_extreme(Emitter& e, const char* onnx) {
  const TensorMeta& o = e.out_meta(0);
  std::string x = e.in(0);
  int64_t axis = 0;
  bool flat = !e.has_attr("axis");
  if (!flat) axis = e.int_attr("axis");
  if (flat) x = e.op("Reshape", {x, e.ints({-1})});
  std::string y = e.op(onnx, {x}, {A::of_int("axis", axis), A::of_int("keepdims", flat ? 0 : e.bool_attr("keepdims"))});
  if (flat) y = e.op("Reshape", {y, e.ints(std::vector<int64_t>(o.shape.dims, o.shape.dims + o.shape.rank))});
  if (o.dtype == SPORA_DTYPE_I64) return e.emit("Identity", {y}, {e.out(0)});
  e.emit("Cast", {y}, {e.out(0)}, {A::of_int("to", onnx_data_type(o.dtype))});
}

// Host values of a dtype, for ops whose result is known at export time
// (zeros, ones, full, arange, eye).
HostTensor host_values(Emitter& e, DType d, const Shape& s, const std::vector<double>& v) {
  HostTensor t;
  t.dtype = d;
  t.shape = s;
  const size_t es = dtype_size(d);
  t.bytes.resize(v.size() * es);
  for (size_t i = 0; i < v.size(); ++i) {
    uint8_t* p = &t.bytes[i * es];
    switch (d) {
      case SPORA_DTYPE_F32: { const float f = static_cast<float>(v[i]); std::memcpy(p, &f, 4); break; }
      case SPORA_DTYPE_F64: std::memcpy(p, &v[i], 8); break;
      case SPORA_DTYPE_I32: { const int32_t x = static_cast<int32_t>(v[i]); std::memcpy(p, &x, 4); break; }
      case SPORA_DTYPE_I64: { const int64_t x = static_cast<int64_t>(v[i]); std::memcpy(p, &x, 8); break; }
      case SPORA_DTYPE_U8: *p = static_cast<uint8_t>(v[i]); break;
      case SPORA_DTYPE_BOOL: *p = v[i] != 0; break;
      default: e.error(std::string("dtype ") + dtype_name(d) + " is not written for constant-producing ops");
    }
  }
  return t;
}

void constant_op(std::map<std::string, Exporter>& m, const char* spora) {
  const std::string op = spora;
  m[spora] = [op](Emitter& e) {
    const TensorMeta& o = e.out_meta(0);
    const int64_t n = o.shape.numel();
    std::vector<double> v(static_cast<size_t>(n), 0.0);
    if (op == "ones") std::fill(v.begin(), v.end(), 1.0);
    if (op == "full") std::fill(v.begin(), v.end(), e.float_attr("value"));
    if (op == "arange") {
      const double start = e.float_attr("start"), step = e.float_attr("step");
      for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + step * static_cast<double>(i);
    }
    if (op == "eye") {
      const int64_t cols = o.shape[1];
      for (int64_t i = 0; i < std::min(o.shape[0], cols); ++i) v[static_cast<size_t>(i * cols + i)] = 1.0;
    }
    e.emit("Identity", {e.initializer(host_values(e, o.dtype, o.shape, v), op)}, {e.out(0)});
  };
}

}  // namespace

const std::map<std::string, Exporter>& exporters() {
  static const std::map<std::string, Exporter> table = [] {
    std::map<std::string, Exporter> m;
    binary(m, "add", "Add");
    binary(m, "sub", "Sub");
    binary(m, "mul", "Mul");
    binary(m, "div", "Div");
    binary(m, "pow", "Pow");
    binary(m, "maximum", "Max");
    binary(m, "minimum", "Min");
    binary(m, "equal", "Equal");
    binary(m, "greater", "Greater");
    binary(m, "greater_equal", "GreaterOrEqual");
    binary(m, "less", "Less");
    binary(m, "less_equal", "LessOrEqual");
    binary(m, "logical_and", "And");
    binary(m, "logical_or", "Or");
    binary(m, "logical_xor", "Xor");
    unary(m, "logical_not", "Not");
    m["not_equal"] = [](Emitter& e) { e.emit("Not", {e.op("Equal", {e.in(0), e.in(1)})}, {e.out(0)}); };
    unary(m, "relu", "Relu");
    unary(m, "sigmoid", "Sigmoid");
    unary(m, "tanh", "Tanh");
    unary(m, "exp", "Exp");
    unary(m, "log", "Log");
    unary(m, "sqrt", "Sqrt");
    unary(m, "neg", "Neg");
    unary(m, "abs", "Abs");
    unary(m, "erf", "Erf");
    unary(m, "ceil", "Ceil");
    unary(m, "floor", "Floor");
    unary(m, "round", "Round");
    unary(m, "sign", "Sign");
    unary(m, "sin", "Sin");
    unary(m, "cos", "Cos");
    unary(m, "reciprocal", "Reciprocal");
    unary(m, "stop_gradient", "Identity");
    m["rsqrt"] = [](Emitter& e) { e.emit("Reciprocal", {e.op("Sqrt", {e.in(0)})}, {e.out(0)}); };
    m["square"] = [](Emitter& e) { e.emit("Mul", {e.in(0), e.in(0)}, {e.out(0)}); };
    m["log1p"] = [](Emitter& e) {
      e.emit("Log", {e.op("Add", {e.in(0), e.scalar(e.in_meta(0).dtype, 1.0)})}, {e.out(0)});
    };
    m["silu"] = [](Emitter& e) { e.emit("Mul", {e.in(0), e.op("Sigmoid", {e.in(0)})}, {e.out(0)}); };
    m["gelu"] = [](Emitter& e) { gelu(e, e.in(0), e.in_meta(0).dtype, e.string_attr("approximate") == "tanh", e.out(0)); };
    m["leaky_relu"] = [](Emitter& e) {
      e.emit("LeakyRelu", {e.in(0)}, {e.out(0)}, {A::of_float("alpha", static_cast<float>(e.float_attr("alpha")))});
    };
    // softplus(x) = log(1 + exp(beta x)) / beta, and x where beta x > threshold.
    m["softplus"] = [](Emitter& e) {
      const DType d = e.in_meta(0).dtype;
      const double beta = e.float_attr("beta"), threshold = e.float_attr("threshold");
      const std::string bx = e.op("Mul", {e.in(0), e.scalar(d, beta)});
      const std::string sp = e.op("Div", {e.op("Softplus", {bx}), e.scalar(d, beta)});
      e.emit("Where", {e.op("Greater", {bx, e.scalar(d, threshold)}), e.in(0), sp}, {e.out(0)});
    };
    m["clip"] = [](Emitter& e) {
      const DType d = e.in_meta(0).dtype;
      const double lo = e.float_attr("min"), hi = e.float_attr("max");
      e.emit("Clip", {e.in(0), std::isinf(lo) ? "" : e.scalar(d, lo), std::isinf(hi) ? "" : e.scalar(d, hi)},
             {e.out(0)});
    };
    m["cast"] = [](Emitter& e) {
      e.emit("Cast", {e.in(0)}, {e.out(0)}, {A::of_int("to", onnx_data_type(e.out_meta(0).dtype))});
    };
    m["where"] = [](Emitter& e) { e.emit("Where", {e.in(0), e.in(1), e.in(2)}, {e.out(0)}); };
    m["softmax"] = [](Emitter& e) { e.emit("Softmax", {e.in(0)}, {e.out(0)}, {A::of_int("axis", e.int_attr("axis"))}); };
    m["log_softmax"] = [](Emitter& e) {
      e.emit("LogSoftmax", {e.in(0)}, {e.out(0)}, {A::of_int("axis", e.int_attr("axis"))});
    };

    m["matmul"] = [](Emitter& e) {
      std::string a = e.in(0), b = e.in(1);
      if (e.bool_attr("transpose_a")) a = transpose_last2(e, a, e.in_meta(0).shape.rank);
      if (e.bool_attr("transpose_b")) b = transpose_last2(e, b, e.in_meta(1).shape.rank);
      e.emit("MatMul", {a, b}, {e.out(0)});
    };
    m["linear"] = [](Emitter& e) { e.emit("Identity", {linear(e)}, {e.out(0)}); };
    m["linear_act"] = [](Emitter& e) {
      activation(e, linear(e), e.out_meta(0).dtype, e.string_attr("activation"), e.out(0));
    };
    m["linear_add_act"] = [](Emitter& e) {
      activation(e, e.op("Add", {linear(e), e.in(3)}), e.out_meta(0).dtype, e.string_attr("activation"), e.out(0));
    };
    m["conv2d"] = [](Emitter& e) { conv(e, 0, 0, false); };
    m["conv2d_bias"] = [](Emitter& e) { conv(e, 2, 0, false); };
    m["conv2d_act"] = [](Emitter& e) { conv(e, 2, 0, true); };
    m["conv2d_add_act"] = [](Emitter& e) { conv(e, 2, 3, true); };
    m["conv2d_act_pool"] = conv_act_pool;
    m["conv2d_transpose"] = [](Emitter& e) {
      const Shape& w = e.in_meta(1).shape;
      e.emit("ConvTranspose", {e.in(0), e.in(1)}, {e.out(0)},
             {A::of_ints("kernel_shape", {w[2], w[3]}), A::of_ints("strides", pair(e, "stride")),
              A::of_ints("dilations", pair(e, "dilation")), A::of_ints("pads", onnx_pads(e, e.ints_attr("padding"))),
              A::of_ints("output_padding", pair(e, "output_padding")), A::of_int("group", e.int_attr("groups"))});
    };
    m["max_pool2d"] = [](Emitter& e) { pool(e, true); };
    m["avg_pool2d"] = [](Emitter& e) { pool(e, false); };
    m["adaptive_avg_pool2d"] = [](Emitter& e) {
      const Shape& x = e.in_meta(0).shape;
      const Shape& y = e.out_meta(0).shape;
      if (y[2] == 1 && y[3] == 1) return e.emit("GlobalAveragePool", {e.in(0)}, {e.out(0)});
      if (x[2] % y[2] || x[3] % y[3])
        e.error("output size " + y.str() + " does not divide the input " + x.str() +
                ": ONNX has no adaptive pooling, and uneven windows are not one AveragePool");
      const std::vector<int64_t> k = {x[2] / y[2], x[3] / y[3]};
      e.emit("AveragePool", {e.in(0)}, {e.out(0)}, {A::of_ints("kernel_shape", k), A::of_ints("strides", k)});
    };
    m["batch_norm"] = [](Emitter& e) {
      if (e.bool_attr("training")) e.error("training = true does not export (inference graphs only: set_train(False))");
      e.only_outputs(1);
      e.emit("BatchNormalization", {e.in(0), e.in(1), e.in(2), e.in(3), e.in(4)}, {e.out(0)},
             {A::of_float("epsilon", static_cast<float>(e.float_attr("eps"))),
              A::of_float("momentum", static_cast<float>(1.0 - e.float_attr("momentum")))});
    };
    m["layer_norm"] = [](Emitter& e) {
      e.only_outputs(1);
      e.emit("LayerNormalization", {e.in(0), e.in(1), e.in(2)}, {e.out(0)},
             {A::of_int("axis", -e.int_attr("normalized_ndim")),
              A::of_float("epsilon", static_cast<float>(e.float_attr("eps")))});
    };
    // group_norm: InstanceNormalization over (N, G, C/G * spatial), then the
    // per-channel affine.
    m["group_norm"] = [](Emitter& e) {
      e.only_outputs(1);
      const Shape& s = e.in_meta(0).shape;
      const DType d = e.in_meta(0).dtype;
      const int64_t g = e.int_attr("groups");
      const std::string x3 = e.op("Reshape", {e.in(0), e.ints({0, g, -1})});
      const HostTensor ones = host_values(e, d, Shape::from(&g, 1, "onnx"), std::vector<double>(static_cast<size_t>(g), 1.0));
      const HostTensor zeros = host_values(e, d, Shape::from(&g, 1, "onnx"), std::vector<double>(static_cast<size_t>(g), 0.0));
      const std::string n = e.op("InstanceNormalization", {x3, e.initializer(ones), e.initializer(zeros)},
                                 {A::of_float("epsilon", static_cast<float>(e.float_attr("eps")))});
      const std::string y = e.op("Reshape", {n, e.op("Shape", {e.in(0)})});
      std::vector<int64_t> bshape(static_cast<size_t>(s.rank - 1), 1);
      bshape[0] = s[1];
      const std::string gamma = e.op("Reshape", {e.in(1), e.ints(bshape)});
      const std::string beta = e.op("Reshape", {e.in(2), e.ints(bshape)});
      e.emit("Add", {e.op("Mul", {y, gamma}), beta}, {e.out(0)});
    };
    m["dropout"] = [](Emitter& e) {
      if (e.bool_attr("training")) e.error("training = true does not export (inference graphs only: set_train(False))");
      e.only_outputs(1);
      e.emit("Identity", {e.in(0)}, {e.out(0)});
    };

    m["reshape"] = [](Emitter& e) {
      const std::vector<int64_t>& s = e.ints_attr("shape");
      bool zero = false;
      for (int64_t d : s) zero |= d == 0;
      // ONNX reads 0 as "copy the input's dimension" unless allowzero.
      std::vector<A> attrs;
      if (zero) attrs.push_back(A::of_int("allowzero", 1));
      e.emit("Reshape", {e.in(0), e.ints(s)}, {e.out(0)}, attrs);
    };
    m["transpose"] = [](Emitter& e) {
      std::vector<int64_t> perm = e.ints_attr("perm");
      if (perm.empty()) {
        perm = all_axes(e.in_meta(0).shape.rank);
        std::reverse(perm.begin(), perm.end());
      }
      e.emit("Transpose", {e.in(0)}, {e.out(0)}, {A::of_ints("perm", perm)});
    };
    m["concat"] = [](Emitter& e) {
      std::vector<std::string> ins;
      for (size_t i = 0; i < e.num_inputs(); ++i) ins.push_back(e.in(i));
      e.emit("Concat", ins, {e.out(0)}, {A::of_int("axis", e.int_attr("axis"))});
    };
    m["stack"] = [](Emitter& e) {
      std::vector<std::string> ins;
      const int64_t axis = e.int_attr("axis");
      const std::string axes = e.ints({axis});
      for (size_t i = 0; i < e.num_inputs(); ++i) ins.push_back(e.op("Unsqueeze", {e.in(i), axes}));
      e.emit("Concat", ins, {e.out(0)}, {A::of_int("axis", axis)});
    };
    m["split"] = [](Emitter& e) {
      const int64_t axis = e.int_attr("axis");
      const int rank = e.in_meta(0).shape.rank;
      const int ax = static_cast<int>(axis < 0 ? axis + rank : axis);
      std::vector<int64_t> sizes;
      std::vector<std::string> outs;
      for (size_t i = 0; i < e.node().outputs.size(); ++i) {
        sizes.push_back(e.out_meta(i).shape[ax]);
        outs.push_back(e.out(i));
      }
      e.emit("Split", {e.in(0), e.ints(sizes)}, outs, {A::of_int("axis", axis)});
    };
    m["squeeze"] = [](Emitter& e) {
      const std::vector<int64_t>& axes = e.ints_attr("axes");
      if (axes.empty()) return e.emit("Squeeze", {e.in(0)}, {e.out(0)});
      e.emit("Squeeze", {e.in(0), e.ints(axes)}, {e.out(0)});
    };
    m["expand_dims"] = [](Emitter& e) { e.emit("Unsqueeze", {e.in(0), e.ints(e.ints_attr("axes"))}, {e.out(0)}); };
    m["slice"] = [](Emitter& e) {
      std::vector<int64_t> axes = e.ints_attr("axes");
      if (axes.empty()) axes = all_axes(static_cast<int>(e.ints_attr("starts").size()));
      e.emit("Slice", {e.in(0), e.ints(e.ints_attr("starts")), e.ints(e.ints_attr("ends")), e.ints(axes)},
             {e.out(0)});
    };
    m["strided_slice"] = [](Emitter& e) {
      const std::vector<int64_t>& b = e.ints_attr("begin");
      std::vector<int64_t> st = e.ints_attr("strides");
      if (st.empty()) st.assign(b.size(), 1);
      e.emit("Slice", {e.in(0), e.ints(b), e.ints(e.ints_attr("end")), e.ints(all_axes(static_cast<int>(b.size()))),
                       e.ints(st)},
             {e.out(0)});
    };
    m["flip"] = [](Emitter& e) {
      std::vector<int64_t> axes = e.ints_attr("axes");
      if (axes.empty()) axes = all_axes(e.in_meta(0).shape.rank);
      const size_t n = axes.size();
      e.emit("Slice",
             {e.in(0), e.ints(std::vector<int64_t>(n, -1)),
              e.ints(std::vector<int64_t>(n, std::numeric_limits<int64_t>::min())), e.ints(axes),
              e.ints(std::vector<int64_t>(n, -1))},
             {e.out(0)});
    };
    m["broadcast_to"] = [](Emitter& e) { e.emit("Expand", {e.in(0), e.ints(e.ints_attr("shape"))}, {e.out(0)}); };
    m["tile"] = [](Emitter& e) { e.emit("Tile", {e.in(0), e.ints(e.ints_attr("reps"))}, {e.out(0)}); };
    m["pad"] = [](Emitter& e) {
      const std::vector<int64_t>& p = e.ints_attr("pads");  // (before, after) per dim
      std::vector<int64_t> o(p.size());
      const size_t r = p.size() / 2;
      for (size_t d = 0; d < r; ++d) {
        o[d] = p[2 * d];
        o[r + d] = p[2 * d + 1];
      }
      const std::string& mode = e.string_attr("mode");
      if (mode == "constant")
        return e.emit("Pad", {e.in(0), e.ints(o), e.scalar(e.in_meta(0).dtype, e.float_attr("value"))}, {e.out(0)},
                      {A::of_string("mode", "constant")});
      e.emit("Pad", {e.in(0), e.ints(o)}, {e.out(0)}, {A::of_string("mode", mode)});
    };
    m["gather"] = [](Emitter& e) {
      e.emit("Gather", {e.in(0), e.in(1)}, {e.out(0)}, {A::of_int("axis", e.int_attr("axis"))});
    };
    m["index_select"] = m["gather"];
    m["embedding"] = [](Emitter& e) { e.emit("Gather", {e.in(0), e.in(1)}, {e.out(0)}, {A::of_int("axis", 0)}); };
    m["gather_elements"] = [](Emitter& e) {
      e.emit("GatherElements", {e.in(0), e.in(1)}, {e.out(0)}, {A::of_int("axis", e.int_attr("axis"))});
    };
    m["gather_nd"] = [](Emitter& e) { e.emit("GatherND", {e.in(0), e.in(1)}, {e.out(0)}); };

    reduction(m, "sum", "ReduceSum");
    reduction(m, "mean", "ReduceMean");
    reduction(m, "max", "ReduceMax");
    reduction(m, "min", "ReduceMin");
    reduction(m, "prod", "ReduceProd");
    reduction(m, "logsumexp", "ReduceLogSumExp");
    m["var"] = [](Emitter& e) { variance(e, false); };
    m["std"] = [](Emitter& e) { variance(e, true); };
    m["argmax"] = [](Emitter& e) { arg_extreme(e, "ArgMax"); };
    m["argmin"] = [](Emitter& e) { arg_extreme(e, "ArgMin"); };
    m["cumsum"] = [](Emitter& e) {
      e.emit("CumSum", {e.in(0), e.ints({e.int_attr("axis")})}, {e.out(0)},
             {A::of_int("exclusive", e.bool_attr("exclusive")), A::of_int("reverse", e.bool_attr("reverse"))});
    };
    m["topk"] = [](Emitter& e) {
      // TopK always has both outputs; ONNX's indices are int64.
      const bool cast = e.out_meta(1).dtype != SPORA_DTYPE_I64;
      const std::string idx = cast ? e.fresh("idx") : e.out(1);
      e.emit("TopK", {e.in(0), e.ints({e.int_attr("k")})}, {e.out(0), idx},
             {A::of_int("axis", e.int_attr("axis")), A::of_int("largest", e.bool_attr("largest")),
              A::of_int("sorted", e.bool_attr("sorted"))});
      if (cast && e.used(1))
        e.emit("Cast", {idx}, {e.out(1)}, {A::of_int("to", onnx_data_type(e.out_meta(1).dtype))});
    };
    m["one_hot"] = [](Emitter& e) {
      const TensorMeta& o = e.out_meta(0);
      const HostTensor values = host_values(e, o.dtype, Shape::from(std::vector<int64_t>{2}.data(), 1, "onnx"),
                                            {e.float_attr("off_value"), e.float_attr("on_value")});
      e.emit("OneHot", {e.in(0), e.ints({e.int_attr("depth")}), e.initializer(values)}, {e.out(0)},
             {A::of_int("axis", -1)});
    };
    constant_op(m, "zeros");
    constant_op(m, "ones");
    constant_op(m, "full");
    constant_op(m, "arange");
    constant_op(m, "eye");
    return m;
  }();
  return table;
}

}  // namespace spora::io::onnx
