// The GPU plugins' kernel arithmetic, checked on the CPU.
//
// No GPU exists where Spora is built and tested, so the CUDA/ROCm kernels
// never run here. What can be checked is everything except the parallel
// loop: the kernels keep their arithmetic in plugins/cuda/math/*.h
// (SPORA_HD functions, plain C++ under g++), and this test compiles those
// headers with g++ and runs them -- element functions, broadcast index
// math, and host emulations that follow the device's exact order (thread
// strides and halving trees for reductions and softmax, the two-phase tile
// loop of the GEMM) -- against the reference kernels of plugins/common (the
// implementations sim runs and the conformance kit holds cpu to) on the
// same inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "dtypes.h"
#include "kernel_plan.h"
#include "kernels/optim.h"
#include "math/ew_plan.h"
#include "math/copy_math.h"
#include "math/gemm_math.h"
#include "math/loss_math.h"
#include "math/norm_math.h"
#include "math/optim_math.h"
#include "math/reduce_math.h"
#include "math/softmax_math.h"

namespace {

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

Tensor make(int32_t dtype, std::vector<int64_t> dims) {
  Tensor t;
  t.dtype = dtype;
  t.dims = std::move(dims);
  t.bytes.assign(static_cast<size_t>(t.numel()) * sp::dtype_size(dtype), 0);
  return t;
}

sp::Shape shape_of(const Tensor& t) {
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
AttrSpec int_attr(const char* n, int64_t v) { return {n, SPORA_ATTR_INT, v, 0, {}, ""}; }
AttrSpec float_attr(const char* n, double v) { return {n, SPORA_ATTR_FLOAT, 0, v, {}, ""}; }
AttrSpec bool_attr(const char* n, bool v) { return {n, SPORA_ATTR_BOOL, v ? 1 : 0, 0, {}, ""}; }
AttrSpec ints_attr(const char* n, std::vector<int64_t> v) { return {n, SPORA_ATTR_INTS, 0, 0, std::move(v), ""}; }
AttrSpec string_attr(const char* n, const char* v) { return {n, SPORA_ATTR_STRING, 0, 0, {}, v}; }

// Plans `op` with the reference planner. Returns false (and the message)
// when it refuses the combination.
bool ref_plan(const std::string& op, const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out,
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

void ref_run(const sp::KernelPlan& plan, const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) {
  std::vector<const void*> ip;
  std::vector<void*> op;
  for (const Tensor* t : in) ip.push_back(t->bytes.data());
  for (Tensor* t : out) op.push_back(t->bytes.data());
  std::vector<uint8_t> ws(plan.workspace + 1);
  sp::run_plan(plan, ip.data(), op.data(), ws.data());
}

// ---- inputs ----

uint64_t g_seed = 0x9e3779b97f4a7c15ull;
double uniform() {  // [0, 1), deterministic
  g_seed = g_seed * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<double>(g_seed >> 11) * (1.0 / 9007199254740992.0);
}

// Fills t: floats in [lo, hi) with every 17th element a special value when
// `specials`; integers in a range fitting the dtype plus its extremes.
void fill(Tensor& t, double lo = -3, double hi = 3, bool specials = true) {
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
double value_at(const Tensor& t, int64_t i) {
  double v = 0;
  sg::visit_storage(t.dtype, [&](auto tag) {
    using T = decltype(tag);
    v = static_cast<double>(sg::elem<T>::load(t.as<T>()[i]));
  });
  return v;
}

// Every element equal, or both NaN, or within `rel` relative / `abs_tol`
// absolute difference. Returns the number of mismatches (first few printed).
int64_t compare(const Tensor& got, const Tensor& want, double rel, double abs_tol, const std::string& what) {
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

const int32_t kAllDtypes[] = {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16,
                              SPORA_DTYPE_I32, SPORA_DTYPE_I64, SPORA_DTYPE_U8,  SPORA_DTYPE_BOOL};
const int32_t kFloatDtypes[] = {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16};

// ---- 16-bit float conversions ----

TEST(GpuMath, HalfToFloatMatchesReferenceForEveryHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float got = sg::half_to_float(static_cast<uint16_t>(h));
    const float want = sp::f16::to_float(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << "half 0x" << std::hex << h;
    } else {
      ASSERT_EQ(sg::float_bits(got), sg::float_bits(want)) << "half 0x" << std::hex << h;
    }
  }
}

TEST(GpuMath, FloatToHalfAndBfloatMatchReference) {
  // Every 997th float bit pattern (4.3 million, all exponents, both signs)
  // plus the rounding boundaries around each half exponent.
  std::vector<uint32_t> bits;
  for (uint64_t x = 0; x <= 0xffffffffull; x += 997) bits.push_back(static_cast<uint32_t>(x));
  for (uint32_t e = 100; e < 145; ++e)
    for (uint32_t m : {0x0u, 0x1000u, 0x0fffu, 0x1001u, 0x3000u, 0x2000u, 0x7fffffu, 0x7fe000u})
      for (uint32_t sign : {0u, 0x80000000u}) bits.push_back(sign | e << 23 | m);
  for (uint32_t b : {0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u, 0x477ff000u, 0x477fefffu, 0x33000000u,
                     0x33000001u, 0x38800000u, 0x387fffffu})
    bits.push_back(b);
  for (uint32_t b : bits) {
    const float f = sg::bits_float(b);
    const uint16_t h = sg::float_to_half(f), hw = sp::f16(f).bits;
    const uint16_t bh = sg::float_to_bhalf(f), bw = sp::bf16(f).bits;
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(sg::half_to_float(h))) << std::hex << b;
      ASSERT_TRUE(std::isnan(sg::bhalf_to_float(bh))) << std::hex << b;
    } else {
      ASSERT_EQ(h, hw) << "f16 of float bits 0x" << std::hex << b;
      ASSERT_EQ(bh, bw) << "bf16 of float bits 0x" << std::hex << b;
    }
  }
}

// ---- elementwise ----

// Runs the GPU element function over every element of `x` with the plan's
// attributes, as unary_kernel does.
Tensor gpu_unary(const std::string& op, const sp::KernelPlan& plan, const Tensor& x) {
  Tensor y = make(x.dtype, x.dims);
  sg::EwOp code = sg::EwOp::kCount;
  EXPECT_TRUE(sg::ew_op_of(op, &code)) << op;
  const sg::EwParams prm = sg::ew_params_of(plan.attrs);
  sg::visit_storage(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < x.numel(); ++i)
      y.as<T>()[i] = sg::elem<T>::store(sg::ew_unary<sg::compute_of<T>>(code, sg::elem<T>::load(x.as<T>()[i]), prm));
  });
  return y;
}

