// The bandwidth paths of the GPU plugins' elementwise, reduction and
// softmax kernels, checked on the CPU: the 32-bit index math and vector
// grouping of the elementwise kernels against numpy broadcasting and the
// reference kernels, and host emulations that follow the reduction and
// softmax kernels' new orders (multi-block partials, warp and thread
// units, register-held softmax lines) against the reference.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "math/ew_fast.h"
#include "math/ew_plan.h"
#include "math/reduce_math.h"
#include "math/softmax_math.h"

namespace {

using namespace gputest;

// ---- elementwise ----

TEST(GpuMathBandwidth, FastDivisionIsExact) {
  std::vector<uint32_t> ns;
  for (uint32_t n = 0; n < 5000; ++n) ns.push_back(n);
  for (uint32_t k = 0; k < 200000; ++k) ns.push_back(static_cast<uint32_t>(uniform() * 2147483647.0));
  for (uint32_t n : {2147483647u, 2147483646u, 1073741824u, 1073741823u, 65535u, 65536u}) ns.push_back(n);
  std::vector<uint32_t> ds;
  for (uint32_t d = 1; d < 300; ++d) ds.push_back(d);
  for (int k = 0; k < 31; ++k) {
    ds.push_back(1u << k);
    ds.push_back((1u << k) + 1);
    if (k > 1) ds.push_back((1u << k) - 1);
  }
  for (int k = 0; k < 200; ++k) ds.push_back(1 + static_cast<uint32_t>(uniform() * 2147483646.0));
  for (uint32_t d : ds) {
    const sg::FastDiv f = sg::fast_div_of(d);
    for (uint32_t n : ns) ASSERT_EQ(sg::fast_div(f, n), n / d) << n << " / " << d;
  }
}

// The vector kernels' view of an output: vectors of V elements at
// multiples of V, each operand's offset computed once per vector (32-bit
// index math) and then either V consecutive elements or one value
// broadcast; the rank-1 tail element by element. Checks every element's
// offsets against ew_offsets (64-bit, division per dim).
void check_vector_offsets(const sg::EwIndex& ix, int64_t n, int V) {
  ASSERT_TRUE(sg::ew_fast_fits(ix, n));
  const sg::EwFast f = sg::ew_fast_of(ix);
  const int64_t nv = sg::ew_vec_fits(ix, V) ? n / V : 0;
  for (int64_t j = 0; j < nv; ++j) {
    uint32_t off[sg::kEwMaxIn];
    sg::ew_fast_offsets<sg::kEwMaxIn>(f, static_cast<uint32_t>(j * V), off);
    for (int k = 0; k < ix.num_in; ++k) {
      if (f.strides[k][0] != 0) {
        ASSERT_EQ(off[k] % V, 0u) << "vector " << j << " input " << k << " misaligned";
      }
    }
    for (int v = 0; v < V; ++v) {
      int64_t want[sg::kEwMaxIn];
      sg::ew_offsets(ix, j * V + v, want);
      for (int k = 0; k < ix.num_in; ++k)
        ASSERT_EQ(off[k] + (f.strides[k][0] != 0 ? v : 0), static_cast<uint64_t>(want[k]))
            << "element " << j * V + v << " input " << k;
    }
  }
  for (int64_t i = nv * V; i < n; ++i) {
    uint32_t off[sg::kEwMaxIn];
    sg::ew_fast_offsets<sg::kEwMaxIn>(f, static_cast<uint32_t>(i), off);
    int64_t want[sg::kEwMaxIn];
    sg::ew_offsets(ix, i, want);
    for (int k = 0; k < ix.num_in; ++k) ASSERT_EQ(off[k], static_cast<uint64_t>(want[k])) << "element " << i;
  }
}

sp::Shape mk_shape(const std::vector<int64_t>& d) {
  sp::Shape s;
  s.rank = static_cast<int32_t>(d.size());
  for (size_t i = 0; i < d.size(); ++i) s.dims[i] = d[i];
  return s;
}

TEST(GpuMathBandwidth, VectorOffsetsAreNumpys) {
  struct Case {
    std::vector<int64_t> out;
    std::vector<std::vector<int64_t>> in;
    bool vec16;  // whole vectors of 16 one-byte elements
  };
  const std::vector<Case> cases = {
      {{1001}, {{1001}, {1001}}, true},                 // flat, with a tail
      {{1001}, {{1}, {1001}}, true},                    // scalar operand
      {{64, 48}, {{64, 48}, {1, 48}}, true},               // [M, N] op [N]
      {{64, 48}, {{64, 48}, {64, 1}}, true},            // [M, N] op [M, 1]
      {{3, 5, 7, 32}, {{3, 1, 7, 32}, {1, 5, 1, 32}, {3, 5, 7, 1}}, true},
      {{6, 10}, {{6, 10}, {1, 10}}, false},                // rows of 10: not whole vectors
      {{2, 3, 4, 5, 6}, {{2, 1, 4, 1, 6}, {1, 3, 1, 5, 1}}, false},
      {{1, 7, 1, 9}, {{1, 7, 1, 1}, {1, 1, 1, 9}, {1, 1, 1, 1}}, false},
  };
  for (const Case& c : cases) {
    sp::Shape ins[sg::kEwMaxIn];
    for (size_t k = 0; k < c.in.size(); ++k) ins[k] = mk_shape(c.in[k]);
    const sp::Shape out = mk_shape(c.out);
    const sg::EwIndex ix = sg::ew_index_of(out, ins, static_cast<int>(c.in.size()));
    EXPECT_EQ(sg::ew_vec_fits(ix, 16), c.vec16) << "case of " << out.numel() << " rank " << ix.rank << " inner " << ix.dims[ix.rank - 1];
    for (int V : {1, 2, 4, 8, 16}) check_vector_offsets(ix, out.numel(), V);
  }
}

// A binary op through the vector kernel's loop (vectors of V, operands
// loaded or broadcast per vector), compared with the reference bit for bit.
template <class T>
Tensor vec_binary(sg::EwOp op, const sg::EwIndex& ix, const Tensor& a, const Tensor& b, int32_t out_dtype, int64_t n,
                  int V) {
  using C = sg::compute_of<T>;
  Tensor y = make(out_dtype, {n});
  const sg::EwFast f = sg::ew_fast_of(ix);
  const bool ca = f.strides[0][0] != 0, cb = f.strides[1][0] != 0;
  auto elem_at = [&](int64_t i, const uint32_t* off, int v) {
    const C va = sg::elem<T>::load(a.as<T>()[off[0] + (ca ? v : 0)]);
    const C vb = sg::elem<T>::load(b.as<T>()[off[1] + (cb ? v : 0)]);
    if (sg::ew_is_compare(op)) y.as<sg::bool_t>()[i + v] = sg::bool_t{static_cast<uint8_t>(sg::ew_compare<C>(op, va, vb))};
    else if constexpr (!sg::is_bool_c<C>) y.as<T>()[i + v] = sg::elem<T>::store(sg::ew_arith<C>(op, va, vb));
  };
  const int64_t nv = n / V;
  for (int64_t j = 0; j < nv; ++j) {
    uint32_t off[2];
    sg::ew_fast_offsets<2>(f, static_cast<uint32_t>(j * V), off);
    for (int v = 0; v < V; ++v) elem_at(j * V, off, v);
  }
  for (int64_t i = nv * V; i < n; ++i) {
    uint32_t off[2];
    sg::ew_fast_offsets<2>(f, static_cast<uint32_t>(i), off);
    elem_at(i, off, 0);
  }
  return y;
}

TEST(GpuMathBandwidth, VectorBinaryOpsMatchReference) {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{4, 96}, {4, 96}}, {{4, 96}, {1, 96}}, {{4, 96}, {4, 1}}, {{1}, {999}}, {{999}, {999}}};
  int checked = 0;
  for (const char* op : {"add", "mul", "div", "maximum", "less", "logical_and"}) {
    for (int32_t dt : kAllDtypes) {
      for (const auto& [sa, sb] : shapes) {
        std::vector<int64_t> so = sa;  // operands have the output's rank (the planner's rule)
        for (size_t d = 0; d < so.size(); ++d) so[d] = std::max(sa[d], sb[d]);
        Tensor a = make(dt, sa), b = make(dt, sb);
        fill(a);
        fill(b, -2, 2);
        const bool cmp = std::string(op) == "less" || std::string(op) == "logical_and";
        Tensor want = make(cmp ? SPORA_DTYPE_BOOL : dt, so);
        sp::KernelPlan plan;
        if (!ref_plan(op, {&a, &b}, {&want}, {}, &plan)) continue;
        ref_run(plan, {&a, &b}, {&want});
        const sp::Shape ins[2] = {shape_of(a), shape_of(b)};
        const sg::EwIndex ix = sg::ew_index_of(shape_of(want), ins, 2);
        sg::EwOp code = sg::EwOp::kCount;
        ASSERT_TRUE(sg::ew_op_of(op, &code));
        sg::visit_storage(dt, [&](auto tag) {
          using T = decltype(tag);
          const int V = static_cast<int>(16 / std::max<size_t>(sizeof(T), 1));
          ASSERT_TRUE(sg::ew_vec_fits(ix, V)) << op;
          Tensor got = vec_binary<T>(code, ix, a, b, want.dtype, want.numel(), V);
          got.dims = want.dims;
          EXPECT_EQ(got.bytes, want.bytes) << op << " " << sp::dtype_name(dt);
        });
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 120);
}

// ---- reductions: schedules and their order ----

struct RedCase {
  std::vector<int64_t> dims;
  std::vector<int64_t> axes;
  sg::RedUnit unit;  // for warp 32
  bool parted;       // more than one part
};

const std::vector<RedCase>& red_cases() {
  static const std::vector<RedCase> cases = {
      {{100000}, {0}, sg::RedUnit::kBlock, true},            // a full sum: many blocks, then the combine
      {{2, 50000}, {1}, sg::RedUnit::kBlock, true},          // few long rows
      {{3, 9000}, {1}, sg::RedUnit::kBlock, true},
      {{300, 1000}, {1}, sg::RedUnit::kWarp, false},         // many short rows: a warp each
      {{500, 7}, {1}, sg::RedUnit::kThread, false},          // tiny rows: a thread each
      {{5000, 3}, {0}, sg::RedUnit::kThread, true},          // columns, few outputs: split
      {{40, 2000}, {0}, sg::RedUnit::kThread, true},         // columns
      {{9, 3, 700}, {0, 2}, sg::RedUnit::kBlock, true},      // two reduced dims
      {{4, 6, 50, 7}, {1, 2}, sg::RedUnit::kThread, true},   // merged middle dims, kept inner
      {{8, 4096}, {1}, sg::RedUnit::kBlock, false},          // few rows of exactly one chunk
  };
  return cases;
}

TEST(GpuMathBandwidth, ReductionSchedules) {
  for (const RedCase& c : red_cases()) {
    Tensor x = make(SPORA_DTYPE_F32, c.dims);
    sp::AttrList attrs;
    std::vector<AttrSpec> specs = {ints_attr("axes", c.axes)};
    std::vector<int64_t> od = c.dims;
    for (int64_t a : c.axes) od[static_cast<size_t>(a)] = 1;
    Tensor y = make(SPORA_DTYPE_F32, od);
    sp::KernelPlan plan;
    ASSERT_TRUE(ref_plan("sum", {&x}, {&y}, specs, &plan));
    const sg::RedIndex ix = sg::red_index_of(sg::RedKind::kSum, shape_of(x), plan.attrs, 32);
    const std::string what = "shape of " + std::to_string(x.numel()) + " elements, " + std::to_string(c.axes.size()) + " axes";
    EXPECT_EQ(ix.unit, c.unit) << what;
    EXPECT_EQ(ix.parts > 1, c.parted) << what;
    EXPECT_EQ(ix.red_rank, c.axes.size() == 2 && c.axes[1] - c.axes[0] == 1 ? 1 : static_cast<int>(c.axes.size())) << what;
    // The parts cover the positions once, in whole widths.
    EXPECT_GE(ix.parts * ix.chunk, ix.count) << what;
    EXPECT_LT((ix.parts - 1) * ix.chunk, ix.count) << what;
    if (ix.parts > 1) {
      EXPECT_EQ(ix.chunk % ix.width, 0) << what;
    }
    EXPECT_LE(ix.parts, 1024) << what;
  }
}

// Every kind and dtype through red_output_emulate (the device's units,
// partials and combining warp, for warps of 32 and 64) against the
// reference.
TEST(GpuMathBandwidth, ReductionSchedulesMatchReference) {
  const char* names[] = {"sum", "mean", "max", "min", "prod", "logsumexp", "var", "std", "argmax", "argmin"};
  int checked = 0;
  for (const RedCase& c : red_cases()) {
    for (int k = 0; k < 10; ++k) {
      const sg::RedKind kind = static_cast<sg::RedKind>(k);
      const bool arg = kind == sg::RedKind::kArgMax || kind == sg::RedKind::kArgMin;
      if (arg && c.axes.size() > 1) continue;
      for (int32_t dt : kAllDtypes) {
        Tensor x = make(dt, c.dims);
        if (kind == sg::RedKind::kProd) fill(x, 0.9, 1.1, false);
        else fill(x, -3, 3, dt != SPORA_DTYPE_F32);  // f32: no specials (the finite sums are checked); others: NaN/inf too
        std::vector<int64_t> od = c.dims;
        for (int64_t a : c.axes) od[static_cast<size_t>(a)] = 1;
        std::vector<AttrSpec> attrs;
        if (arg) attrs.push_back(int_attr("axis", c.axes[0]));
        else attrs.push_back(ints_attr("axes", c.axes));
        if (kind == sg::RedKind::kVar || kind == sg::RedKind::kStd) attrs.push_back(int_attr("correction", 1));
        Tensor want = make(arg ? SPORA_DTYPE_I64 : dt, od);
        sp::KernelPlan plan;
        if (!ref_plan(names[k], {&x}, {&want}, attrs, &plan)) continue;
        ref_run(plan, {&x}, {&want});
        for (int warp : {32, 64}) {
          const sg::RedIndex ix = sg::red_index_of(kind, shape_of(x), plan.attrs, warp);
          ASSERT_EQ(ix.outputs, want.numel());
          Tensor got = make(want.dtype, od);
          sg::visit_storage(dt, [&](auto tag) {
            using T = decltype(tag);
            using C = sg::compute_of<T>;
            if constexpr (!sg::is_bool_c<C>) {
              for (int64_t o = 0; o < ix.outputs; ++o) {
                double center = 0;
                const sg::RedAcc<C> acc = sg::red_output_emulate<T>(ix, x.as<T>(), o, &center);
                if (arg) got.as<int64_t>()[o] = acc.pos;
                else got.as<T>()[o] = sg::elem<T>::store(sg::red_finish<C>(ix, acc, center));
              }
            }
          });
          const bool exact = arg || kind == sg::RedKind::kMax || kind == sg::RedKind::kMin ||
                             dt == SPORA_DTYPE_I32 || dt == SPORA_DTYPE_I64 || dt == SPORA_DTYPE_U8;
          EXPECT_EQ(compare(got, want, exact ? 0 : ulp_rel(dt), exact ? 0 : 1e-9,
                            std::string(names[k]) + " " + sp::dtype_name(dt) + " over " + std::to_string(x.numel()) +
                                " elements, warp " + std::to_string(warp)),
                    0);
          ++checked;
        }
      }
    }
  }
  EXPECT_GE(checked, 800);
}

// ---- softmax held in registers ----

TEST(GpuMathBandwidth, SoftmaxRegisterConfigs) {
  sg::SmIndex ix;
  ix.kind = sg::SmKind::kSoftmax;
  auto cfg = [&](int64_t len, size_t size, bool vec_ok, int warp) {
    ix.len = len;
    return sg::sm_reg_cfg(ix, size, vec_ok, warp);
  };
  EXPECT_EQ(cfg(8192, 4, true, 32).threads, sg::kSmThreads);  // the benchmark's line: one block
  EXPECT_EQ(cfg(8192, 4, true, 32).per, 32);
  EXPECT_EQ(cfg(8192, 4, true, 32).vec, 4);
  EXPECT_EQ(cfg(8192, 4, false, 32).threads, 0);  // unaligned: three passes
  EXPECT_EQ(cfg(1000, 4, true, 32).threads, 32);
  EXPECT_EQ(cfg(1000, 4, true, 32).per, 32);
  EXPECT_EQ(cfg(10, 4, true, 32).vec, 1);  // not whole vectors
  EXPECT_EQ(cfg(10, 2, true, 64).per, 4);
  EXPECT_EQ(cfg(4096, 8, true, 32).per, 16);
  EXPECT_EQ(cfg(8192, 8, true, 32).threads, 0);  // doubles: 16 per thread
  EXPECT_EQ(cfg(600, 4, false, 32).threads, 0);  // element by element: 16 per lane
  ix.inner = 3;
  EXPECT_EQ(cfg(100, 4, true, 32).threads, 0);  // not the innermost axis
}

// Every line through sm_reg_line_emulate (the device's order: slots in
// vectors, per-thread folds, the halving tree) against the reference.
TEST(GpuMathBandwidth, SoftmaxInRegistersMatchesReference) {
  int checked = 0;
  for (int warp : {32, 64}) {
    for (int32_t dt : kFloatDtypes) {
      for (int64_t len : {1, 7, 40, 128, 129, 700, 1000, 1024, 2048, 3000, 4096, 8192}) {
        const std::vector<int64_t> dims = {3, len};
        Tensor x = make(dt, dims);
        fill(x, -30, 30, false);
        for (const char* op : {"softmax", "log_softmax"}) {
          Tensor want = make(dt, dims);
          sp::KernelPlan plan;
          ASSERT_TRUE(ref_plan(op, {&x}, {&want}, {int_attr("axis", 1)}, &plan));
          ref_run(plan, {&x}, {&want});
          Tensor dy = make(dt, dims);
          fill(dy, -1, 1, false);
          const std::string gop = std::string(op) + "_grad";
          Tensor gw = make(dt, dims);
          sp::KernelPlan gplan;
          ASSERT_TRUE(ref_plan(gop, {&want, &dy}, {&gw}, {int_attr("axis", 1)}, &gplan));
          ref_run(gplan, {&want, &dy}, {&gw});
          for (bool vec_ok : {true, false}) {
            const sg::SmIndex ix = sg::sm_index_of(op, shape_of(x), plan.attrs);
            const sg::SmRegCfg c = sg::sm_reg_cfg(ix, sp::dtype_size(dt), vec_ok, warp);
            if (c.threads == 0) continue;
            const sg::SmIndex gix = sg::sm_index_of(gop, shape_of(x), gplan.attrs);
            Tensor got = make(dt, dims), gg = make(dt, dims);
            sg::visit_storage(dt, [&](auto tag) {
              using T = decltype(tag);
              if constexpr (sg::is_float_c<sg::compute_of<T>>) {
                for (int64_t l = 0; l < ix.outer; ++l) {
                  sg::sm_reg_line_emulate<T>(ix, c, x.as<T>(), nullptr, got.as<T>(), l);
                  sg::sm_reg_line_emulate<T>(gix, c, want.as<T>(), dy.as<T>(), gg.as<T>(), l);
                }
              }
            });
            const std::string what = std::string(op) + " " + sp::dtype_name(dt) + " len " + std::to_string(len) +
                                     " warp " + std::to_string(warp) + " threads " + std::to_string(c.threads) +
                                     " vec " + std::to_string(c.vec);
            EXPECT_EQ(compare(got, want, 2 * ulp_rel(dt), 2 * ulp_rel(dt), what), 0);
            EXPECT_EQ(compare(gg, gw, 4 * ulp_rel(dt), 4 * ulp_rel(dt), "grad " + what), 0);
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GE(checked, 250);
}

}  // namespace
