// ONNX converters: elementwise math, activations, softmax, matrix products,
// constants and layout ops (Reshape, Flatten, Transpose, Concat).
#include <cstring>
#include <limits>
#include <numeric>

#include "io/onnx_import.h"

namespace spora::io::onnx {
namespace {

int64_t norm_axis(Ctx& c, int64_t axis, int rank) {
  if (axis < -rank || axis >= rank)
    c.error("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

void unary(std::map<std::string, Converter>& m, const char* onnx, const char* spora) {
  m[onnx] = [spora](Ctx& c, const Node&) {
    c.max_outputs(1);
    c.out(0, c.op(spora, {c.in(0)}));
  };
}

void binary(std::map<std::string, Converter>& m, const char* onnx, const char* spora) {
  m[onnx] = [spora](Ctx& c, const Node&) {
    c.max_outputs(1);
    c.out(0, c.op(spora, {c.in(0), c.in(1)}));
  };
}

void softmax_like(std::map<std::string, Converter>& m, const char* onnx, const char* spora) {
  // Opset 13 made the axis a plain axis. Before, the input was seen as 2-D
  // (flattened at axis, default 1) and normalised over everything after it.
  m[onnx] = [spora](Ctx& c, const Node&) {
    c.max_outputs(1);
    const ir::Value x = c.in(0);
    const Shape& s = c.meta(x).shape;
    Attrs a;
    if (c.opset() >= 13) {
      a.set("axis", AttrValue::of_int(norm_axis(c, c.attr_int("axis", -1), s.rank)));
      return c.out(0, c.op(spora, {x}, a));
    }
    const int64_t axis = s.rank == 0 ? 0 : norm_axis(c, c.attr_int("axis", 1), s.rank);
    a.set("axis", AttrValue::of_int(-1));
    if (axis >= s.rank - 1) return c.out(0, c.op(spora, {x}, a));
    int64_t inner = 1;
    for (int d = static_cast<int>(axis); d < s.rank; ++d) inner *= s[d];
    Attrs flat, back;
    flat.set("shape", AttrValue::of_ints({-1, inner}));
    std::vector<int64_t> dims(s.dims, s.dims + s.rank);
    if (axis > 0) dims[0] = -1;  // the batch stays free
    back.set("shape", AttrValue::of_ints(dims));
    c.out(0, c.op("reshape", {c.op(spora, {c.op("reshape", {x}, flat)}, a)}, back));
  };
}

// Sum, Mean, Max, Min: variadic with broadcasting, as a chain of binary ops.
void variadic(std::map<std::string, Converter>& m, const char* onnx, const char* spora, bool mean) {
  m[onnx] = [spora, mean](Ctx& c, const Node& n) {
    c.max_outputs(1);
    if (n.inputs.empty()) c.error("needs at least one input");
    ir::Value y = c.in(0);
    for (size_t i = 1; i < n.inputs.size(); ++i) y = c.op(spora, {y, c.in(i)});
    if (mean && n.inputs.size() > 1) y = c.op("div", {y, c.scalar(c.meta(y).dtype, static_cast<double>(n.inputs.size()))});
    c.out(0, y);
  };
}

double host_scalar(Ctx& c, size_t i, const char* what) {
  const HostTensor* h = c.host(i);
  if (!h || h->shape.numel() != 1) c.error(std::string(what) + " must be a scalar known at import time");
  switch (h->dtype) {
    case SPORA_DTYPE_F32: { float f; std::memcpy(&f, h->bytes.data(), 4); return f; }
    case SPORA_DTYPE_F64: { double d; std::memcpy(&d, h->bytes.data(), 8); return d; }
    case SPORA_DTYPE_I64: { int64_t v; std::memcpy(&v, h->bytes.data(), 8); return static_cast<double>(v); }
    case SPORA_DTYPE_I32: { int32_t v; std::memcpy(&v, h->bytes.data(), 4); return v; }
    default: c.error(std::string(what) + " has an unsupported dtype");
  }
}

// Clip: min/max attributes before opset 11, optional scalar inputs after.
void clip(Ctx& c, const Node&) {
  c.max_outputs(1);
  const ir::Value x = c.in(0);
  double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
  if (c.opset() < 11) {
    lo = c.attr_float("min", -std::numeric_limits<float>::infinity());
    hi = c.attr_float("max", std::numeric_limits<float>::infinity());
  } else {
    if (c.has_in(1)) lo = host_scalar(c, 1, "min");
    if (c.has_in(2)) hi = host_scalar(c, 2, "max");
  }
  Attrs a;
  a.set("min", AttrValue::of_float(lo));
  a.set("max", AttrValue::of_float(hi));
  c.out(0, c.op("clip", {x}, a));
}

// Reductions: axes as an attribute (ReduceSum before 13, the others before
// 18) or an input; no axes reduce everything unless noop_with_empty_axes.
void reduce(std::map<std::string, Converter>& m, const char* onnx, const char* spora, int64_t input_since) {
  const std::string name = onnx;
  m[onnx] = [spora, input_since, name](Ctx& c, const Node&) {
    c.max_outputs(1);
    ir::Value x = c.in(0);
    const std::vector<int64_t> axes = axes_input_or_attr(c, 1, input_since);
    if (axes.empty() && c.attr_int("noop_with_empty_axes", 0)) return c.out(0, x);
    Attrs a;
    a.set("axes", AttrValue::of_ints(axes));
    a.set("keepdims", AttrValue::of_bool(c.attr_int("keepdims", 1) != 0));
    if (name == "ReduceSumSquare" || name == "ReduceL2") x = c.op("mul", {x, x});
    ir::Value y = c.op(spora, {x}, a);
    if (name == "ReduceL2") y = c.op("sqrt", {y});
    c.out(0, y);
  };
}

void arg_extreme(std::map<std::string, Converter>& m, const char* onnx, const char* spora) {
  m[onnx] = [spora](Ctx& c, const Node&) {
    c.max_outputs(1);
    if (c.attr_int("select_last_index", 0)) c.error("select_last_index = 1 is not supported");
    const ir::Value x = c.in(0);
    Attrs a;
    a.set("axis", AttrValue::of_int(norm_axis(c, c.attr_int("axis", 0), c.meta(x).shape.rank)));
    a.set("keepdims", AttrValue::of_bool(c.attr_int("keepdims", 1) != 0));
    ir::Value y = c.op(spora, {x}, a);
    if (c.meta(y).dtype != SPORA_DTYPE_I64) {
      Attrs ca;
      ca.set("dtype", AttrValue::of_string("i64"));
      y = c.op("cast", {y}, ca);
    }
    c.out(0, y);
  };
}

// Einsum, the common cases: two operands, each ending in a matrix, with the
// same leading (batch) letters; the output is those letters and the two
// free ones, e.g. "bij,bjk->bik", "bhqd,bhkd->bhqk", "ij,jk->ik".
void einsum(Ctx& c, const Node& n) {
  c.max_outputs(1);
  std::string eq;
  for (char ch : c.attr_string("equation", "")) if (ch != ' ') eq += ch;
  const size_t comma = eq.find(','), arrow = eq.find("->");
  if (n.inputs.size() != 2 || comma == std::string::npos || arrow == std::string::npos || arrow < comma)
    c.error("equation '" + eq + "': only two-operand products with an explicit output (\"ab,bc->ac\") are supported");
  const std::string a = eq.substr(0, comma), b = eq.substr(comma + 1, arrow - comma - 1), o = eq.substr(arrow + 2);
  const auto refuse = [&] {
    c.error("equation '" + eq + "' is not a (batched) matrix product, the only Einsum form supported");
  };
  if (a.size() < 2 || a.size() != b.size() || o.size() != a.size()) refuse();
  const size_t nb = a.size() - 2;
  if (a.compare(0, nb, b, 0, nb) != 0 || a.compare(0, nb, o, 0, nb) != 0) refuse();
  const char a0 = a[nb], a1 = a[nb + 1], b0 = b[nb], b1 = b[nb + 1], o0 = o[nb], o1 = o[nb + 1];
  // The contracted letter is the one of a's matrix letters absent from the output.
  char k = 0;
  bool ta = false, tb = false;
  if (a1 != o0 && a1 != o1) { k = a1; ta = false; if (a0 != o0) refuse(); }
  else if (a0 != o0 && a0 != o1) { k = a0; ta = true; if (a1 != o0) refuse(); }
  else { refuse(); }
  if (b0 == k && b1 == o1) tb = false;
  else if (b1 == k && b0 == o1) tb = true;
  else refuse();
  Attrs at;
  at.set("transpose_a", AttrValue::of_bool(ta));
  at.set("transpose_b", AttrValue::of_bool(tb));
  c.out(0, c.op("matmul", {c.in(0), c.in(1)}, at));
}

// PRelu: x where x >= 0, slope * x elsewhere.
void prelu(Ctx& c, const Node&) {
  c.max_outputs(1);
  const ir::Value x = c.in(0), slope = c.in(1);
  const ir::Value zero = c.scalar(c.meta(x).dtype, 0.0);
  c.out(0, c.op("where", {c.op("less", {x, zero}), c.op("mul", {x, slope}), x}));
}

void hard_sigmoid(Ctx& c, const Node&) {
  c.max_outputs(1);
  const ir::Value x = c.in(0);
  const DType d = c.meta(x).dtype;
  const ir::Value y = c.op("add", {c.op("mul", {x, c.scalar(d, c.attr_float("alpha", 0.2f))}),
                                   c.scalar(d, c.attr_float("beta", 0.5f))});
  Attrs a;
  a.set("min", AttrValue::of_float(0.0));
  a.set("max", AttrValue::of_float(1.0));
  c.out(0, c.op("clip", {y}, a));
}

void identity(Ctx& c, const Node& n) {
  c.max_outputs(1);
  if (const HostTensor* h = c.host(0)) return c.set_host(0, *h);
  c.out(0, c.in(0));
  (void)n;
}

// Dropout at inference is the identity. A requested mask output or
// training_mode = true is refused.
void dropout(Ctx& c, const Node&) {
  c.max_outputs(1);
  if (c.has_in(2)) {
    const HostTensor* t = c.host(2);
    if (!t || t->bytes.size() != 1) c.error("training_mode must be a constant bool scalar");
    if (t->bytes[0]) c.error("training_mode = true is not supported (inference only)");
  }
  c.out(0, c.in(0));
}

void constant(Ctx& c, const Node& n) {
  c.max_outputs(1);
  if (n.attributes.size() != 1) c.error("needs exactly one value attribute");
  const Attribute& a = n.attributes[0];
  HostTensor h;
  if (a.name == "value") {
    if (!a.t) c.error("attribute value holds no tensor");
    h = decode_tensor(*a.t, c.what(), "");
  } else if (a.name == "value_float" || a.name == "value_floats") {
    const std::vector<float> v = a.name == "value_float" ? std::vector<float>{a.f} : a.floats;
    h.dtype = SPORA_DTYPE_F32;
    if (a.name == "value_floats") h.shape.push_back(static_cast<int64_t>(v.size()));
    h.bytes.resize(4 * v.size());
    if (!v.empty()) std::memcpy(h.bytes.data(), v.data(), h.bytes.size());
  } else if (a.name == "value_int" || a.name == "value_ints") {
    const std::vector<int64_t> v = a.name == "value_int" ? std::vector<int64_t>{a.i} : a.ints;
    h.dtype = SPORA_DTYPE_I64;
    if (a.name == "value_ints") h.shape.push_back(static_cast<int64_t>(v.size()));
    h.bytes.resize(8 * v.size());
    if (!v.empty()) std::memcpy(h.bytes.data(), v.data(), h.bytes.size());
  } else {
    c.error("attribute '" + a.name + "' is not supported (value, value_float(s), value_int(s))");
  }
  c.set_host(0, std::move(h));
}

// Y = alpha * op(A) @ op(B) + beta * C.
void gemm(Ctx& c, const Node&) {
  c.max_outputs(1);
  const ir::Value a = c.in(0), b = c.in(1);
  if (c.meta(a).shape.rank != 2 || c.meta(b).shape.rank != 2)
    c.error("A and B must be 2-D, got " + c.meta(a).shape.str() + " and " + c.meta(b).shape.str());
  const float alpha = c.attr_float("alpha", 1.f), beta = c.attr_float("beta", 1.f);
  // The usual fully connected layer (PyTorch's export of nn.Linear): B is
  // (out, in) and C a bias vector. As `linear` it gets the epilogue fusions
  // (bias, activation) the passes do for linear layers.
  if (c.attr_int("transA", 0) == 0 && c.attr_int("transB", 0) != 0 && alpha == 1.f && beta == 1.f && c.has_in(2)) {
    const ir::Value bias = c.in(2);
    const Shape& bs = c.meta(bias).shape;
    if (bs.rank == 1 && bs[0] == c.meta(b).shape[0] && c.meta(bias).dtype == c.meta(a).dtype)
      return c.out(0, c.op("linear", {a, b, bias}));
  }
  Attrs at;
  at.set("transpose_a", AttrValue::of_bool(c.attr_int("transA", 0) != 0));
  at.set("transpose_b", AttrValue::of_bool(c.attr_int("transB", 0) != 0));
  ir::Value y = c.op("matmul", {a, b}, at);
  const DType d = c.meta(y).dtype;
  if (alpha != 1.f) y = c.op("mul", {y, c.scalar(d, alpha)});
  if (c.has_in(2) && beta != 0.f) {
    ir::Value bias = c.in(2);
    if (beta != 1.f) bias = c.op("mul", {bias, c.scalar(d, beta)});
    y = c.op("add", {y, bias});
  }
  c.out(0, y);
}

// Reshapes dimensions k.. of x (static) into `suffix`, leaving the leading
// ones (dynamic) free: the suffix is merged into one dimension (split into
// slices, concatenated) and that split into the new sizes (split, stacked),
// ops whose attributes name only the static dimensions.
ir::Value reshape_suffix(Ctx& c, ir::Value x, size_t k, std::vector<int64_t> suffix) {
  const Shape in = c.meta(x).shape;
  int64_t total = 1, known = 1;
  int infer = -1;
  for (int d = static_cast<int>(k); d < in.rank; ++d) total *= in[d];
  for (size_t i = 0; i < suffix.size(); ++i) {
    if (suffix[i] == -1) infer = static_cast<int>(i);
    else known *= suffix[i];
  }
  if (infer >= 0 && known) suffix[static_cast<size_t>(infer)] = total / known;
  int64_t product = 1;
  for (int64_t d : suffix) product *= d;
  if (product != total || suffix.empty())
    c.error("cannot reshape the static dimensions of " + in.str() + " into the requested ones");
  constexpr int64_t kMaxPieces = 1024;  // a reshape is a few ops, not thousands
  ir::Value y = x;
  // Merge: (.., a, b, ..rest) -> (.., a*b, ..rest), from the left.
  for (int r = in.rank; r > static_cast<int>(k) + 1; --r) {
    const Shape s = c.meta(y).shape;
    const int ax = static_cast<int>(k);
    if (s[ax] > kMaxPieces) c.error("reshaping " + in.str() + " around dynamic dimensions takes too many pieces");
    Attrs sp, sq, cat;
    sp.set("axis", AttrValue::of_int(ax));
    sp.set("sections", AttrValue::of_int(s[ax]));
    sq.set("axes", AttrValue::of_ints({ax}));
    cat.set("axis", AttrValue::of_int(ax));
    std::vector<ir::Value> parts = c.graph().add_op("split", {y}, sp, c.loc());
    for (ir::Value& p : parts) p = c.op("squeeze", {p}, sq);
    y = parts.size() == 1 ? parts[0] : c.op("concat", parts, cat);
  }
  // Split the merged dimension into suffix[0], suffix[1], ... from the left.
  for (size_t i = 0; i + 1 < suffix.size(); ++i) {
    const int ax = static_cast<int>(k + i);
    const int64_t n = suffix[i];
    if (n > kMaxPieces) c.error("reshaping " + in.str() + " around dynamic dimensions takes too many pieces");
    Attrs sp, st;
    sp.set("axis", AttrValue::of_int(ax));
    sp.set("sections", AttrValue::of_int(n));
    st.set("axis", AttrValue::of_int(ax));
    const std::vector<ir::Value> parts = c.graph().add_op("split", {y}, sp, c.loc());
    y = c.op("stack", parts, st);
  }
  return y;
}

// Reshape's shape: 0 copies the input's dimension (unless allowzero), -1 is
// inferred. When the first dimension is copied (0) and nothing else is -1,
// it is emitted as -1 so the model still takes other batch sizes.
void reshape(Ctx& c, const Node&) {
  c.max_outputs(1);
  const ir::Value x = c.in(0);
  std::vector<bool> dyn;
  std::vector<int64_t> shape = c.static_ints(1, "the shape input", &dyn);
  const std::vector<int64_t> given = shape;
  const Shape& in = c.meta(x).shape;
  const bool allowzero = c.attr_int("allowzero", 0) != 0;
  bool has_infer = false;
  for (int64_t d : shape) has_infer |= d == -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < -1) c.error("shape value " + std::to_string(shape[i]) + " is invalid");
    if (shape[i] == 0 && !allowzero) {
      if (static_cast<int>(i) >= in.rank) c.error("shape copies dimension " + std::to_string(i) + " of a rank-" + std::to_string(in.rank) + " input");
      dyn[i] = dyn[i] || c.dynamic_dim(0, static_cast<int>(i));
      shape[i] = in[static_cast<int>(i)];
    }
  }
  // Dimensions that follow a dynamic input dimension (known from the probe
  // run, or the copied first dimension without one) become Spora's single
  // inferred dimension, so that the model runs at other sizes.
  size_t ndyn = 0, at = 0;
  for (size_t i = 0; i < shape.size(); ++i)
    if (dyn[i]) {
      ++ndyn;
      at = i;
    }
  if (ndyn == 0 && !given.empty() && given[0] == 0 && !allowzero && !has_infer) {
    ndyn = 1;
    at = 0;
  }
  if (ndyn + (has_infer ? 1 : 0) > 1) {
    // Several dynamic dimensions: the usual case keeps them as a leading
    // prefix (batch, sequence) and reshapes the static rest (heads).
    size_t k = at + 1;
    bool prefix = k <= static_cast<size_t>(in.rank);
    for (size_t i = 0; prefix && i < k; ++i) prefix = shape[i] == in[static_cast<int>(i)];
    if (prefix) return c.out(0, reshape_suffix(c, x, k, std::vector<int64_t>(shape.begin() + static_cast<long>(k), shape.end())));
    c.error("the target shape has " + std::to_string(ndyn + (has_infer ? 1 : 0)) +
            " dimensions that follow dynamic input dimensions (or are -1); Spora's reshape infers one. Give the "
            "model's inputs fixed sizes (all but one dynamic dimension) to import it");
  }
  if (ndyn == 1) shape[at] = -1;
  Attrs a;
  a.set("shape", AttrValue::of_ints(shape));
  c.out(0, c.op("reshape", {x}, a));
}

void flatten(Ctx& c, const Node&) {
  c.max_outputs(1);
  const ir::Value x = c.in(0);
  const Shape& s = c.meta(x).shape;
  int64_t axis = c.attr_int("axis", 1);
  if (axis < -s.rank || axis > s.rank) c.error("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(s.rank));
  if (axis < 0) axis += s.rank;
  int64_t inner = 1;
  for (int i = static_cast<int>(axis); i < s.rank; ++i) inner *= s[i];
  Attrs a;
  // The outer size is inferred, so that another batch size still fits.
  a.set("shape", AttrValue::of_ints(axis == 0 ? std::vector<int64_t>{1, -1} : std::vector<int64_t>{-1, inner}));
  c.out(0, c.op("reshape", {x}, a));
}

void transpose(Ctx& c, const Node&) {
  c.max_outputs(1);
  const ir::Value x = c.in(0);
  const int r = c.meta(x).shape.rank;
  std::vector<int64_t> perm(static_cast<size_t>(r));
  std::iota(perm.rbegin(), perm.rend(), 0);
  perm = c.attr_ints("perm", perm);
  Attrs a;
  a.set("perm", AttrValue::of_ints(perm));
  c.out(0, c.op("transpose", {x}, a));
}

void concat(Ctx& c, const Node& n) {
  c.max_outputs(1);
  std::vector<ir::Value> xs;
  for (size_t i = 0; i < n.inputs.size(); ++i) xs.push_back(c.in(i));
  if (xs.empty()) c.error("needs at least one input");
  if (!c.has_attr("axis")) c.error("attribute axis is required");
  Attrs a;
  a.set("axis", AttrValue::of_int(norm_axis(c, c.attr_int("axis", 0), c.meta(xs[0]).shape.rank)));
  c.out(0, c.op("concat", xs, a));
}

void gelu(Ctx& c, const Node&) {
  c.max_outputs(1);
  Attrs a;
  a.set("approximate", AttrValue::of_string(c.attr_string("approximate", "none")));
  c.out(0, c.op("gelu", {c.in(0)}, a));
}

}  // namespace

void add_math_converters(std::map<std::string, Converter>& m) {
  binary(m, "Add", "add");
  binary(m, "Sub", "sub");
  binary(m, "Mul", "mul");
  binary(m, "Div", "div");
  unary(m, "Relu", "relu");
  unary(m, "Sigmoid", "sigmoid");
  unary(m, "Tanh", "tanh");
  unary(m, "Erf", "erf");
  unary(m, "Exp", "exp");
  unary(m, "Sqrt", "sqrt");
  unary(m, "Neg", "neg");
  unary(m, "Abs", "abs");
  softmax_like(m, "Softmax", "softmax");
  softmax_like(m, "LogSoftmax", "log_softmax");
  m["MatMul"] = [](Ctx& c, const Node&) {
    c.max_outputs(1);
    c.out(0, c.op("matmul", {c.in(0), c.in(1)}));
  };
  m["Gemm"] = gemm;
  m["Identity"] = identity;
  m["Dropout"] = dropout;
  m["Constant"] = constant;
  m["Reshape"] = reshape;
  m["Flatten"] = flatten;
  m["Transpose"] = transpose;
  m["Concat"] = concat;
  m["Gelu"] = gelu;  // opset 20
  binary(m, "Pow", "pow");
  binary(m, "Equal", "equal");
  binary(m, "Less", "less");
  binary(m, "Greater", "greater");
  binary(m, "LessOrEqual", "less_equal");
  binary(m, "GreaterOrEqual", "greater_equal");
  binary(m, "And", "logical_and");
  binary(m, "Or", "logical_or");
  binary(m, "Xor", "logical_xor");
  unary(m, "Not", "logical_not");
  unary(m, "Reciprocal", "reciprocal");
  unary(m, "Log", "log");
  unary(m, "Floor", "floor");
  unary(m, "Ceil", "ceil");
  unary(m, "Round", "round");
  unary(m, "Sign", "sign");
  unary(m, "Sin", "sin");
  unary(m, "Cos", "cos");
  variadic(m, "Sum", "add", false);
  variadic(m, "Mean", "add", true);
  variadic(m, "Max", "maximum", false);
  variadic(m, "Min", "minimum", false);
  m["Clip"] = clip;
  m["LeakyRelu"] = [](Ctx& c, const Node&) {
    c.max_outputs(1);
    Attrs a;
    a.set("alpha", AttrValue::of_float(c.attr_float("alpha", 0.01f)));
    c.out(0, c.op("leaky_relu", {c.in(0)}, a));
  };
  m["Softplus"] = [](Ctx& c, const Node&) {
    c.max_outputs(1);
    c.out(0, c.op("softplus", {c.in(0)}));
  };
  m["PRelu"] = prelu;
  m["HardSigmoid"] = hard_sigmoid;
  m["Einsum"] = einsum;
  reduce(m, "ReduceSum", "sum", 13);
  reduce(m, "ReduceMean", "mean", 18);
  reduce(m, "ReduceMax", "max", 18);
  reduce(m, "ReduceMin", "min", 18);
  reduce(m, "ReduceProd", "prod", 18);
  reduce(m, "ReduceLogSumExp", "logsumexp", 18);
  reduce(m, "ReduceSumSquare", "sum", 18);
  reduce(m, "ReduceL2", "sum", 18);
  arg_extreme(m, "ArgMax", "argmax");
  arg_extreme(m, "ArgMin", "argmin");
}

}  // namespace spora::io::onnx
