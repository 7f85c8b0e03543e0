// Helpers of the GPU math tests (gpu_math_test.cpp, gpu_math_train_test.cpp):
// small host tensors, the reference planner and runner of plugins/common,
// deterministic inputs with special values, and NaN-aware comparison.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "dtypes.h"
#include "kernel_plan.h"
#include "math/hd.h"

namespace gputest {

namespace sg = spora::gpu;
namespace sp = spora::plugin;

// ---- small tensors and the reference runner ----

struct Tensor {
  int32_t dtype = SPORA_DTYPE_F32;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
  template <class T>
  T* as() {
    return reinterpret_cast<T*>(bytes.data());
  }
  template <class T>
  const T* as() const {
    return reinterpret_cast<const T*>(bytes.data());
  }
};

inline Tensor make(int32_t dtype, std::vector<int64_t> dims) {
  Tensor t;
  t.dtype = dtype;
  t.dims = std::move(dims);
  t.bytes.assign(static_cast<size_t>(t.numel()) * sp::dtype_size(dtype), 0);
  return t;
}

inline sp::Shape shape_of(const Tensor& t) {
  sp::Shape s;
  s.rank = static_cast<int32_t>(t.dims.size());
  for (size_t i = 0; i < t.dims.size(); ++i) s.dims[i] = t.dims[i];
  return s;
}

struct AttrSpec {
  std::string name;
  int32_t type;
  int64_t i = 0;
  double f = 0;
  std::vector<int64_t> ints;
  std::string s;
};
inline AttrSpec int_attr(const char* n, int64_t v) { return {n, SPORA_ATTR_INT, v, 0, {}, ""}; }
inline AttrSpec float_attr(const char* n, double v) { return {n, SPORA_ATTR_FLOAT, 0, v, {}, ""}; }
inline AttrSpec bool_attr(const char* n, bool v) { return {n, SPORA_ATTR_BOOL, v ? 1 : 0, 0, {}, ""}; }
inline AttrSpec ints_attr(const char* n, std::vector<int64_t> v) { return {n, SPORA_ATTR_INTS, 0, 0, std::move(v), ""}; }
inline AttrSpec string_attr(const char* n, const char* v) { return {n, SPORA_ATTR_STRING, 0, 0, {}, v}; }

// Plans `op` with the reference planner. Returns false (and the message)
// when it refuses the combination.
inline bool ref_plan(const std::string& op, const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out,
              const std::vector<AttrSpec>& attrs, sp::KernelPlan* plan, std::string* why = nullptr) {
  std::vector<spora_tensor_desc_t> ins, outs;
  for (const Tensor* t : in) ins.push_back({sizeof(spora_tensor_desc_t), t->dtype, static_cast<int32_t>(t->dims.size()), t->dims.data(), nullptr});
  for (Tensor* t : out) outs.push_back({sizeof(spora_tensor_desc_t), t->dtype, static_cast<int32_t>(t->dims.size()), t->dims.data(), nullptr});
  std::vector<spora_attr_t> as;
  for (const AttrSpec& a : attrs) {
    spora_attr_t x{};
    x.struct_size = sizeof x;
    x.name = a.name.c_str();
    x.type = a.type;
    x.i = a.i;
    x.f = a.f;
    x.ints = a.ints.data();
    x.count = a.ints.size();
    x.s = a.s.c_str();
    as.push_back(x);
  }
  spora_kernel_desc_t d{};
  d.struct_size = sizeof d;
  d.op = op.c_str();
  d.num_inputs = ins.size();
  d.inputs = ins.data();
  d.num_outputs = outs.size();
  d.outputs = outs.data();
  d.num_attrs = as.size();
  d.attrs = as.empty() ? nullptr : as.data();
  if (spora_plugin_error_t* e = sp::plan_kernel(&d, plan)) {
    if (why) *why = e->message;
    e->destroy(e);
    return false;
  }
  return true;
}

inline void ref_run(const sp::KernelPlan& plan, const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) {
  std::vector<const void*> ip;
  std::vector<void*> op;
  for (const Tensor* t : in) ip.push_back(t->bytes.data());
  for (Tensor* t : out) op.push_back(t->bytes.data());
  std::vector<uint8_t> ws(plan.workspace + 1);
  sp::run_plan(plan, ip.data(), op.data(), ws.data());
}

// ---- inputs ----

inline uint64_t g_seed = 0x9e3779b97f4a7c15ull;
inline double uniform() {  // [0, 1), deterministic
  g_seed = g_seed * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<double>(g_seed >> 11) * (1.0 / 9007199254740992.0);
}

// Fills t: floats in [lo, hi) with every 17th element a special value when
// `specials`; integers in a range fitting the dtype plus its extremes.
inline void fill(Tensor& t, double lo = -3, double hi = 3, bool specials = true) {
  static const double kSpecial[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1e-30, -1e5, 0.5, -0.5, 2.5, 1e4};
  const int64_t n = t.numel();
  sg::visit_storage(t.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = sg::compute_of<T>;
    T* p = t.as<T>();
    for (int64_t i = 0; i < n; ++i) {
      double v = lo + (hi - lo) * uniform();
      if constexpr (sg::is_float_c<C>) {
        if (specials && i % 17 == 5) v = kSpecial[(i / 17) % (sizeof kSpecial / sizeof kSpecial[0])];
      } else if constexpr (sg::is_bool_c<C>) {
        v = uniform() < 0.5;
      } else {
        v = std::floor(v * 40);  // integers in about [40 lo, 40 hi]
        if (std::is_unsigned<C>::value) v = std::fabs(v);
        if (specials && i % 23 == 7) v = static_cast<double>(i % 2 ? std::numeric_limits<C>::max() : std::numeric_limits<C>::min());
      }
      p[i] = sg::elem<T>::store(static_cast<C>(v));
    }
  });
}