TEST(GpuMath, UnaryOpsMatchReference) {
  struct Case {
    const char* op;
    std::vector<AttrSpec> attrs;
  };
  const std::vector<Case> cases = {
      {"neg", {}}, {"abs", {}}, {"sign", {}}, {"square", {}}, {"relu", {}}, {"exp", {}}, {"log", {}},
      {"log1p", {}}, {"sqrt", {}}, {"rsqrt", {}}, {"reciprocal", {}}, {"sin", {}}, {"cos", {}}, {"tanh", {}},
      {"sigmoid", {}}, {"silu", {}}, {"erf", {}}, {"floor", {}}, {"ceil", {}}, {"round", {}},
      {"leaky_relu", {float_attr("alpha", 0.2)}}, {"gelu", {}}, {"gelu", {string_attr("approximate", "tanh")}},
      {"softplus", {float_attr("beta", 2.0), float_attr("threshold", 10.0)}},
      {"clip", {float_attr("min", -1.5), float_attr("max", 2.5)}}, {"logical_not", {}}};
  int checked = 0;
  for (const Case& c : cases) {
    for (int32_t dt : kAllDtypes) {
      Tensor x = make(dt, {3, 97});
      fill(x);
      Tensor want = make(dt, {3, 97});
      sp::KernelPlan plan;
      if (!ref_plan(c.op, {&x}, {&want}, c.attrs, &plan)) continue;  // no kernel: the GPU plan refuses it too
      ref_run(plan, {&x}, {&want});
      const Tensor got = gpu_unary(c.op, plan, x);
      // Same libm calls in the same order: bit-exact on the host.
      EXPECT_EQ(compare(got, want, 0, 0, std::string(c.op) + " " + sp::dtype_name(dt)), 0);
      ++checked;
    }
  }
  EXPECT_GE(checked, 100);  // 21 float ops x 4 float dtypes + integer ones
}

// Runs a binary/compare op through the GPU plan's broadcast index, as
// arith_kernel/compare_kernel do.
Tensor gpu_binary(const std::string& op, const Tensor& a, const Tensor& b, int32_t out_dtype,
                  const std::vector<int64_t>& out_dims) {
  Tensor y = make(out_dtype, out_dims);
  sg::EwOp code = sg::EwOp::kCount;
  EXPECT_TRUE(sg::ew_op_of(op, &code)) << op;
  const sp::Shape shapes[2] = {shape_of(a), shape_of(b)};
  const sg::EwIndex ix = sg::ew_index_of(shape_of(y), shapes, 2);
  sg::visit_storage(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = sg::compute_of<T>;
    for (int64_t i = 0; i < y.numel(); ++i) {
      int64_t off[sg::kEwMaxIn];
      sg::ew_offsets(ix, i, off);
      const C va = sg::elem<T>::load(a.as<T>()[off[0]]), vb = sg::elem<T>::load(b.as<T>()[off[1]]);
      if (sg::ew_is_compare(code)) y.as<sg::bool_t>()[i] = sg::elem<sg::bool_t>::store(sg::ew_compare<C>(code, va, vb));
      else if constexpr (!sg::is_bool_c<C>) y.as<T>()[i] = sg::elem<T>::store(sg::ew_arith<C>(code, va, vb));
    }
  });
  return y;
}

