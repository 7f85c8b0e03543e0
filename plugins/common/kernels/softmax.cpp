// Reference softmax along one axis, computed stably (max subtracted).
#include <algorithm>
#include <cmath>

#include "kernel_plan.h"

namespace spora::plugin {
namespace {

struct State {
  int32_t axis;
};

template <class T>
void softmax_t(const KernelPlan& p, const T* x, T* y) {
  using C = compute_t<T>;
  const Shape& s = p.in[0].shape;
  if (s.rank == 0) {
    y[0] = store<T>(C(1));
    return;
  }
  const int axis = p.get<State>().axis;
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= s.dims[i];
  for (int i = axis + 1; i < s.rank; ++i) inner *= s.dims[i];
  const int64_t len = s.dims[axis];
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      const T* xs = x + o * len * inner + in;
      T* ys = y + o * len * inner + in;
      C mx = -INFINITY;
      for (int64_t j = 0; j < len; ++j) mx = std::max(mx, load(xs[j * inner]));
      C total = 0;
      for (int64_t j = 0; j < len; ++j) total += std::exp(load(xs[j * inner]) - mx);
      const C inv = C(1) / total;
      for (int64_t j = 0; j < len; ++j) ys[j * inner] = store<T>(std::exp(load(xs[j * inner]) - mx) * inv);
    }
  }
}

void run(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  visit_dtype(p.out[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_float_v<T>) softmax_t(p, static_cast<const T*>(in[0]), static_cast<T*>(out[0]));
  });
}

spora_plugin_error_t* plan(KernelPlan& p) {
  if (auto* e = expect_operands(p, 1, 1)) return e;
  const int32_t dt = p.out[0].dtype;
  if (dt != SPORA_DTYPE_F32 && dt != SPORA_DTYPE_F64 && dt != SPORA_DTYPE_F16 && dt != SPORA_DTYPE_BF16)
    return unsupported(p, std::string("dtype ") + dtype_name(dt) + " has no kernel");
  if (p.in[0].dtype != dt || p.in[0].shape != p.out[0].shape) return invalid(p, "input and output differ");
  const int64_t ax = p.attrs.get_int("axis", p.in[0].shape.rank - 1);
  if (p.in[0].shape.rank > 0 && (ax < 0 || ax >= p.in[0].shape.rank)) return invalid(p, "axis out of range");
  p.state = std::make_shared<State>(State{static_cast<int32_t>(p.in[0].shape.rank ? ax : 0)});
  p.run = run;
  return nullptr;
}

void register_kernels(KernelTable& t) { t.add({"softmax", "ref", plan}); }
SPORA_REFERENCE_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::plugin
