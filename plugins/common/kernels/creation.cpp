// Reference creation kernels: zeros, ones, full, arange, eye. The output
// dtype is the output descriptor's; see core/src/ops/creation.cpp for what
// inference guarantees.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernel_plan.h"

namespace spora::plugin {
namespace {

// One element's bytes, written over and over.
struct FillState {
  unsigned char bytes[8];
};

template <class T>
T convert(double v) {
  if constexpr (std::is_same_v<T, bool>) return v != 0;
  else if constexpr (is_float_v<T>) return store<T>(v);
  else return static_cast<T>(static_cast<int64_t>(v));  // integral and in range (inference)
}

template <class E>
void fill_t(const unsigned char* pattern, E* y, int64_t n) {
  E v;
  std::memcpy(&v, pattern, sizeof(E));
  std::fill(y, y + n, v);
}

void run_fill(const KernelPlan& p, const void* const*, void* const* out, void*) {
  const unsigned char* b = p.get<FillState>().bytes;
  const int64_t n = p.out[0].shape.numel();
  switch (dtype_size(p.out[0].dtype)) {
    case 1: return fill_t(b, static_cast<uint8_t*>(out[0]), n);
    case 2: return fill_t(b, static_cast<uint16_t*>(out[0]), n);
    case 4: return fill_t(b, static_cast<uint32_t*>(out[0]), n);
    case 8: return fill_t(b, static_cast<uint64_t*>(out[0]), n);
  }
}

bool integer_dtype(int32_t d) { return d == SPORA_DTYPE_I32 || d == SPORA_DTYPE_I64 || d == SPORA_DTYPE_U8; }

// Integer dtypes hold only integers in their range: inference guarantees
// it, and converting anything else would be undefined behaviour.
bool exact_int(int32_t d, double v) {
  if (!integer_dtype(d)) return true;
  if (!std::isfinite(v) || v != std::trunc(v)) return false;
  switch (d) {
    case SPORA_DTYPE_U8: return v >= 0 && v <= 255;
    case SPORA_DTYPE_I32: return v >= -2147483648.0 && v <= 2147483647.0;
    default: return v >= -9223372036854775808.0 && v < 9223372036854775808.0;
  }
}

spora_plugin_error_t* plan_fill(KernelPlan& p) {
  if (auto* e = expect_operands(p, 0, 1)) return e;
  const double v = p.op == "zeros" ? 0.0 : p.op == "ones" ? 1.0 : p.attrs.get_float("value", 0.0);
  const int32_t dt = p.out[0].dtype;
  if (!exact_int(dt, v)) return invalid(p, "value is not exact in the output dtype");
  auto s = std::make_shared<FillState>();
  std::memset(s->bytes, 0, sizeof(s->bytes));
  visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    const T x = convert<T>(v);
    std::memcpy(s->bytes, &x, sizeof(T));
  });
  p.state = s;
  p.run = run_fill;
  return nullptr;
}

struct ArangeState {
  double start, step;
};

void run_arange(const KernelPlan& p, const void* const*, void* const* out, void*) {
  const ArangeState& s = p.get<ArangeState>();
  const int64_t n = p.out[0].shape.numel();
  visit_dtype(p.out[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    T* y = static_cast<T*>(out[0]);
    if constexpr (is_float_v<T>) {
      for (int64_t i = 0; i < n; ++i) y[i] = store<T>(s.start + static_cast<double>(i) * s.step);
    } else if constexpr (!std::is_same_v<T, bool>) {
      const int64_t a = static_cast<int64_t>(s.start), d = static_cast<int64_t>(s.step);
      for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(a + i * d);
    }
  });
}

spora_plugin_error_t* plan_arange(KernelPlan& p) {
  if (auto* e = expect_operands(p, 0, 1)) return e;
  const int32_t dt = p.out[0].dtype;
  if (dt == SPORA_DTYPE_BOOL) return unsupported(p, "dtype bool has no arange");
  if (p.out[0].shape.rank != 1) return invalid(p, "output must be 1-D");
  ArangeState s{p.attrs.get_float("start", 0.0), p.attrs.get_float("step", 1.0)};
  if (integer_dtype(dt)) {
    // The extremes are the first and last elements; inference checked both,
    // and the run loop relies on it.
    const int64_t n = p.out[0].shape.numel();
    int64_t last = 0;
    if (!exact_int(dt, s.start) || !exact_int(SPORA_DTYPE_I64, s.step) ||
        (n > 0 && (__builtin_mul_overflow(n - 1, static_cast<int64_t>(s.step), &last) ||
                   __builtin_add_overflow(last, static_cast<int64_t>(s.start), &last) ||
                   !exact_int(dt, static_cast<double>(last)))))
      return invalid(p, "start and step must be integers and every element must fit the output dtype");
  }
  p.state = std::make_shared<ArangeState>(s);
  p.run = run_arange;
  return nullptr;
}

void run_eye(const KernelPlan& p, const void* const*, void* const* out, void*) {
  const int64_t n = p.out[0].shape.dims[0], m = p.out[0].shape.dims[1];
  visit_dtype(p.out[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    T* y = static_cast<T*>(out[0]);
    std::fill(y, y + n * m, convert<T>(0.0));
    const T one = convert<T>(1.0);
    for (int64_t i = 0, k = std::min(n, m); i < k; ++i) y[i * m + i] = one;
  });
}

spora_plugin_error_t* plan_eye(KernelPlan& p) {
  if (auto* e = expect_operands(p, 0, 1)) return e;
  if (p.out[0].shape.rank != 2) return invalid(p, "output must be 2-D");
  p.run = run_eye;
  return nullptr;
}

void register_kernels(KernelTable& t) {
  t.add({"zeros", "ref", plan_fill});
  t.add({"ones", "ref", plan_fill});
  t.add({"full", "ref", plan_fill});
  t.add({"arange", "ref", plan_arange});
  t.add({"eye", "ref", plan_eye});
}
SPORA_REFERENCE_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::plugin
