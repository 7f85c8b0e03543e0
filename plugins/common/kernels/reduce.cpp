// Reference reductions (sum, mean) over any set of axes.
#include <vector>

#include "kernel_plan.h"

namespace spora::plugin {
namespace {

struct State {
  bool mean;
  bool reduce[SPORA_MAX_RANK];
};

template <class T>
void reduce_t(const KernelPlan& p, const T* x, T* y) {
  const State& s = p.get<State>();
  const Shape& si = p.in[0].shape;
  const int r = si.rank;
  const int64_t n_out = p.out[0].shape.numel(), n_in = si.numel();
  // Accumulate in double: sums of many f32 values keep their precision.
  std::vector<double> acc(static_cast<size_t>(n_out), 0.0);
  if (n_in > 0) {
    int64_t st_o[SPORA_MAX_RANK] = {};
    int64_t ro = 1;
    for (int i = r - 1; i >= 0; --i) {
      st_o[i] = s.reduce[i] ? 0 : ro;
      ro *= s.reduce[i] ? 1 : si.dims[i];
    }
    int64_t idx[SPORA_MAX_RANK] = {};
    int64_t off = 0;
    for (int64_t i = 0; i < n_in; ++i) {
      acc[static_cast<size_t>(off)] += static_cast<double>(load(x[i]));
      for (int d = r - 1; d >= 0; --d) {
        off += st_o[d];
        if (++idx[d] < si.dims[d]) break;
        off -= st_o[d] * si.dims[d];
        idx[d] = 0;
      }
    }
  }
  double count = 1;
  for (int i = 0; i < r; ++i)
    if (s.reduce[i]) count *= static_cast<double>(si.dims[i]);
  for (int64_t i = 0; i < n_out; ++i) {
    const double v = acc[static_cast<size_t>(i)];
    y[i] = store<T>(s.mean ? v / count : v);
  }
}

void run(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  visit_dtype(p.out[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_float_v<T>) reduce_t(p, static_cast<const T*>(in[0]), static_cast<T*>(out[0]));
  });
}

spora_plugin_error_t* plan(KernelPlan& p) {
  if (auto* e = expect_operands(p, 1, 1)) return e;
  const int32_t dt = p.out[0].dtype;
  if (dt != SPORA_DTYPE_F32 && dt != SPORA_DTYPE_F64 && dt != SPORA_DTYPE_F16 && dt != SPORA_DTYPE_BF16)
    return unsupported(p, std::string("dtype ") + dtype_name(dt) + " has no kernel");
  if (p.in[0].dtype != dt) return invalid(p, "input and output differ in dtype");
  State s{p.op == "mean", {}};
  const Shape &in = p.in[0].shape, &out = p.out[0].shape;
  if (in.rank != out.rank) return invalid(p, "output must keep reduced dims as 1");
  const std::vector<int64_t> axes = p.attrs.get_ints("axes");
  if (axes.empty()) {
    for (int i = 0; i < in.rank; ++i) s.reduce[i] = true;
  }
  for (int64_t ax : axes) {
    if (ax < 0 || ax >= in.rank) return invalid(p, "axis out of range");
    s.reduce[ax] = true;
  }
  for (int i = 0; i < in.rank; ++i)
    if (out.dims[i] != (s.reduce[i] ? 1 : in.dims[i])) return invalid(p, "output shape does not match the reduction");
  p.state = std::make_shared<State>(s);
  p.run = run;
  return nullptr;
}

void register_kernels(KernelTable& t) {
  t.add({"sum", "ref", plan});
  t.add({"mean", "ref", plan});
}
SPORA_REFERENCE_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::plugin