TEST(GpuMath, BinaryOpsWithBroadcastingMatchReference) {
  const char* ops[] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "equal", "not_equal", "less",
                       "less_equal", "greater", "greater_equal", "logical_and", "logical_or", "logical_xor"};
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{2, 3, 40}, {2, 3, 40}}, {{2, 3, 40}, {1, 3, 1}}, {{2, 3, 40}, {1, 1, 40}},
      {{2, 1, 40}, {1, 3, 1}},  {{1, 1, 1}, {2, 3, 40}}, {{2, 3, 1}, {2, 1, 40}}};
  int checked = 0;
  for (const char* op : ops) {
    for (int32_t dt : kAllDtypes) {
      for (const auto& [sa, sb] : shapes) {
        std::vector<int64_t> so(3);
        for (int d = 0; d < 3; ++d) so[d] = std::max(sa[d], sb[d]);
        Tensor a = make(dt, sa), b = make(dt, sb);
        fill(a);
        fill(b, -2, 2);
        const bool cmp = std::string(op).find("equal") != std::string::npos || std::string(op) == "less" ||
                         std::string(op) == "greater" || std::string(op).rfind("logical", 0) == 0;
        Tensor want = make(cmp ? SPORA_DTYPE_BOOL : dt, so);
        sp::KernelPlan plan;
        if (!ref_plan(op, {&a, &b}, {&want}, {}, &plan)) continue;
        ref_run(plan, {&a, &b}, {&want});
        const Tensor got = gpu_binary(op, a, b, want.dtype, so);
        EXPECT_EQ(compare(got, want, 0, 0, std::string(op) + " " + sp::dtype_name(dt)), 0);
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 300);
}

TEST(GpuMath, BroadcastOffsetsAreNumpys) {
  // Independent of the reference: the offset of every output element of a
  // rank-4 broadcast computed from coordinates directly.
  const std::vector<int64_t> so = {3, 4, 5, 6}, sa = {3, 1, 5, 1}, sb = {1, 4, 1, 6}, sc = {1, 1, 1, 1};
  auto mk = [](const std::vector<int64_t>& d) {
    sp::Shape s;
    s.rank = 4;
    for (int i = 0; i < 4; ++i) s.dims[i] = d[i];
    return s;
  };
  const sp::Shape ins[3] = {mk(sa), mk(sb), mk(sc)};
  const sg::EwIndex ix = sg::ew_index_of(mk(so), ins, 3);
  for (int64_t i = 0; i < 3 * 4 * 5 * 6; ++i) {
    int64_t c[4], r = i;
    for (int d = 3; d >= 0; --d) {
      c[d] = r % so[d];
      r /= so[d];
    }
    const std::vector<int64_t>* shp[3] = {&sa, &sb, &sc};
    int64_t off[sg::kEwMaxIn];
    sg::ew_offsets(ix, i, off);
    for (int k = 0; k < 3; ++k) {
      int64_t want = 0;
      for (int d = 0; d < 4; ++d) want = want * (*shp[k])[d] + ((*shp[k])[d] == 1 ? 0 : c[d]);
      ASSERT_EQ(off[k], want) << "output " << i << " input " << k;
    }
  }
}

TEST(GpuMath, WhereAndCastMatchReference) {
  int checked = 0;
  for (int32_t dt : kAllDtypes) {
    Tensor c = make(SPORA_DTYPE_BOOL, {2, 1, 9}), x = make(dt, {1, 3, 9}), y = make(dt, {2, 3, 1});
    fill(c);
    fill(x);
    fill(y);
    Tensor want = make(dt, {2, 3, 9});
    sp::KernelPlan plan;
    ASSERT_TRUE(ref_plan("where", {&c, &x, &y}, {&want}, {}, &plan)) << sp::dtype_name(dt);
    ref_run(plan, {&c, &x, &y}, {&want});
    const sp::Shape shapes[3] = {shape_of(c), shape_of(x), shape_of(y)};
    const sg::EwIndex ix = sg::ew_index_of(shape_of(want), shapes, 3);
    Tensor got = make(dt, {2, 3, 9});
    const size_t es = sp::dtype_size(dt);
    for (int64_t i = 0; i < got.numel(); ++i) {  // where_kernel moves element bits
      int64_t off[sg::kEwMaxIn];
      sg::ew_offsets(ix, i, off);
      const uint8_t* src = c.as<sg::bool_t>()[off[0]].v ? x.bytes.data() + off[1] * es : y.bytes.data() + off[2] * es;
      std::memcpy(got.bytes.data() + i * es, src, es);
    }
    EXPECT_EQ(got.bytes, want.bytes) << "where " << sp::dtype_name(dt);
    for (int32_t to : kAllDtypes) {
      Tensor src = make(dt, {301});
      fill(src, -300, 300);  // out of range for u8 and the 16-bit floats' precision
      Tensor cw = make(to, {301});
      sp::KernelPlan cp;
      ASSERT_TRUE(ref_plan("cast", {&src}, {&cw}, {}, &cp));
      ref_run(cp, {&src}, {&cw});
      Tensor cg = make(to, {301});
      sg::visit_storage(dt, [&](auto ti) {
        sg::visit_storage(to, [&](auto tt) {
          using TI = decltype(ti);
          using TO = decltype(tt);
          for (int64_t i = 0; i < src.numel(); ++i) cg.as<TO>()[i] = sg::cast_elem<TI, TO>(src.as<TI>()[i]);
        });
      });
      EXPECT_EQ(compare(cg, cw, 0, 0, std::string("cast ") + sp::dtype_name(dt) + " -> " + sp::dtype_name(to)), 0);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 64);
}

// ---- reductions ----

// The whole reduction through the device's block order (red_block_emulate).
Tensor gpu_reduce(sg::RedKind kind, const sp::KernelPlan& plan, const Tensor& x, int32_t out_dtype,
                  const std::vector<int64_t>& out_dims) {
  Tensor y = make(out_dtype, out_dims);
  const sg::RedIndex ix = sg::red_index_of(kind, shape_of(x), plan.attrs);
  EXPECT_EQ(ix.outputs, y.numel());
  const bool arg = kind == sg::RedKind::kArgMax || kind == sg::RedKind::kArgMin;
  sg::visit_storage(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = sg::compute_of<T>;
    if constexpr (!sg::is_bool_c<C>) {
      for (int64_t o = 0; o < ix.outputs; ++o) {
        double center = 0;
        const sg::RedAcc<C> acc = sg::red_block_emulate<T>(ix, x.as<T>(), o, &center);
        if (arg) y.as<int64_t>()[o] = acc.pos;
        else y.as<T>()[o] = sg::elem<T>::store(sg::red_finish<C>(ix, acc, center));
      }
    }
  });
  return y;
}

// Relative tolerance of a float result accumulated in double in another
// order: the output's own rounding, at most one unit either way.
double ulp_rel(int32_t dt) {
  switch (dt) {
    case SPORA_DTYPE_F64: return 1e-12;
    case SPORA_DTYPE_F32: return 2.5e-7;
    case SPORA_DTYPE_F16: return 1e-3;
    case SPORA_DTYPE_BF16: return 8e-3;
    default: return 0;
  }
}

TEST(GpuMath, ReductionsInBlockOrderMatchReference) {
  const char* names[] = {"sum", "mean", "max", "min", "prod", "logsumexp", "var", "std", "argmax", "argmin"};
  const std::vector<std::vector<int64_t>> axes_sets = {{2}, {0, 2}, {1}, {}, {0, 1, 2}};
  int checked = 0;
  for (int k = 0; k < 10; ++k) {
    const sg::RedKind kind = static_cast<sg::RedKind>(k);
    const bool arg = kind == sg::RedKind::kArgMax || kind == sg::RedKind::kArgMin;
    for (int32_t dt : kAllDtypes) {
      for (const auto& axes : axes_sets) {
        if (arg && axes.size() > 1) continue;  // arg*: one axis or the whole tensor
        Tensor x = make(dt, {3, 4, 300});      // 300 > 256 threads: some threads fold two elements
        if (kind == sg::RedKind::kProd) fill(x, 0.5, 1.5, false);
        else fill(x, -3, 3, false);
        std::vector<int64_t> od = {3, 4, 300};
        const std::vector<int64_t> eff = axes.empty() ? std::vector<int64_t>{0, 1, 2} : axes;
        for (int64_t a : eff) od[static_cast<size_t>(a)] = 1;
        std::vector<AttrSpec> attrs;
        if (arg) {
          if (!axes.empty()) attrs.push_back(int_attr("axis", axes[0]));
        } else {
          attrs.push_back(ints_attr("axes", eff));
          if (kind == sg::RedKind::kVar || kind == sg::RedKind::kStd) attrs.push_back(int_attr("correction", 1));
        }
        Tensor want = make(arg ? SPORA_DTYPE_I64 : dt, od);
        sp::KernelPlan plan;
        if (!ref_plan(names[k], {&x}, {&want}, attrs, &plan)) continue;
        ref_run(plan, {&x}, {&want});
        const Tensor got = gpu_reduce(kind, plan, x, want.dtype, od);
        const bool exact = arg || kind == sg::RedKind::kMax || kind == sg::RedKind::kMin || !sp::dtype_size(dt) ||
                           dt == SPORA_DTYPE_I32 || dt == SPORA_DTYPE_I64 || dt == SPORA_DTYPE_U8;
        EXPECT_EQ(compare(got, want, exact ? 0 : ulp_rel(dt), exact ? 0 : 1e-12,
                          std::string(names[k]) + " " + sp::dtype_name(dt) + " over " + std::to_string(axes.size()) + " axes"),
                  0);
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 150);
}

TEST(GpuMath, ReductionNanAndTiesMatchReference) {
  // NaN is sticky in max/min and wins arg*; ties go to the first index.
  // Positions straddle different threads (0, 256, 300...) so the tree, not
  // one thread's fold, has to get the order right.
  Tensor x = make(SPORA_DTYPE_F32, {2, 600});
  float* p = x.as<float>();
  for (int i = 0; i < 1200; ++i) p[i] = static_cast<float>(i % 7);
  p[600 + 300] = NAN;
  p[600 + 20] = NAN;
  p[0 + 555] = 9;
  p[0 + 44] = 9;  // tie: 44 wins
  p[0 + 301] = -5;
  p[0 + 3] = -5;  // tie: 3 wins
  for (const char* op : {"max", "min", "argmax", "argmin"}) {
    const bool arg = op[0] == 'a';
    Tensor want = make(arg ? SPORA_DTYPE_I64 : SPORA_DTYPE_F32, {2, 1});
    sp::KernelPlan plan;
    ASSERT_TRUE(ref_plan(op, {&x}, {&want}, {arg ? int_attr("axis", 1) : ints_attr("axes", {1})}, &plan)) << op;
    ref_run(plan, {&x}, {&want});
    sg::RedKind kind = sg::RedKind::kSum;
    ASSERT_TRUE(sg::red_kind_of(op, &kind));
    const Tensor got = gpu_reduce(kind, plan, x, want.dtype, {2, 1});
    EXPECT_EQ(compare(got, want, 0, 0, op), 0);
  }
  Tensor am = make(SPORA_DTYPE_I64, {2, 1});
  sp::KernelPlan plan;
  ASSERT_TRUE(ref_plan("argmax", {&x}, {&am}, {int_attr("axis", 1)}, &plan));
  const Tensor got = gpu_reduce(sg::RedKind::kArgMax, plan, x, SPORA_DTYPE_I64, {2, 1});
  EXPECT_EQ(got.as<int64_t>()[0], 44);
  EXPECT_EQ(got.as<int64_t>()[1], 20);  // the first NaN
}

// ---- softmax ----

Tensor gpu_softmax(const std::string& op, const sp::KernelPlan& plan, const Tensor& x, const Tensor* dy) {
  Tensor y = make(x.dtype, x.dims);
  const sg::SmIndex ix = sg::sm_index_of(op, shape_of(x), plan.attrs);
  sg::visit_storage(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (sg::is_float_c<sg::compute_of<T>>) {
      for (int64_t l = 0; l < ix.outer * ix.inner; ++l)
        sg::sm_line_emulate<T>(ix, x.as<T>(), dy ? dy->as<T>() : nullptr, y.as<T>(), l);
    }
  });
  return y;
}

TEST(GpuMath, SoftmaxFamilyIsStableAndMatchesReference) {
  const std::vector<std::pair<std::vector<int64_t>, int64_t>> cases = {{{4, 700}, 1}, {{3, 5, 7}, 1}, {{3, 5, 7}, 0}, {{2, 300, 3}, 1}};
  int checked = 0;
  for (int32_t dt : kFloatDtypes) {
    for (const auto& [dims, axis] : cases) {
      Tensor x = make(dt, dims);
      fill(x, -30, 30, false);
      // Large offsets: exp would overflow without the max subtracted.
      sg::visit_storage(dt, [&](auto tag) {
        using T = decltype(tag);
        for (int64_t i = 0; i < x.numel(); ++i)
          x.as<T>()[i] = sg::elem<T>::store(sg::elem<T>::load(x.as<T>()[i]) + 80.0f + (i % 3) * 8.0f);
      });
      for (const char* op : {"softmax", "log_softmax"}) {
        Tensor want = make(dt, dims);
        sp::KernelPlan plan;
        ASSERT_TRUE(ref_plan(op, {&x}, {&want}, {int_attr("axis", axis)}, &plan));
        ref_run(plan, {&x}, {&want});
        const Tensor got = gpu_softmax(op, plan, x, nullptr);
        for (int64_t i = 0; i < got.numel(); ++i) ASSERT_TRUE(std::isfinite(value_at(got, i))) << op << " element " << i;
        // log_softmax subtracts log(sum) ~ O(1): an absolute floor of its ulp.
        EXPECT_EQ(compare(got, want, 2 * ulp_rel(dt), 2 * ulp_rel(dt), std::string(op) + " " + sp::dtype_name(dt)), 0);
        // The gradient from this forward output.
        Tensor dy = make(dt, dims);
        fill(dy, -1, 1, false);
        const std::string gop = std::string(op) + "_grad";
        Tensor gw = make(dt, dims);
        sp::KernelPlan gplan;
        ASSERT_TRUE(ref_plan(gop, {&want, &dy}, {&gw}, {int_attr("axis", axis)}, &gplan));
        ref_run(gplan, {&want, &dy}, {&gw});
        const Tensor gg = gpu_softmax(gop, gplan, want, &dy);
        // Sums of mixed signs: an absolute floor at the dtype's precision.
        EXPECT_EQ(compare(gg, gw, 4 * ulp_rel(dt), 4 * ulp_rel(dt), gop + " " + sp::dtype_name(dt)), 0);
        checked += 2;
      }
    }
  }
  EXPECT_EQ(checked, 64);
}

TEST(GpuMath, SoftmaxRowsSumToOne) {
  Tensor x = make(SPORA_DTYPE_F32, {3, 1000});
  fill(x, -500, 500, false);  // differences far beyond exp's range
  sp::KernelPlan plan;
  Tensor y0 = make(SPORA_DTYPE_F32, {3, 1000});
  ASSERT_TRUE(ref_plan("softmax", {&x}, {&y0}, {int_attr("axis", 1)}, &plan));
  const Tensor y = gpu_softmax("softmax", plan, x, nullptr);
  for (int r = 0; r < 3; ++r) {
    double s = 0;
    for (int j = 0; j < 1000; ++j) s += y.as<float>()[r * 1000 + j];
    EXPECT_NEAR(s, 1.0, 1e-5);
  }
}

// ---- GEMM ----

Tensor gpu_matmul(const Tensor& a, const Tensor& b, const std::vector<int64_t>& od, bool ta, bool tb) {
  Tensor y = make(a.dtype, od);
  const sg::GemmIndex g = sg::gemm_index_of(shape_of(a), shape_of(b), shape_of(y), ta, tb);
  sg::visit_storage(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (sg::is_float_c<sg::compute_of<T>>) {
      for (int64_t bi = 0; bi < g.batch; ++bi) {
        int64_t oa = 0, ob = 0;
        sg::gemm_batch_offsets(g, bi, &oa, &ob);
        for (int64_t r0 = 0; r0 < g.m; r0 += sg::kGemmTile)
          for (int64_t c0 = 0; c0 < g.n; c0 += sg::kGemmTile)
            sg::gemm_block_emulate<T>(g, a.as<T>() + oa, b.as<T>() + ob, y.as<T>() + bi * g.m * g.n, r0, c0);
      }
    }
  });
  return y;
}

TEST(GpuMath, TiledGemmMatchesReference) {
  struct Case {
    std::vector<int64_t> a, b, y;
    bool ta, tb;
  };
  // Sizes that are not multiples of the 16-wide tile; broadcast batches.
  const std::vector<Case> cases = {
      {{37, 45}, {45, 29}, {37, 29}, false, false}, {{45, 37}, {45, 29}, {37, 29}, true, false},
      {{37, 45}, {29, 45}, {37, 29}, false, true},  {{45, 37}, {29, 45}, {37, 29}, true, true},
      {{2, 1, 17, 33}, {1, 3, 33, 5}, {2, 3, 17, 5}, false, false}, {{1, 1}, {1, 1}, {1, 1}, false, false},
      {{4, 16, 16}, {4, 16, 16}, {4, 16, 16}, false, true}};
  int checked = 0;
  for (int32_t dt : kFloatDtypes) {
    for (const Case& c : cases) {
      Tensor a = make(dt, c.a), b = make(dt, c.b);
      fill(a, -1, 1, false);
      fill(b, -1, 1, false);
      Tensor want = make(dt, c.y);
      sp::KernelPlan plan;
      ASSERT_TRUE(ref_plan("matmul", {&a, &b}, {&want}, {bool_attr("transpose_a", c.ta), bool_attr("transpose_b", c.tb)}, &plan));
      ref_run(plan, {&a, &b}, {&want});
      const Tensor got = gpu_matmul(a, b, c.y, c.ta, c.tb);
      // Ascending k in the compute type, like the reference: exact on the
      // host (a GPU may fuse multiply-adds, which only the device run would show).
      EXPECT_EQ(compare(got, want, 0, 0, "matmul " + std::string(sp::dtype_name(dt))), 0);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 28);
}

// ---- fused optimizer updates ----

int32_t state_dtype(int32_t dt) { return dt == SPORA_DTYPE_F16 || dt == SPORA_DTYPE_BF16 ? SPORA_DTYPE_F32 : dt; }

TEST(GpuMath, OptimizerUpdatesMatchReference) {
  struct Case {
    const char* op;
    std::vector<AttrSpec> attrs;
    int roles;   // lists of tensors: params, grads, states...
    int scalars; // lr, (step), grad_scale
  };
  const std::vector<Case> cases = {
      {"sgd_update", {float_attr("weight_decay", 0.01)}, 2, 2},
      {"sgd_update", {float_attr("momentum", 0.9), float_attr("dampening", 0.1)}, 3, 2},
      {"sgd_update", {float_attr("momentum", 0.9), bool_attr("nesterov", true), float_attr("weight_decay", 1e-3)}, 3, 2},
      {"adam_update", {float_attr("weight_decay", 0.01)}, 4, 3},
      {"adam_update", {bool_attr("decoupled", true), float_attr("weight_decay", 0.1), float_attr("beta2", 0.99)}, 4, 3},
      {"adam_update", {bool_attr("amsgrad", true), float_attr("eps", 1e-6)}, 5, 3}};
  const std::vector<std::vector<int64_t>> sizes = {{3, 7}, {50}, {1}};  // a group of three tensors
  int checked = 0;
  for (const Case& c : cases) {
    for (int32_t dt : kFloatDtypes) {
      for (int32_t step_dt : {SPORA_DTYPE_I64, SPORA_DTYPE_F32}) {
        if (c.scalars == 2 && step_dt != SPORA_DTYPE_I64) continue;
        const int n = static_cast<int>(sizes.size());
        std::vector<Tensor> scal, lists, outs;
        Tensor lr = make(SPORA_DTYPE_F32, {}), step = make(step_dt, {}), gs = make(SPORA_DTYPE_F64, {});
        lr.as<float>()[0] = 0.05f;
        gs.as<double>()[0] = 0.5;
        if (step_dt == SPORA_DTYPE_I64) step.as<int64_t>()[0] = 3;
        else step.as<float>()[0] = 3;
        scal = c.scalars == 2 ? std::vector<Tensor>{lr, gs} : std::vector<Tensor>{lr, step, gs};
        for (int role = 0; role < c.roles; ++role)
          for (int k = 0; k < n; ++k) {
            Tensor t = make(role < 2 ? dt : state_dtype(dt), sizes[static_cast<size_t>(k)]);
            fill(t, role >= 3 ? 0.0 : -1.0, 1.0, false);  // v, vmax >= 0
            lists.push_back(std::move(t));
          }
        for (int role = 0; role < c.roles; ++role) {
          if (role == 1) continue;  // grads are not outputs
          for (int k = 0; k < n; ++k) outs.push_back(make(role == 0 ? dt : state_dtype(dt), sizes[static_cast<size_t>(k)]));
        }
        std::vector<const Tensor*> in;
        for (const Tensor& t : scal) in.push_back(&t);
        for (const Tensor& t : lists) in.push_back(&t);
        std::vector<Tensor*> want;
        for (Tensor& t : outs) want.push_back(&t);
        sp::KernelPlan plan;
        std::string why;
        ASSERT_TRUE(ref_plan(c.op, in, want, c.attrs, &plan, &why)) << c.op << ": " << why;
        ref_run(plan, in, want);
        // The GPU path: the reference's describe() (as the plan does), then
        // coefficients and element updates.
        sp::optim::Plan r;
        ASSERT_EQ(sp::optim::describe(plan, &r), nullptr);
        sg::OptParams u;
        u.adam = r.kind == sp::optim::Kind::kAdam;
        u.momentum_bufs = r.momentum_bufs;
        u.nesterov = r.nesterov;
        u.decoupled = r.decoupled;
        u.amsgrad = r.amsgrad;
        u.momentum = r.momentum;
        u.dampening = r.dampening;
        u.weight_decay = r.weight_decay;
        u.beta1 = r.beta1;
        u.beta2 = r.beta2;
        u.eps = r.eps;
        for (int i = 0; i < 3; ++i) u.scalar_dtype[i] = r.scalar_dtype[i];
        const void* sp_in[3] = {scal[0].bytes.data(), scal[1].bytes.data(), scal.size() > 2 ? scal[2].bytes.data() : nullptr};
        const sg::OptCoeffs co = sg::opt_coeffs(u, sp_in);
        std::vector<Tensor> got;
        for (const Tensor& t : outs) got.push_back(make(t.dtype, t.dims));
        sg::visit_storage(dt, [&](auto tag) {
          using T = decltype(tag);
          using S = sg::compute_of<T>;
          if constexpr (sg::is_float_c<S>) {
            for (int k = 0; k < n; ++k) {
              auto L = [&](int role) { return lists[static_cast<size_t>(role * n + k)].bytes.data(); };
              auto O = [&](int slot) { return got[static_cast<size_t>(slot * n + k)].bytes.data(); };
              const int64_t m = lists[static_cast<size_t>(k)].numel();
              for (int64_t j = 0; j < m; ++j) {
                if (!u.adam)
                  sg::sgd_elem<T>(u, co, reinterpret_cast<const T*>(L(0)), reinterpret_cast<const T*>(L(1)),
                                  u.momentum_bufs ? reinterpret_cast<const S*>(L(2)) : nullptr, reinterpret_cast<T*>(O(0)),
                                  u.momentum_bufs ? reinterpret_cast<S*>(O(1)) : nullptr, j);
                else
                  sg::adam_elem<T>(u, co, reinterpret_cast<const T*>(L(0)), reinterpret_cast<const T*>(L(1)),
                                   reinterpret_cast<const S*>(L(2)), reinterpret_cast<const S*>(L(3)),
                                   u.amsgrad ? reinterpret_cast<const S*>(L(4)) : nullptr, reinterpret_cast<T*>(O(0)),
                                   reinterpret_cast<S*>(O(1)), reinterpret_cast<S*>(O(2)),
                                   u.amsgrad ? reinterpret_cast<S*>(O(3)) : nullptr, j);
              }
            }
          }
        });
        // Same operations in the same types: bit-exact.
        for (size_t i = 0; i < outs.size(); ++i)
          EXPECT_EQ(compare(got[i], outs[i], 0, 0, std::string(c.op) + " " + sp::dtype_name(dt) + " output " + std::to_string(i)), 0);
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 36);
}

TEST(GpuMath, OptimizerUpdateInPlaceEqualsOutOfPlace) {
  // The host may give an update its own inputs as outputs: element j is
  // read completely before it is written.
  sg::OptParams u;
  u.adam = 1;
  u.amsgrad = 1;
  u.beta1 = 0.9;
  u.beta2 = 0.999;
  u.eps = 1e-8;
  const float lr = 0.01f;
  const int64_t step = 2;
  const double gs = 1;
  u.scalar_dtype[0] = SPORA_DTYPE_F32;
  u.scalar_dtype[1] = SPORA_DTYPE_I64;
  u.scalar_dtype[2] = SPORA_DTYPE_F64;
  const void* s[3] = {&lr, &step, &gs};
  const sg::OptCoeffs c = sg::opt_coeffs(u, s);
  std::vector<float> p = {0.5f, -1, 2}, g = {0.1f, 0.2f, -0.3f}, m = {0, 0.1f, 0}, v = {0.01f, 0, 0.2f}, vm = {0.02f, 0, 0.1f};
  std::vector<float> p2(3), m2(3), v2(3), vm2(3);
  for (int64_t j = 0; j < 3; ++j) sg::adam_elem<float>(u, c, p.data(), g.data(), m.data(), v.data(), vm.data(), p2.data(), m2.data(), v2.data(), vm2.data(), j);
  for (int64_t j = 0; j < 3; ++j) sg::adam_elem<float>(u, c, p.data(), g.data(), m.data(), v.data(), vm.data(), p.data(), m.data(), v.data(), vm.data(), j);
  EXPECT_EQ(p, p2);
  EXPECT_EQ(m, m2);
  EXPECT_EQ(v, v2);
  EXPECT_EQ(vm, vm2);
}

// ---- cross-entropy ----

TEST(GpuMath, CrossEntropyAndNllMatchReference) {
  int checked = 0;
  for (const char* op : {"cross_entropy", "nll_loss"}) {
    for (int32_t dt : kFloatDtypes) {
      for (int32_t tdt : {SPORA_DTYPE_I32, SPORA_DTYPE_I64}) {
        for (const char* red : {"mean", "sum", "none"}) {
          for (double smoothing : {0.0, 0.1}) {
            // 300 samples (N=60, S=5) over 256 threads; C = 11.
            Tensor x = make(dt, {60, 11, 5}), t = make(tdt, {60, 5});
            fill(x, -4, 4, false);
            const bool none = std::string(red) == "none";
            for (int64_t i = 0; i < t.numel(); ++i) {
              // Some ignored; with no reduction also some out of range (NaN samples).
              const int64_t v = i % 37 == 3 ? -100 : none && i % 53 == 7 ? 11 : static_cast<int64_t>(uniform() * 11);
              if (tdt == SPORA_DTYPE_I32) t.as<int32_t>()[i] = static_cast<int32_t>(v);
              else t.as<int64_t>()[i] = v;
            }
            Tensor want = make(dt, none ? std::vector<int64_t>{60, 5} : std::vector<int64_t>{});
            sp::KernelPlan plan;
            ASSERT_TRUE(ref_plan(op, {&x, &t}, {&want}, {string_attr("reduction", red), float_attr("label_smoothing", smoothing)}, &plan));
            ref_run(plan, {&x, &t}, {&want});
            sg::CeIndex ix;
            ix.from_logits = std::string(op) == "cross_entropy";
            ix.reduction = none ? sg::CeReduction::kNone : std::string(red) == "sum" ? sg::CeReduction::kSum : sg::CeReduction::kMean;
            ix.smoothing = smoothing;
            ix.n = 60;
            ix.c = 11;
            ix.s = 5;
            Tensor got = make(dt, want.dims);
            sg::visit_storage(dt, [&](auto tag) {
              using T = decltype(tag);
              auto go = [&](auto itag) {
                using I = decltype(itag);
                if (none) {
                  for (int64_t i = 0; i < 300; ++i) {
                    bool counted = false;
                    got.as<T>()[i] = sg::elem<T>::store(sg::ce_sample<T, I>(ix, x.as<T>(), t.as<I>(), i, &counted));
                  }
                } else {
                  got.as<T>()[0] = sg::elem<T>::store(sg::ce_reduce_emulate<T, I>(ix, x.as<T>(), t.as<I>()));
                }
              };
              if constexpr (sg::is_float_c<sg::compute_of<T>>) {
                if (tdt == SPORA_DTYPE_I32) go(int32_t{});
                else go(int64_t{});
              }
            });
            // Per sample: the reference's operations in its order (exact);
            // mean/sum: one rounding of a tree-ordered double sum.
            EXPECT_EQ(compare(got, want, none ? 0 : ulp_rel(dt), 0, std::string(op) + " " + red + " " + sp::dtype_name(dt)), 0);
            if (none) {
              EXPECT_TRUE(std::isnan(value_at(got, 7))) << "target 11 of 11 classes";
              EXPECT_EQ(value_at(got, 3), 0.0) << "ignored sample";
            } else {
              EXPECT_TRUE(std::isfinite(value_at(got, 0)));
            }
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, 96);
}

TEST(GpuMath, CrossEntropyMeanOverCountedSamples) {
  // No invalid targets: a finite mean over the non-ignored samples,
  // folded in the device's tree order.
  Tensor x = make(SPORA_DTYPE_F32, {300, 7, 1}), t = make(SPORA_DTYPE_I64, {300, 1});
  fill(x, -3, 3, false);
  for (int64_t i = 0; i < 300; ++i) t.as<int64_t>()[i] = i % 10 == 0 ? -100 : i % 7;
  Tensor want = make(SPORA_DTYPE_F32, {});
  sp::KernelPlan plan;
  ASSERT_TRUE(ref_plan("cross_entropy", {&x, &t}, {&want}, {}, &plan));
  ref_run(plan, {&x, &t}, {&want});
  sg::CeIndex ix;
  ix.n = 300;
  ix.c = 7;
  ix.s = 1;
  const double got = sg::ce_reduce_emulate<float, int64_t>(ix, x.as<float>(), t.as<int64_t>());
  ASSERT_TRUE(std::isfinite(got));
  EXPECT_EQ(static_cast<float>(got), want.as<float>()[0]);
}

// ---- layout copies ----

TEST(GpuMath, StridedCopiesMatchReference) {
  struct Case {
    const char* op;
    std::vector<int64_t> in, out;
    std::vector<AttrSpec> attrs;
  };
  const std::vector<Case> cases = {
      {"transpose", {3, 4, 5}, {5, 3, 4}, {ints_attr("perm", {2, 0, 1})}},
      {"transpose", {7, 9}, {9, 7}, {ints_attr("perm", {1, 0})}},
      {"broadcast_to", {1, 3, 1, 5}, {2, 3, 4, 5}, {ints_attr("shape", {2, 3, 4, 5})}},
      {"tile", {2, 3}, {4, 9}, {ints_attr("reps", {2, 3})}},
      {"flip", {3, 4, 5}, {3, 4, 5}, {ints_attr("axes", {0, 2})}},
      {"slice", {6, 7}, {3, 4}, {ints_attr("starts", {2, 1}), ints_attr("sizes", {3, 4})}},
      {"strided_slice", {10, 8}, {3, 3}, {ints_attr("begin", {1, 7}), ints_attr("end", {8, 0}), ints_attr("strides", {3, -3})}}};
  int checked = 0;
  for (const Case& c : cases) {
    for (int32_t dt : {SPORA_DTYPE_U8, SPORA_DTYPE_F16, SPORA_DTYPE_F32, SPORA_DTYPE_I64}) {
      Tensor x = make(dt, c.in);
      fill(x, -9, 9, false);
      Tensor want = make(dt, c.out);
      sp::KernelPlan plan;
      std::string why;
      if (!ref_plan(c.op, {&x}, {&want}, c.attrs, &plan, &why)) {
        ADD_FAILURE() << c.op << ": " << why;
        continue;
      }
      ref_run(plan, {&x}, {&want});
      const sg::CopyIndex ci = sg::copy_index_of(plan.get<sp::StridedCopy>());
      ASSERT_EQ(ci.numel, want.numel());
      Tensor got = make(dt, c.out);
      const size_t es = sp::dtype_size(dt);
      for (int64_t i = 0; i < ci.numel; ++i)  // copy_kernel: one element per output index
        std::memcpy(got.bytes.data() + i * es, x.bytes.data() + sg::copy_offset(ci, i) * es, es);
      EXPECT_EQ(got.bytes, want.bytes) << c.op << " " << sp::dtype_name(dt);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 28);
}

// ---- linear and its epilogue-fused forms ----

TEST(GpuMath, LinearAndFusedEpiloguesMatchReference) {
  struct Case {
    const char* op;
    const char* act;
  };
  const std::vector<Case> cases = {{"linear", nullptr},          {"linear_act", "relu"},     {"linear_act", "gelu_tanh"},
                                   {"linear_act", "sigmoid"},    {"linear_act", "gelu"},     {"linear_add_act", "tanh"},
                                   {"linear_add_act", "none"}};
  int checked = 0;
  for (const Case& c : cases) {
    for (int32_t dt : kFloatDtypes) {
      const bool residual = std::string(c.op) == "linear_add_act";
      Tensor x = make(dt, {37, 45}), w = make(dt, {29, 45}), b = make(dt, {29}), r = make(dt, {37, 29});
      fill(x, -1, 1, false);
      fill(w, -1, 1, false);
      fill(b, -1, 1, false);
      fill(r, -1, 1, false);
      Tensor want = make(dt, {37, 29});
      std::vector<const Tensor*> in = {&x, &w, &b};
      if (residual) in.push_back(&r);
      std::vector<AttrSpec> attrs;
      if (c.act) attrs.push_back(string_attr("activation", c.act));
      sp::KernelPlan plan;
      std::string why;
      ASSERT_TRUE(ref_plan(c.op, in, {&want}, attrs, &plan, &why)) << c.op << ": " << why;
      ref_run(plan, in, {&want});
      sg::GemmEpilogue ep;
      if (c.act) {
        ASSERT_TRUE(sg::gemm_epilogue_of(c.act, residual, &ep));
      }
      const sg::GemmIndex g = sg::gemm_index_of(shape_of(x), shape_of(w), shape_of(want), false, true);
      Tensor got = make(dt, {37, 29});
      sg::visit_storage(dt, [&](auto tag) {
        using T = decltype(tag);
        if constexpr (sg::is_float_c<sg::compute_of<T>>) {
          for (int64_t r0 = 0; r0 < g.m; r0 += sg::kGemmTile)
            for (int64_t c0 = 0; c0 < g.n; c0 += sg::kGemmTile)
              sg::gemm_block_emulate<T>(g, x.as<T>(), w.as<T>(), got.as<T>(), r0, c0, b.as<T>(),
                                        residual ? r.as<T>() : nullptr, c.act ? &ep : nullptr);
        }
      });
      // Bias first, products in ascending k, then each epilogue step rounded
      // like the unfused ops: bit-exact.
      EXPECT_EQ(compare(got, want, 0, 0, std::string(c.op) + " " + (c.act ? c.act : "") + " " + sp::dtype_name(dt)), 0);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 28);
}

// ---- global norm and clipping ----

TEST(GpuMath, GlobalNormAndClipMatchReference) {
  // Tensors of 1, 5000 (two blocks) and 70000 (18 blocks) elements.
  const std::vector<std::vector<int64_t>> sizes = {{1}, {50, 100}, {70000}};
  int checked = 0;
  for (int32_t dt : kFloatDtypes) {
    for (double max_norm : {1.0, 1e6}) {  // clipping, and a factor of 1
      std::vector<Tensor> xs;
      for (const auto& d : sizes) {
        xs.push_back(make(dt, d));
        fill(xs.back(), -1, 1, false);
      }
      const int32_t nd = dt == SPORA_DTYPE_F64 ? SPORA_DTYPE_F64 : SPORA_DTYPE_F32;
      std::vector<Tensor> outs;
      for (const auto& d : sizes) outs.push_back(make(dt, d));
      outs.push_back(make(nd, {}));
      std::vector<const Tensor*> in;
      for (const Tensor& t : xs) in.push_back(&t);
      std::vector<Tensor*> out;
      for (Tensor& t : outs) out.push_back(&t);
      sp::KernelPlan plan;
      std::string why;
      ASSERT_TRUE(ref_plan("clip_by_global_norm", in, out, {float_attr("max_norm", max_norm)}, &plan, &why)) << why;
      ref_run(plan, in, out);
      // The GPU order: per-tensor block partials, added in order.
      std::vector<double> partials;
      sg::visit_storage(dt, [&](auto tag) {
        using T = decltype(tag);
        if constexpr (sg::is_float_c<sg::compute_of<T>>) {
          for (const Tensor& t : xs) {
            const size_t at = partials.size();
            partials.resize(at + static_cast<size_t>(sg::norm_blocks_of(t.numel())));
            sg::norm_partials_emulate<T>(t.as<T>(), t.numel(), partials.data() + at);
          }
        }
      });
      EXPECT_EQ(partials.size(), 1u + 2u + 18u);
      const double norm = sg::norm_finish(partials.data(), static_cast<int64_t>(partials.size()));
      const double want_norm = value_at(outs.back(), 0);
      // The norm is stored as f32 except for f64 tensors.
      EXPECT_NEAR(norm, want_norm, (nd == SPORA_DTYPE_F64 ? 1e-12 : 2.5e-7) * want_norm) << sp::dtype_name(dt);
      const double factor = sg::norm_clip_factor(max_norm, norm);
      if (max_norm > 1e5) EXPECT_EQ(factor, 1.0);
      else EXPECT_LT(factor, 1.0);
      for (size_t k = 0; k < xs.size(); ++k) {
        Tensor got = make(dt, xs[k].dims);
        sg::visit_storage(dt, [&](auto tag) {
          using T = decltype(tag);
          if constexpr (sg::is_float_c<sg::compute_of<T>>)
            for (int64_t i = 0; i < got.numel(); ++i) got.as<T>()[i] = sg::norm_scale<T>(xs[k].as<T>()[i], factor);
        });
        // The factor may differ from the reference's in a double's last bit.
        EXPECT_EQ(compare(got, outs[k], ulp_rel(dt), 0, std::string("clip ") + sp::dtype_name(dt)), 0);
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 8);
}

}  // namespace
