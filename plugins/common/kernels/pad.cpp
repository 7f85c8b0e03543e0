// Reference pad: constant, reflect (numpy's "reflect": the edge element is
// not repeated; pads wider than the dim keep reflecting) and edge modes.
// Inference (core/src/ops/shape_ops.cpp) gives pads as (before, after) per
// dim; the plan re-checks what reads depend on.
#include <string>

#include "copy.h"

namespace spora::plugin {
namespace {

enum class Mode { kConstant, kReflect, kEdge };

struct State {
  int rank = 0;
  int64_t in_dims[SPORA_MAX_RANK] = {};
  int64_t out_dims[SPORA_MAX_RANK] = {};
  int64_t before[SPORA_MAX_RANK] = {};
  int64_t in_st[SPORA_MAX_RANK] = {};
  Mode mode = Mode::kConstant;
  uint64_t value = 0;  // the constant, already in the dtype's bit pattern
  int64_t elem = 0;
};

// Source index along dim d for output index o, or -1 for the constant.
inline int64_t source(const State& s, int d, int64_t o) {
  const int64_t i = o - s.before[d], n = s.in_dims[d];
  if (i >= 0 && i < n) return i;
  switch (s.mode) {
    case Mode::kConstant: return -1;
    case Mode::kEdge: return i < 0 ? 0 : n - 1;
    case Mode::kReflect: {
      if (n == 1) return 0;
      // Reflection without repeating the edge is periodic in 2(n-1).
      const int64_t m = 2 * (n - 1);
      int64_t t = i % m;
      if (t < 0) t += m;
      return t < n ? t : m - t;
    }
  }
  return -1;
}

template <class E>
void pad_t(const State& s, const char* x, char* y) {
  const int r = s.rank;
  E value;
  std::memcpy(&value, &s.value, sizeof(E));
  const E* src = reinterpret_cast<const E*>(x);
  E* dst = reinterpret_cast<E*>(y);
  if (r == 0) {
    dst[0] = src[0];
    return;
  }
  int64_t rows = 1;
  for (int d = 0; d + 1 < r; ++d) rows *= s.out_dims[d];
  const int64_t lo = s.out_dims[r - 1], li = s.in_dims[r - 1], b = s.before[r - 1];
  if (rows == 0 || lo == 0) return;
  int64_t idx[SPORA_MAX_RANK] = {};
  for (int64_t row = 0; row < rows; ++row, dst += lo) {
    int64_t off = 0;
    bool constant = false;
    for (int d = 0; d + 1 < r; ++d) {
      const int64_t i = source(s, d, idx[d]);
      if (i < 0) {
        constant = true;
        break;
      }
      off += i * s.in_st[d];
    }
    if (constant) {
      for (int64_t j = 0; j < lo; ++j) dst[j] = value;
    } else {
      const E* line = src + off;
      for (int64_t j = 0; j < b; ++j) {
        const int64_t i = source(s, r - 1, j);
        dst[j] = i < 0 ? value : line[i];
      }
      std::memcpy(dst + b, line, static_cast<size_t>(li) * sizeof(E));
      for (int64_t j = b + li; j < lo; ++j) {
        const int64_t i = source(s, r - 1, j);
        dst[j] = i < 0 ? value : line[i];
      }
    }
    for (int d = r - 2; d >= 0; --d) {
      if (++idx[d] < s.out_dims[d]) break;
      idx[d] = 0;
    }
  }
}

void run(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  const State& s = p.get<State>();
  const char* x = static_cast<const char*>(in[0]);
  char* y = static_cast<char*>(out[0]);
  switch (s.elem) {
    case 1: return pad_t<uint8_t>(s, x, y);
    case 2: return pad_t<uint16_t>(s, x, y);
    case 4: return pad_t<uint32_t>(s, x, y);
    case 8: return pad_t<uint64_t>(s, x, y);
  }
}

spora_plugin_error_t* plan(KernelPlan& p) {
  if (auto* e = expect_operands(p, 1, 1)) return e;
  if (p.in[0].dtype != p.out[0].dtype) return invalid(p, "input and output differ in dtype");
  const Shape &in = p.in[0].shape, &out = p.out[0].shape;
  State s;
  s.rank = in.rank;
  s.elem = static_cast<int64_t>(dtype_size(p.out[0].dtype));
  const std::string mode = p.attrs.get_string("mode", "constant");
  if (mode == "constant") s.mode = Mode::kConstant;
  else if (mode == "reflect") s.mode = Mode::kReflect;
  else if (mode == "edge") s.mode = Mode::kEdge;
  else return invalid(p, "unknown mode \"" + mode + "\"");
  const std::vector<int64_t> pads = p.attrs.get_ints("pads");
  if (out.rank != in.rank || pads.size() != static_cast<size_t>(2 * in.rank))
    return invalid(p, "pads needs (before, after) for every dim");
  for (int d = 0; d < in.rank; ++d) {
    const int64_t b = pads[2 * d], a = pads[2 * d + 1];
    int64_t n;
    if (b < 0 || a < 0 || __builtin_add_overflow(in.dims[d], b, &n) || __builtin_add_overflow(n, a, &n) ||
        n != out.dims[d])
      return invalid(p, "output shape does not match pads");
    if (s.mode != Mode::kConstant && in.dims[d] == 0 && out.dims[d] > 0)
      return invalid(p, mode + " mode cannot pad an empty dim");
    s.in_dims[d] = in.dims[d];
    s.out_dims[d] = out.dims[d];
    s.before[d] = b;
  }
  dense_strides(in, s.in_st);
  if (s.mode == Mode::kConstant && !encode_value(p.out[0].dtype, p.attrs.get_float("value", 0), &s.value))
    return invalid(p, std::string("value is not representable in ") + dtype_name(p.out[0].dtype));
  p.state = std::make_shared<State>(s);
  p.run = run;
  return nullptr;
}

void register_kernels(KernelTable& t) { t.add({"pad", "ref", plan}); }
SPORA_REFERENCE_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::plugin
