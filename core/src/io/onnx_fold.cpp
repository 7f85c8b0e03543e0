// Import-time evaluation of ONNX shape subgraphs: Shape, Size, and the
// Gather / Slice / Concat / Unsqueeze / Squeeze / Reshape / Cast /
// arithmetic / ConstantOfShape / Range / Expand / Where nodes whose inputs
// are all known while importing (initializers, Constants, earlier folded
// values). Their results stay host values; the converters read them as
// attributes (a Reshape's shape) or materialise them as constants.
// Anything past kMaxFoldElements is left to the graph.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <set>

#include "io/onnx_import.h"

namespace spora::io::onnx {
namespace {

// 1 Mi elements (8 MiB as numbers): real shape subgraphs are tiny, and a
// hostile file must not make the importer allocate by what it claims.
constexpr int64_t kMaxFoldElements = int64_t{1} << 20;

// Thrown by make() for a result past kMaxFoldElements: the node is left to
// its converter.
struct TooLarge {};

// A host value as numbers: int64 for integer and bool dtypes, double for
// floats (so INT64_MAX in a Slice's ends survives).
struct HV {
  DType dtype = SPORA_DTYPE_I64;
  std::vector<int64_t> shape;
  std::vector<int64_t> i;
  std::vector<double> f;
  bool is_float() const { return dtype_is_float(dtype); }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  double at(size_t k) const { return is_float() ? f[k] : static_cast<double>(i[k]); }
  int64_t iat(size_t k) const { return is_float() ? to_int(f[k]) : i[k]; }
  // A float as an int64, saturating (NaN as the most negative): a cast of
  // a value out of range is undefined, and a file may hold any value.
  static int64_t to_int(double v) {
    if (!(v >= -9.2e18)) return INT64_MIN;
    return v > 9.2e18 ? INT64_MAX : static_cast<int64_t>(v);
  }
};

uint16_t f32_to_half(float x, bool bf16) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  if (bf16) return static_cast<uint16_t>((b + 0x7fff + ((b >> 16) & 1)) >> 16);
  const uint32_t sign = (b >> 16) & 0x8000;
  const int32_t e = static_cast<int32_t>((b >> 23) & 0xff) - 127 + 15;
  uint32_t m = b & 0x7fffff;
  if (((b >> 23) & 0xff) == 0xff) return static_cast<uint16_t>(sign | 0x7c00 | (m ? 0x200 : 0));
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    m |= 0x800000;
    const uint32_t shift = static_cast<uint32_t>(14 - e);
    return static_cast<uint16_t>(sign | ((m + (1u << (shift - 1))) >> shift));
  }
  return static_cast<uint16_t>((sign | (static_cast<uint32_t>(e) << 10) | (m >> 13)) + ((m >> 12) & 1));
}

