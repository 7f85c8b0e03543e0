// ONNX converters: elementwise math, activations, softmax, matrix products,
// constants and layout ops (Reshape, Flatten, Transpose, Concat).
#include <cstring>
#include <numeric>

#include "io/onnx_import.h"

namespace spora::io::onnx {
namespace {

int64_t norm_axis(Ctx& c, int64_t axis, int rank) {
  if (axis < -rank || axis >= rank)
    c.error("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

// Integer data known at import time (Reshape's shape), as int64s.
std::vector<int64_t> static_ints(Ctx& c, size_t i, const char* what) {
  const HostTensor* h = c.host(i);
  if (!h)
    c.error(std::string(what) + " must be a constant (an initializer or a Constant node): the importer does not "
                                "compute shapes at run time");
  if (h->shape.rank > 1) c.error(std::string(what) + " must be 1-D, got " + h->shape.str());
  const int64_t n = h->shape.numel();
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    if (h->dtype == SPORA_DTYPE_I64) std::memcpy(&v[k], &h->bytes[8 * k], 8);
    else if (h->dtype == SPORA_DTYPE_I32) {
      int32_t x;
      std::memcpy(&x, &h->bytes[4 * k], 4);
      v[k] = x;
    } else {
      c.error(std::string(what) + " must be int64, got " + dtype_name(h->dtype));
    }
  }
  return v;
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
  // Opset 13 made the axis a plain axis (earlier: flatten at axis, default 1).
  m[onnx] = [spora](Ctx& c, const Node&) {
    c.max_outputs(1);
    const ir::Value x = c.in(0);
    Attrs a;
    a.set("axis", AttrValue::of_int(norm_axis(c, c.attr_int("axis", -1), c.meta(x).shape.rank)));
    c.out(0, c.op(spora, {x}, a));
  };
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

// Reshape's shape: 0 copies the input's dimension (unless allowzero), -1 is
// inferred. When the first dimension is copied (0) and nothing else is -1,
// it is emitted as -1 so the model still takes other batch sizes.
void reshape(Ctx& c, const Node&) {
  c.max_outputs(1);
  const ir::Value x = c.in(0);
  std::vector<int64_t> shape = static_ints(c, 1, "the shape input");
  const Shape& in = c.meta(x).shape;
  const bool allowzero = c.attr_int("allowzero", 0) != 0;
  bool has_infer = false;
  for (int64_t d : shape) has_infer |= d == -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < -1) c.error("shape value " + std::to_string(shape[i]) + " is invalid");
    if (shape[i] == 0 && !allowzero) {
      if (static_cast<int>(i) >= in.rank) c.error("shape copies dimension " + std::to_string(i) + " of a rank-" + std::to_string(in.rank) + " input");
      shape[i] = (i == 0 && !has_infer) ? -1 : in[static_cast<int>(i)];
      has_infer |= shape[i] == -1;
    }
  }
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
}

}  // namespace spora::io::onnx
