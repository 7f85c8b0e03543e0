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
#include <string>
#include <vector>

#include "math/ew_plan.h"
#include "math/reduce_math.h"
#include "math/softmax_math.h"
#include "gpu_test_util.h"

namespace {

using namespace gputest;

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

}  // namespace