float half_to_f32(uint16_t h, bool bf16) {
  uint32_t b;
  if (bf16) {
    b = static_cast<uint32_t>(h) << 16;
  } else {
    const uint32_t sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (e == 0) {
      const float v = std::ldexp(static_cast<float>(m), -24);
      return sign ? -v : v;
    }
    b = sign | (e == 31 ? 0x7f800000u | (m << 13) : ((e + 112) << 23) | (m << 13));
  }
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

HV from_host(const HostTensor& t) {
  HV h;
  h.dtype = t.dtype;
  h.shape.assign(t.shape.dims, t.shape.dims + t.shape.rank);
  const size_t n = static_cast<size_t>(t.shape.numel());
  if (h.is_float()) h.f.resize(n);
  else h.i.resize(n);
  for (size_t k = 0; k < n; ++k) {
    const uint8_t* p = &t.bytes[k * dtype_size(t.dtype)];
    switch (t.dtype) {
      case SPORA_DTYPE_F32: { float x; std::memcpy(&x, p, 4); h.f[k] = x; break; }
      case SPORA_DTYPE_F64: std::memcpy(&h.f[k], p, 8); break;
      case SPORA_DTYPE_F16:
      case SPORA_DTYPE_BF16: { uint16_t x; std::memcpy(&x, p, 2); h.f[k] = half_to_f32(x, t.dtype == SPORA_DTYPE_BF16); break; }
      case SPORA_DTYPE_I32: { int32_t x; std::memcpy(&x, p, 4); h.i[k] = x; break; }
      case SPORA_DTYPE_I64: std::memcpy(&h.i[k], p, 8); break;
      default: h.i[k] = *p; break;  // u8, bool
    }
  }
  return h;
}

HostTensor to_host(const HV& h) {
  HostTensor t;
  t.dtype = h.dtype;
  t.shape = Shape::from(h.shape.data(), static_cast<int32_t>(h.shape.size()), "onnx");
  const size_t n = static_cast<size_t>(h.numel()), es = dtype_size(h.dtype);
  t.bytes.resize(n * es);
  for (size_t k = 0; k < n; ++k) {
    uint8_t* p = &t.bytes[k * es];
    switch (h.dtype) {
      case SPORA_DTYPE_F32: { const float x = static_cast<float>(h.at(k)); std::memcpy(p, &x, 4); break; }
      case SPORA_DTYPE_F64: { const double x = h.at(k); std::memcpy(p, &x, 8); break; }
      case SPORA_DTYPE_F16:
      case SPORA_DTYPE_BF16: {
        const uint16_t x = f32_to_half(static_cast<float>(h.at(k)), h.dtype == SPORA_DTYPE_BF16);
        std::memcpy(p, &x, 2);
        break;
      }
      case SPORA_DTYPE_I32: { const int32_t x = static_cast<int32_t>(h.iat(k)); std::memcpy(p, &x, 4); break; }
      case SPORA_DTYPE_I64: { const int64_t x = h.iat(k); std::memcpy(p, &x, 8); break; }
      case SPORA_DTYPE_BOOL: *p = h.at(k) != 0; break;
      default: *p = static_cast<uint8_t>(h.iat(k)); break;
    }
  }
  return t;
}

HV make(DType d, std::vector<int64_t> shape) {
  int64_t total = 1;
  for (int64_t x : shape) {
    if (x < 0) throw TooLarge{};
    if (x && total > kMaxFoldElements / x) throw TooLarge{};
    total *= x;
  }
  if (total > kMaxFoldElements) throw TooLarge{};
  HV h;
  h.dtype = d;
  h.shape = std::move(shape);
  const int64_t n = h.numel();
  if (h.is_float()) h.f.assign(static_cast<size_t>(n), 0.0);
  else h.i.assign(static_cast<size_t>(n), 0);
  return h;
}

void set(HV& h, size_t k, double fv, int64_t iv) {
  if (h.is_float()) h.f[k] = fv;
  else h.i[k] = iv;
}

std::vector<int64_t> strides_of(const std::vector<int64_t>& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

// Element index of `src` (broadcast into `out`) for the flat output index.
size_t bcast_index(const HV& src, const std::vector<int64_t>& out, int64_t flat) {
  const size_t off = out.size() - src.shape.size();
  const std::vector<int64_t> ost = strides_of(out), sst = strides_of(src.shape);
  size_t k = 0;
  for (size_t d = 0; d < out.size(); ++d) {
    const int64_t c = (flat / ost[d]) % out[d];
    if (d >= off && src.shape[d - off] != 1) k += static_cast<size_t>(c * sst[d - off]);
  }
  return k;
}

std::vector<int64_t> bcast_shape(Ctx& c, const std::vector<const HV*>& xs) {
  size_t r = 0;
  for (const HV* x : xs) r = std::max(r, x->shape.size());
  std::vector<int64_t> out(r, 1);
  for (const HV* x : xs)
    for (size_t d = 0; d < x->shape.size(); ++d) {
      int64_t& o = out[r - x->shape.size() + d];
      const int64_t v = x->shape[d];
      if (o == 1) o = v;
      else if (v != 1 && v != o) c.error("shapes do not broadcast");
    }
  return out;
}

int64_t axis_of(Ctx& c, int64_t a, size_t rank) {
  const int64_t r = static_cast<int64_t>(rank);
  if (a < -r || a >= r) c.error("axis " + std::to_string(a) + " is out of range for rank " + std::to_string(r));
  return a < 0 ? a + r : a;
}

std::vector<int64_t> ints_of(const HV& h) {
  std::vector<int64_t> v;
  for (size_t k = 0; k < static_cast<size_t>(h.numel()); ++k) v.push_back(h.iat(k));
  return v;
}

HV binary(Ctx& c, const std::string& op, const HV& a, const HV& b) {
  const std::vector<int64_t> s = bcast_shape(c, {&a, &b});
  const bool cmp = op == "Equal" || op == "Less" || op == "Greater" || op == "LessOrEqual" || op == "GreaterOrEqual";
  const bool logic = op == "And" || op == "Or";
  HV o = make(cmp || logic ? SPORA_DTYPE_BOOL : a.dtype, s);
  const int64_t n = o.numel();
  for (int64_t k = 0; k < n; ++k) {
    const size_t ka = bcast_index(a, s, k), kb = bcast_index(b, s, k);
    if (a.is_float()) {
      const double x = a.f[ka], y = b.at(kb);
      double r = 0;
      if (op == "Add") r = x + y;
      else if (op == "Sub") r = x - y;
      else if (op == "Mul") r = x * y;
      else if (op == "Div") r = x / y;
      else if (op == "Pow") r = std::pow(x, y);
      else if (op == "Max") r = std::max(x, y);
      else if (op == "Min") r = std::min(x, y);
      else if (op == "Equal") r = x == y;
      else if (op == "Less") r = x < y;
      else if (op == "Greater") r = x > y;
      else if (op == "LessOrEqual") r = x <= y;
      else if (op == "GreaterOrEqual") r = x >= y;
      else c.error("is not evaluated on float shape values");
      if (cmp) o.i[static_cast<size_t>(k)] = r != 0;
      else o.f[static_cast<size_t>(k)] = r;
      continue;
    }
    const int64_t x = a.i[ka], y = b.iat(kb);
    int64_t r = 0;
    bool overflow = false;
    if (op == "Add") overflow = __builtin_add_overflow(x, y, &r);
    else if (op == "Sub") overflow = __builtin_sub_overflow(x, y, &r);
    else if (op == "Mul") overflow = __builtin_mul_overflow(x, y, &r);
    else if (op == "Div" || op == "Mod") {
      if (y == 0) c.error("integer division by zero in a shape computation");
      if (y == -1 && x == INT64_MIN) c.error("integer overflow in a shape computation (" + op + ")");
      r = op == "Div" ? x / y : x % y;  // ONNX integer Div truncates; Mod (fmod=0) takes the divisor's sign
      if (op == "Mod" && r != 0 && ((r < 0) != (y < 0))) r += y;
    } else if (op == "Max") r = std::max(x, y);
    else if (op == "Min") r = std::min(x, y);
    else if (op == "Equal") r = x == y;
    else if (op == "Less") r = x < y;
    else if (op == "Greater") r = x > y;
    else if (op == "LessOrEqual") r = x <= y;
    else if (op == "GreaterOrEqual") r = x >= y;
    else if (op == "And") r = x && y;
    else if (op == "Or") r = x || y;
    else c.error("is not evaluated on integer shape values");
    if (overflow) c.error("integer overflow in a shape computation (" + op + ")");
    o.i[static_cast<size_t>(k)] = r;
  }
  return o;
}

HV gather(Ctx& c, const HV& x, const HV& idx, int64_t axis) {
  axis = axis_of(c, axis, x.shape.size());
  std::vector<int64_t> s(x.shape.begin(), x.shape.begin() + axis);
  s.insert(s.end(), idx.shape.begin(), idx.shape.end());
  s.insert(s.end(), x.shape.begin() + axis + 1, x.shape.end());
  HV o = make(x.dtype, s);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.shape.size(); ++d) inner *= x.shape[d];
  const int64_t dim = x.shape[static_cast<size_t>(axis)], ni = idx.numel();
  size_t k = 0;
  for (int64_t a = 0; a < outer; ++a)
    for (int64_t j = 0; j < ni; ++j) {
      int64_t g = idx.iat(static_cast<size_t>(j));
      if (g < -dim || g >= dim) c.error("index " + std::to_string(g) + " is out of range for size " + std::to_string(dim));
      if (g < 0) g += dim;
      for (int64_t b = 0; b < inner; ++b, ++k) {
        const size_t src = static_cast<size_t>((a * dim + g) * inner + b);
        set(o, k, x.is_float() ? x.f[src] : 0, x.is_float() ? 0 : x.i[src]);
      }
    }
  return o;
}

HV slice(Ctx& c, const HV& x, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
         std::vector<int64_t> axes, std::vector<int64_t> steps) {
  const size_t r = x.shape.size();
  if (axes.empty()) axes = [&] { std::vector<int64_t> a; for (size_t d = 0; d < starts.size(); ++d) a.push_back(static_cast<int64_t>(d)); return a; }();
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    c.error("starts, ends, axes and steps must have the same length");
  std::vector<int64_t> b(r, 0), st(r, 1), out = x.shape;
  for (size_t d = 0; d < r; ++d) b[d] = 0;
  for (size_t k = 0; k < starts.size(); ++k) {
    const size_t a = static_cast<size_t>(axis_of(c, axes[k], r));
    const int64_t dim = x.shape[a], step = steps[k];
    if (step == 0) c.error("a slice step is 0");
    auto clamp = [&](int64_t v, bool is_end) {
      if (v < 0) v += dim;
      if (step > 0) return std::min(std::max<int64_t>(v, 0), dim);
      return std::min(std::max<int64_t>(v, is_end ? -1 : 0), dim - 1);
    };
    const int64_t s0 = clamp(starts[k], false), e0 = clamp(ends[k], true);
    const int64_t n = step > 0 ? std::max<int64_t>(0, (e0 - s0 + step - 1) / step)
                               : std::max<int64_t>(0, (s0 - e0 + (-step) - 1) / (-step));
    b[a] = s0;
    st[a] = step;
    out[a] = n;
  }
  HV o = make(x.dtype, out);
  const std::vector<int64_t> xs = strides_of(x.shape), os = strides_of(out);
  for (int64_t k = 0; k < o.numel(); ++k) {
    int64_t src = 0;
    for (size_t d = 0; d < r; ++d) src += (b[d] + ((k / os[d]) % out[d]) * st[d]) * xs[d];
    set(o, static_cast<size_t>(k), x.is_float() ? x.f[static_cast<size_t>(src)] : 0,
        x.is_float() ? 0 : x.i[static_cast<size_t>(src)]);
  }
  return o;
}

HV cast(const HV& x, DType to) {
  HV o = make(to, x.shape);
  for (size_t k = 0; k < static_cast<size_t>(x.numel()); ++k) {
    if (to == SPORA_DTYPE_BOOL) o.i[k] = x.at(k) != 0;
    else set(o, k, x.at(k), x.iat(k));
  }
  return o;
}

std::vector<int64_t> squeeze_shape(Ctx& c, const std::vector<int64_t>& s, std::vector<int64_t> axes) {
  std::vector<bool> drop(s.size(), false);
  if (axes.empty())
    for (size_t d = 0; d < s.size(); ++d) drop[d] = s[d] == 1;
  for (int64_t a : axes) {
    const size_t d = static_cast<size_t>(axis_of(c, a, s.size()));
    if (s[d] != 1) c.error("cannot squeeze dimension " + std::to_string(d) + " of size " + std::to_string(s[d]));
    drop[d] = true;
  }
  std::vector<int64_t> o;
  for (size_t d = 0; d < s.size(); ++d)
    if (!drop[d]) o.push_back(s[d]);
  return o;
}

std::vector<int64_t> unsqueeze_shape(Ctx& c, const std::vector<int64_t>& s, const std::vector<int64_t>& axes) {
  const size_t r = s.size() + axes.size();
  std::vector<bool> ins(r, false);
  for (int64_t a : axes) {
    const size_t d = static_cast<size_t>(axis_of(c, a, r));
    if (ins[d]) c.error("axes repeat " + std::to_string(d));
    ins[d] = true;
  }
  std::vector<int64_t> o;
  size_t k = 0;
  for (size_t d = 0; d < r; ++d) o.push_back(ins[d] ? 1 : s[k++]);
  return o;
}

// The slice a Slice node takes of `x` (its starts/ends/axes/steps as the
// node's opset gives them, already read into `in`).
HV slice_node(Ctx& c, const HV& x, const std::vector<HV>& in) {
  if (c.opset() < 10) return slice(c, x, c.attr_ints("starts", {}), c.attr_ints("ends", {}), c.attr_ints("axes", {}), {});
  auto opt = [&](size_t i) { return i < in.size() && c.has_in(i) ? ints_of(in[i]) : std::vector<int64_t>{}; };
  return slice(c, x, ints_of(in.at(1)), ints_of(in.at(2)), opt(3), opt(4));
}

// 0, 1, ..., numel - 1 in x's shape: running an indexing op on it tells
// which element of x each result element is.
HV positions(const HV& x) {
  HV h = make(SPORA_DTYPE_I64, x.shape);
  for (size_t k = 0; k < h.i.size(); ++k) h.i[k] = static_cast<int64_t>(k);
  return h;
}

// The DimSources of a folded result, for the ops that move elements
// without computing new ones.
std::vector<DimSource> sources_of(Ctx& c, const Node& n, const std::vector<HV>& in, const HV& o) {
  const std::string& op = n.op_type;
  if (op == "Concat") {
    std::vector<DimSource> r;
    bool any = false;
    for (size_t i = 0; i < in.size(); ++i) {
      if (in[i].shape.size() != 1) return {};
      std::vector<DimSource> s = c.dim_sources(i);
      any |= !s.empty();
      s.resize(static_cast<size_t>(in[i].numel()));
      r.insert(r.end(), s.begin(), s.end());
    }
    return any ? r : std::vector<DimSource>{};
  }
  const std::vector<DimSource> s0 = c.dim_sources(0);
  if (s0.empty() || in.empty() || s0.size() != static_cast<size_t>(in[0].numel())) return {};
  if (op == "Identity" || op == "Cast" || op == "Unsqueeze" || op == "Squeeze" || op == "Reshape" || op == "Flatten")
    return static_cast<size_t>(o.numel()) == s0.size() ? s0 : std::vector<DimSource>{};
  HV idx;
  if (op == "Gather") idx = gather(c, positions(in[0]), in.at(1), c.attr_int("axis", 0));
  else if (op == "Slice") idx = slice_node(c, positions(in[0]), in);
  else return {};
  std::vector<DimSource> r;
  for (int64_t k : idx.i) r.push_back(s0[static_cast<size_t>(k)]);
  return r;
}

// Range(0, n, 1) with n a dimension that follows a dynamic input dimension
// (position ids up to the sequence length): 0 .. n-1 built in the graph
// from that dimension, so it runs at any size. Other ranges over a dynamic
// size would be constants of the traced size: refused.
void range_over_dynamic_size(Ctx& c) {
  const HostTensor *start = c.host(0), *limit = c.host(1), *delta = c.host(2);
  const std::vector<DimSource> src = c.dim_sources(1);
  auto scalar_is = [](const HostTensor* h, double v) {
    if (!h || h->shape.numel() != 1) return false;
    const HV x = from_host(*h);
    return x.at(0) == v;
  };
  if (!limit || limit->shape.numel() != 1 || c.follows_dynamic(0) || c.follows_dynamic(2) || !scalar_is(start, 0) ||
      !scalar_is(delta, 1) || src.size() != 1 || !src[0].known())
    c.error("a Range over a dynamic size (batch or sequence) is kept symbolic only as Range(0, n, 1) with n one "
            "dimension read by Shape; give the model's inputs fixed sizes to import this one");
  c.max_outputs(1);
  c.out(0, dynamic_arange(c, src[0], start->dtype));
}

}  // namespace