// ---- comparison ----

// Output element i of both tensors as double (NaN-aware), for messages.
inline double value_at(const Tensor& t, int64_t i) {
  double v = 0;
  sg::visit_storage(t.dtype, [&](auto tag) {
    using T = decltype(tag);
    v = static_cast<double>(sg::elem<T>::load(t.as<T>()[i]));
  });
  return v;
}

// Every element equal, or both NaN, or within `rel` relative / `abs_tol`
// absolute difference. Returns the number of mismatches (first few printed).
inline int64_t compare(const Tensor& got, const Tensor& want, double rel, double abs_tol, const std::string& what) {
  EXPECT_EQ(got.dtype, want.dtype) << what;
  EXPECT_EQ(got.numel(), want.numel()) << what;
  int64_t bad = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double g = value_at(got, i), w = value_at(want, i);
    if (std::isnan(g) && std::isnan(w)) continue;
    if (g == w && std::signbit(g) == std::signbit(w)) continue;
    if (g == w && rel > 0) continue;  // +0 vs -0 only matters for exact checks
    if (std::isfinite(g) && std::isfinite(w) && std::fabs(g - w) <= abs_tol + rel * std::fabs(w)) continue;
    if (++bad <= 5) ADD_FAILURE() << what << ": element " << i << " got " << g << " want " << w;
  }
  return bad;
}

inline const int32_t kAllDtypes[] = {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16,
                                     SPORA_DTYPE_I32, SPORA_DTYPE_I64, SPORA_DTYPE_U8,  SPORA_DTYPE_BOOL};
inline const int32_t kFloatDtypes[] = {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16};

// Relative tolerance of a float result accumulated in double in another
// order: the output's own rounding, at most one unit either way.
inline double ulp_rel(int32_t dt) {
  switch (dt) {
    case SPORA_DTYPE_F64: return 1e-12;
    case SPORA_DTYPE_F32: return 2.5e-7;
    case SPORA_DTYPE_F16: return 1e-3;
    case SPORA_DTYPE_BF16: return 8e-3;
    default: return 0;
  }
}

}  // namespace gputest