// Axes from the input (opset >= 13) or the attribute (earlier).
std::vector<int64_t> axes_input_or_attr(Ctx& c, size_t input, int64_t since) {
  if (c.opset() >= since) {
    if (!c.has_in(input)) return {};
    return c.static_ints(input, "axes");
  }
  return c.attr_ints("axes", {});
}

static bool fold_node(Ctx& c, const Node& n);

bool try_fold(Ctx& c, const Node& n) {
  try {
    return fold_node(c, n);
  } catch (const TooLarge&) {
    return false;
  }
}

static bool fold_node(Ctx& c, const Node& n) {
  const std::string& op = n.op_type;
  if (op == "Shape" || op == "Size") {
    if (!c.has_in(0)) return false;
    const Shape s = c.shape_of(0);
    int64_t r = s.rank, start = c.attr_int("start", 0), end = c.attr_int("end", r);
    if (op == "Size") {
      HV o = make(SPORA_DTYPE_I64, {});
      o.i[0] = s.numel();
      c.set_host(0, to_host(o));
      return true;
    }
    start = std::min(std::max<int64_t>(start < 0 ? start + r : start, 0), r);
    end = std::min(std::max<int64_t>(end < 0 ? end + r : end, 0), r);
    HV o = make(SPORA_DTYPE_I64, {std::max<int64_t>(0, end - start)});
    std::vector<DimSource> src;
    for (int64_t d = start; d < end; ++d) {
      o.i[static_cast<size_t>(d - start)] = s[static_cast<int>(d)];
      src.push_back(DimSource{n.inputs[0], static_cast<int>(d)});
    }
    c.set_host(0, to_host(o));
    c.set_dim_sources(0, std::move(src));
    return true;
  }
  static const std::set<std::string> foldable = {
      "Gather", "Slice", "Concat", "Unsqueeze", "Squeeze", "Reshape", "Cast", "Identity", "Add", "Sub", "Mul",
      "Div", "Mod", "Pow", "Max", "Min", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or",
      "Not", "Where", "Neg", "Abs", "Sqrt", "Floor", "Ceil", "Reciprocal", "ConstantOfShape", "Range", "Expand",
      "ReduceProd", "Flatten"};
  if (!foldable.count(op)) return false;
  // A Range or Slice bound that follows a dynamic dimension: the Range is
  // rebuilt in the graph, the Slice goes to its converter.
  if (op == "Range" || op == "Slice") {
    bool dyn = false;
    for (size_t i = op == "Range" ? 0 : 1; i < n.inputs.size(); ++i) dyn |= c.follows_dynamic(i);
    if (dyn && op == "Slice") return false;
    if (dyn) {
      range_over_dynamic_size(c);
      return true;
    }
  }
  std::vector<HV> in;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (!c.has_in(i)) {
      in.emplace_back();
      continue;
    }
    const HostTensor* h = c.host(i);
    // Weights stay weights (an op on them stays in the graph); float
    // scalars (Range's start and delta, a scale) are numbers here.
    if (!h || (c.is_weight(i) && h->shape.numel() > 1) || h->shape.numel() > kMaxFoldElements) return false;
    in.push_back(from_host(*h));
  }
  // Inputs a node must have (a damaged file may give fewer).
  static const std::map<std::string, size_t> min_inputs = {
      {"Gather", 2}, {"Reshape", 2}, {"Where", 3}, {"Range", 3}, {"Expand", 2}, {"Add", 2}, {"Sub", 2},
      {"Mul", 2}, {"Div", 2}, {"Mod", 2}, {"Pow", 2}, {"Equal", 2}, {"Less", 2}, {"Greater", 2},
      {"LessOrEqual", 2}, {"GreaterOrEqual", 2}, {"And", 2}, {"Or", 2}};
  size_t need = 1;
  if (auto m = min_inputs.find(op); m != min_inputs.end()) need = m->second;
  else if (op == "Slice" && c.opset() >= 10) need = 3;
  for (size_t i = 0; i < need; ++i)
    if (i >= in.size() || !c.has_in(i)) c.error("input " + std::to_string(i) + " is missing");
  c.max_outputs(1);
  HV o;
  if (op == "Identity") {
    o = in[0];
  } else if (op == "Gather") {
    o = gather(c, in[0], in.at(1), c.attr_int("axis", 0));
  } else if (op == "Slice") {
    o = slice_node(c, in[0], in);
  } else if (op == "Concat") {
    const int64_t axis = axis_of(c, c.attr_int("axis", 0), in[0].shape.size());
    std::vector<int64_t> s = in[0].shape;
    s[static_cast<size_t>(axis)] = 0;
    for (const HV& x : in) {
      if (x.shape.size() != s.size()) c.error("inputs have different ranks");
      s[static_cast<size_t>(axis)] += x.shape[static_cast<size_t>(axis)];
    }
    o = make(in[0].dtype, s);
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= s[static_cast<size_t>(d)];
    size_t k = 0;
    for (int64_t a = 0; a < outer; ++a)
      for (const HV& x : in) {
        const int64_t chunk = x.numel() / std::max<int64_t>(outer, 1);
        for (int64_t j = 0; j < chunk; ++j, ++k) {
          const size_t src = static_cast<size_t>(a * chunk + j);
          set(o, k, x.at(src), x.iat(src));
        }
      }
  } else if (op == "Unsqueeze" || op == "Squeeze") {
    o = in[0];
    const std::vector<int64_t> axes = axes_input_or_attr(c, 1, 13);
    o.shape = op == "Squeeze" ? squeeze_shape(c, in[0].shape, axes) : unsqueeze_shape(c, in[0].shape, axes);
  } else if (op == "Reshape" || op == "Flatten") {
    o = in[0];
    if (op == "Flatten") {
      int64_t axis = c.attr_int("axis", 1), r = static_cast<int64_t>(in[0].shape.size());
      if (axis < 0) axis += r;
      if (axis < 0 || axis > r)
        c.error("Flatten axis " + std::to_string(c.attr_int("axis", 1)) + " is outside [-" + std::to_string(r) +
                ", " + std::to_string(r) + "] for an input of rank " + std::to_string(r));
      int64_t outer = 1;
      for (int64_t d = 0; d < axis; ++d) outer *= in[0].shape[static_cast<size_t>(d)];
      o.shape = {outer, outer ? in[0].numel() / outer : 0};
    } else {
      std::vector<int64_t> s = ints_of(in.at(1));
      int64_t known = 1, infer = -1;
      for (size_t d = 0; d < s.size(); ++d) {
        if (s[d] == 0 && !c.attr_int("allowzero", 0)) {
          // 0 copies the input's dimension d, which must exist.
          if (d >= in[0].shape.size())
            c.error("Reshape shape element " + std::to_string(d) + " is 0 (copy the input's dimension) but the input has rank " +
                    std::to_string(in[0].shape.size()));
          s[d] = in[0].shape[d];
        }
        if (s[d] == -1) infer = static_cast<int64_t>(d);
        else known *= s[d];
      }
      if (infer >= 0) s[static_cast<size_t>(infer)] = known ? in[0].numel() / known : 0;
      o.shape = s;
      if (o.numel() != in[0].numel()) c.error("cannot reshape a shape value");
    }
  } else if (op == "Cast") {
    const DType to = spora_dtype(static_cast<int32_t>(c.attr_int("to", 0)));
    if (to == SPORA_DTYPE_INVALID) c.error("Cast to an element type Spora does not support");
    o = cast(in[0], to);
  } else if (op == "Not" || op == "Neg" || op == "Abs" || op == "Sqrt" || op == "Floor" || op == "Ceil" ||
             op == "Reciprocal") {
    o = in[0];
    for (size_t k = 0; k < static_cast<size_t>(o.numel()); ++k) {
      const double x = o.at(k);
      const double r = op == "Not" ? !x : op == "Neg" ? -x : op == "Abs" ? std::fabs(x) : op == "Sqrt" ? std::sqrt(x)
                       : op == "Floor" ? std::floor(x) : op == "Ceil" ? std::ceil(x) : 1.0 / x;
      if (o.is_float()) {
        o.f[k] = r;
        continue;
      }
      // Integers: negation wraps as two's complement (INT64_MIN stays), the
      // rest must land in range.
      const int64_t v = o.i[k];
      const int64_t neg = static_cast<int64_t>(0ull - static_cast<uint64_t>(v));
      if (op == "Neg") o.i[k] = neg;
      else if (op == "Abs") o.i[k] = v < 0 ? neg : v;
      else if (!(r >= -9.2e18 && r <= 9.2e18)) c.error(op + " of the integer " + std::to_string(v) + " is not an integer");
      else o.i[k] = static_cast<int64_t>(r);
    }
  } else if (op == "Where") {
    const std::vector<int64_t> s = bcast_shape(c, {&in[0], &in[1], &in[2]});
    o = make(in[1].dtype, s);
    for (int64_t k = 0; k < o.numel(); ++k) {
      const HV& src = in[0].at(bcast_index(in[0], s, k)) != 0 ? in[1] : in[2];
      const size_t j = bcast_index(src, s, k);
      set(o, static_cast<size_t>(k), src.at(j), src.iat(j));
    }
  } else if (op == "ConstantOfShape") {
    HV value = make(SPORA_DTYPE_F32, {});
    if (const Attribute* a = n.attr("value")) {
      if (!a->t) c.error("attribute value holds no tensor");
      value = from_host(decode_tensor(*a->t, c.what(), ""));
      if (value.numel() != 1) c.error("value must hold one element");
    }
    std::vector<int64_t> s = ints_of(in.at(0));
    int64_t total = 1;
    for (int64_t d : s) {
      if (d < 0) c.error("a negative dimension " + std::to_string(d));
      if (d && total > kMaxFoldElements / d) return false;  // large: left to the graph
      total *= d;
    }
    o = make(value.dtype, s);
    for (size_t k = 0; k < static_cast<size_t>(o.numel()); ++k) set(o, k, value.at(0), value.iat(0));
  } else if (op == "Range") {
    const HV &start = in.at(0), &limit = in.at(1), &delta = in.at(2);
    // Scalars by the spec; a file may hold anything, an empty one included.
    for (const HV* v : {&start, &limit, &delta})
      if (v->numel() != 1) c.error("start, limit and delta must each hold one element");
    if (delta.at(0) == 0) c.error("delta is 0");
    const double n_d = std::ceil((limit.at(0) - start.at(0)) / delta.at(0));
    if (std::isnan(n_d)) c.error("start, limit and delta give no element count");
    if (n_d > static_cast<double>(kMaxFoldElements)) return false;
    const int64_t cnt = std::max<int64_t>(0, static_cast<int64_t>(n_d));
    o = make(start.dtype, {cnt});
    for (int64_t k = 0; k < cnt; ++k)
      set(o, static_cast<size_t>(k), start.at(0) + static_cast<double>(k) * delta.at(0),
          // Wrapping: an int range whose ends overflow is garbage, not UB.
          static_cast<int64_t>(static_cast<uint64_t>(start.iat(0)) +
                               static_cast<uint64_t>(k) * static_cast<uint64_t>(delta.iat(0))));
  } else if (op == "Expand") {
    HV shape_hv = make(in[0].dtype, ints_of(in.at(1)));
    const std::vector<int64_t> s = bcast_shape(c, {&in[0], &shape_hv});
    int64_t total = 1;
    for (int64_t d : s) total *= d;
    if (total > kMaxFoldElements) return false;
    o = make(in[0].dtype, s);
    for (int64_t k = 0; k < o.numel(); ++k) {
      const size_t j = bcast_index(in[0], s, k);
      set(o, static_cast<size_t>(k), in[0].at(j), in[0].iat(j));
    }
  } else if (op == "ReduceProd") {
    if (in[0].shape.size() > 1 || c.has_in(1) || c.has_attr("axes")) return false;  // 1-D, all axes only
    const bool keep = c.attr_int("keepdims", 1) != 0;
    o = make(in[0].dtype, keep ? std::vector<int64_t>(in[0].shape.size(), 1) : std::vector<int64_t>{});
    double pf = 1;
    int64_t pi = 1;
    for (size_t k = 0; k < static_cast<size_t>(in[0].numel()); ++k) {
      pf *= in[0].at(k);
      pi *= in[0].iat(k);
    }
    set(o, 0, pf, pi);
  } else if (in.size() >= 2) {  // binary and variadic Max / Min
    o = binary(c, op, in[0], in[1]);
    for (size_t k = 2; k < in.size(); ++k) o = binary(c, op, o, in[k]);
  } else if (op == "Max" || op == "Min") {
    o = in[0];
  } else {
    return false;
  }
  c.set_host(0, to_host(o));
  c.set_dim_sources(0, sources_of(c, n, in, o));
  return true;
}

}  // namespace spora::io::onnx
