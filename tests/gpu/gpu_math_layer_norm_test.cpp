// layer_norm's and layer_norm_grad's register path
// (math/layer_norm_fast.h): which rows take it, and its host emulation (the
// device's slots, vectors and trees, for a warp of 32 and of 64 lanes)
// against the reference kernel of plugins/common/kernels/norm.cpp for every
// float dtype. Rows that do not fit take the general kernel, checked here
// too at those lengths.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "math/layer_norm_fast.h"

namespace {

using namespace gputest;

int32_t stats_dtype(int32_t dt) { return dt == SPORA_DTYPE_F16 || dt == SPORA_DTYPE_BF16 ? SPORA_DTYPE_F32 : dt; }

size_t size_of(int32_t dt) { return sp::dtype_size(dt); }

sg::GnIndex layer_index(int64_t rows, int64_t len, bool grad = false) {
  sp::Shape s;
  s.rank = 2;
  s.dims[0] = rows, s.dims[1] = len;
  sp::AttrList attrs;
  return sg::gn_index_of(grad ? "layer_norm_grad" : "layer_norm", s, attrs);
}

// Fraction of elements that are bit-identical (NaN matching NaN).
double exact_fraction(const Tensor& got, const Tensor& want) {
  if (want.numel() == 0) return 1;
  int64_t same = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double g = value_at(got, i), w = value_at(want, i);
    if ((std::isnan(g) && std::isnan(w)) || (g == w && std::signbit(g) == std::signbit(w))) ++same;
  }
  return static_cast<double>(same) / static_cast<double>(want.numel());
}

// Which path a row length takes, per element size, with aligned tensors
// and a warp of 32: the register path up to 32 warps' worth of elements
// (16 for f64) and a block's 8192 (4096 f64, 16384 f16/bf16).
TEST(GpuMathLayerNorm, RegisterPathCoversTheRowsThatFit) {
  struct Want {
    int64_t len;
    size_t size;
    int threads, per, vec;
  };
  const Want wants[] = {
      {1, 4, 32, 4, 1},         {7, 4, 32, 4, 1},          {31, 4, 32, 4, 1},        {1024, 4, 32, 32, 4},
      {1000, 4, 32, 32, 4},     {1000, 8, 256, 8, 2},      {1000, 2, 32, 32, 8},     {4096, 4, 256, 16, 4},
      {4097, 4, 0, 0, 1},       {8192, 4, 256, 32, 4},     {8192, 8, 0, 0, 1},       {4096, 8, 256, 16, 2},
      {16384, 2, 256, 64, 8},   {16384, 4, 0, 0, 1},       {16392, 2, 0, 0, 1},      {512, 8, 32, 16, 2},
      {512, 4, 32, 16, 4},      {513, 4, 0, 0, 1},  // no whole vectors: a warp's 16 scalar slots, 512
  };
  for (const Want& w : wants) {
    const sg::LnRegCfg c = sg::ln_reg_cfg(layer_index(3, w.len), w.size, true, 32);
    SCOPED_TRACE("len " + std::to_string(w.len) + " size " + std::to_string(w.size));
    EXPECT_EQ(c.threads, w.threads);
    if (w.threads == 0) continue;
    EXPECT_EQ(c.per, w.per);
    EXPECT_EQ(c.vec, w.vec);
    EXPECT_GE(static_cast<int64_t>(c.threads) * c.per, w.len);
  }
  // Unaligned tensors: element by element, warps only.
  EXPECT_EQ(sg::ln_reg_cfg(layer_index(3, 1024), 4, false, 32).threads, 0);
  const sg::LnRegCfg u = sg::ln_reg_cfg(layer_index(3, 500), 4, false, 32);
  EXPECT_EQ(u.threads, 32);
  EXPECT_EQ(u.per, 16);
  EXPECT_EQ(u.vec, 1);
  // The gradient caches a second value per slot: f16/bf16 rows up to 8192.
  const sg::LnRegCfg g = sg::ln_reg_cfg(layer_index(3, 8192, true), 2, true, 32);
  EXPECT_EQ(g.threads, 256);
  EXPECT_EQ(g.per, 32);
  EXPECT_EQ(sg::ln_reg_cfg(layer_index(3, 16384, true), 2, true, 32).threads, 0);
  EXPECT_EQ(sg::ln_reg_cfg(layer_index(3, 1024, true), 4, true, 32).per, 32);
  // Other norms, or empty rows: the general kernel.
  sp::Shape s;
  s.rank = 3, s.dims[0] = 4, s.dims[1] = 8, s.dims[2] = 64;
  sp::AttrList attrs;
  EXPECT_EQ(sg::ln_reg_cfg(sg::gn_index_of("group_norm", s, attrs), 4, true, 32).threads, 0);
  EXPECT_EQ(sg::ln_reg_cfg(layer_index(4, 0), 4, true, 32).threads, 0);
  EXPECT_EQ(sg::ln_reg_cfg(layer_index(4, 0, true), 4, true, 32).threads, 0);
}

// Every position of a row is some thread's slot exactly once, and slots past
// the row are skipped, for every configuration the path can pick.
TEST(GpuMathLayerNorm, SlotsCoverEachPositionOnce) {
  std::vector<int64_t> lens;
  for (int64_t len = 1; len <= 70; ++len) lens.push_back(len);
  for (int64_t len : {96, 100, 127, 128, 250, 256, 500, 512, 513, 1000, 1024, 1025, 2000, 2048, 3000, 4096, 6000,
                      8192, 12000, 16384})
    lens.push_back(len);
  for (int warp : {32, 64})
    for (size_t size : {2u, 4u, 8u})
      for (bool vec_ok : {true, false})
        for (int64_t len : lens) {
         for (bool grad : {false, true}) {
          const sg::LnRegCfg c = sg::ln_reg_cfg(layer_index(1, len, grad), size, vec_ok, warp);
          if (c.threads == 0) continue;
          ASSERT_EQ(c.per % c.vec, 0);
          std::vector<int> hits(static_cast<size_t>(len), 0);
          for (int t = 0; t < c.threads; ++t)
            for (int k = 0; k < c.per; ++k) {
              const int64_t pos = sg::ln_reg_pos(c.threads, c.vec, t, k);
              if (pos < len) ++hits[static_cast<size_t>(pos)];
              // A vector is wholly in the row or wholly past it.
              if (k % c.vec == 0) {
                ASSERT_EQ(pos < len, pos + c.vec - 1 < len) << len;
              }
            }
          for (int64_t i = 0; i < len; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)], 1) << "len " << len << " pos " << i;
         }
        }
}

struct Checked {
  int fast = 0, general = 0;
};

// Runs layer_norm [rows, len] of dtype dt on the reference and on the
// emulation of the path ln_reg_cfg picks (the general kernel's where it
// picks none) and compares y, mean and invstd.
void check(int64_t rows, int64_t len, int32_t dt, bool affine, bool specials, bool vec_ok, int warp, Checked* n) {
  const sg::GnIndex ix = layer_index(rows, len);
  const sg::LnRegCfg c = sg::ln_reg_cfg(ix, size_of(dt), vec_ok, warp);
  const std::string what = std::string("layer_norm ") + sp::dtype_name(dt) + " [" + std::to_string(rows) + "," +
                           std::to_string(len) + "]" + (affine ? "" : " identity affine") +
                           (specials ? " specials" : "") + " warp " + std::to_string(warp) + " threads " +
                           std::to_string(c.threads) + " per " + std::to_string(c.per) + " vec " +
                           std::to_string(c.vec);
  SCOPED_TRACE(what);
  const int32_t st = stats_dtype(dt);
  Tensor x = make(dt, {rows, len}), gamma = make(dt, {len}), beta = make(dt, {len});
  fill(x, -3, 5, specials);
  if (affine) {
    fill(gamma, -2, 2, false);
    fill(beta, -1, 1, false);
  } else {
    sg::visit_storage(dt, [&](auto tag) {
      using T = decltype(tag);
      for (int64_t i = 0; i < len; ++i) {
        gamma.as<T>()[i] = sg::elem<T>::store(1.0f);
        beta.as<T>()[i] = sg::elem<T>::store(0.0f);
      }
    });
  }
  const std::vector<const Tensor*> in = {&x, &gamma, &beta};
  std::vector<Tensor> want = {make(dt, {rows, len}), make(st, {rows}), make(st, {rows})};
  std::vector<Tensor> got = want;
  // Poison the outputs: every element must be written.
  for (Tensor& t : got) std::fill(t.bytes.begin(), t.bytes.end(), uint8_t{0xff});
  sp::KernelPlan plan;
  std::string why;
  ASSERT_TRUE(ref_plan("layer_norm", in, {&want[0], &want[1], &want[2]}, {float_attr("eps", 1e-5)}, &plan, &why))
      << why;
  ref_run(plan, in, {&want[0], &want[1], &want[2]});
  const sg::GnIndex pix = sg::gn_index_of("layer_norm", shape_of(x), plan.attrs);
  const void* ip[] = {x.bytes.data(), gamma.bytes.data(), beta.bytes.data()};
  void* op[] = {got[0].bytes.data(), got[1].bytes.data(), got[2].bytes.data()};
  sg::visit_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (sg::is_float_c<sg::compute_of<T>>) {
      if (c.threads > 0) sg::ln_reg_forward_emulate<T>(pix, c, ip, op);
      else sg::gn_forward_emulate<T>(pix, ip, op);
    }
  });
  (c.threads > 0 ? n->fast : n->general) += 1;
  // As the general kernel's test: statistics rounded from doubles summed in
  // another order, y with an absolute floor where x - mean cancels.
  const char* names[] = {"y", "mean", "invstd"};
  for (size_t i = 0; i < want.size(); ++i) {
    const int32_t odt = want[i].dtype;
    const double abs_tol = i == 0 ? 8 * ulp_rel(odt) * (affine ? 4 : 1) : 0;
    EXPECT_EQ(compare(got[i], want[i], 2 * ulp_rel(odt), abs_tol, what + " " + names[i]), 0);
    if (!specials && odt != SPORA_DTYPE_F64) {
      EXPECT_GE(exact_fraction(got[i], want[i]), 0.97) << names[i];
    }
  }
}

// layer_norm_grad at the reference forward's statistics: dx from the
// emulation of the register path (or the general kernel's), dgamma/dbeta
// from the general kernel's column partials, which the device runs after it.
void check_grad(int64_t rows, int64_t len, int32_t dt, bool affine, bool specials, bool vec_ok, int warp,
                Checked* n) {
  const sg::GnIndex gix0 = layer_index(rows, len, true);
  const sg::LnRegCfg c = sg::ln_reg_cfg(gix0, size_of(dt), vec_ok, warp);
  const std::string what = std::string("layer_norm_grad ") + sp::dtype_name(dt) + " [" + std::to_string(rows) +
                           "," + std::to_string(len) + "]" + (affine ? "" : " identity affine") +
                           (specials ? " specials" : "") + " warp " + std::to_string(warp) + " threads " +
                           std::to_string(c.threads) + " per " + std::to_string(c.per) + " vec " +
                           std::to_string(c.vec);
  SCOPED_TRACE(what);
  const int32_t st = stats_dtype(dt);
  Tensor x = make(dt, {rows, len}), gamma = make(dt, {len}), beta = make(dt, {len}), dy = make(dt, {rows, len});
  fill(x, -3, 5, specials);
  fill(dy, -1, 1, specials);
  if (affine) {
    fill(gamma, -2, 2, false);
  } else {
    sg::visit_storage(dt, [&](auto tag) {
      using T = decltype(tag);
      for (int64_t i = 0; i < len; ++i) gamma.as<T>()[i] = sg::elem<T>::store(1.0f);
    });
  }
  // The statistics of the reference forward.
  Tensor y = make(dt, {rows, len}), mean = make(st, {rows}), invstd = make(st, {rows});
  sp::KernelPlan fplan;
  std::string why;
  ASSERT_TRUE(ref_plan("layer_norm", {&x, &gamma, &beta}, {&y, &mean, &invstd}, {float_attr("eps", 1e-5)}, &fplan,
                       &why))
      << why;
  ref_run(fplan, {&x, &gamma, &beta}, {&y, &mean, &invstd});
  const std::vector<const Tensor*> in = {&x, &dy, &gamma, &mean, &invstd};
  std::vector<Tensor> want = {make(dt, {rows, len}), make(dt, {len}), make(dt, {len})};
  std::vector<Tensor> got = want;
  for (Tensor& t : got) std::fill(t.bytes.begin(), t.bytes.end(), uint8_t{0xff});
  sp::KernelPlan plan;
  ASSERT_TRUE(ref_plan("layer_norm_grad", in, {&want[0], &want[1], &want[2]}, {float_attr("eps", 1e-5)}, &plan, &why))
      << why;
  ref_run(plan, in, {&want[0], &want[1], &want[2]});
  const sg::GnIndex gix = sg::gn_index_of("layer_norm_grad", shape_of(x), plan.attrs);
  std::vector<double> ws(sg::gn_workspace(gix) / sizeof(double) + 1, std::nan(""));
  const void* ip[] = {x.bytes.data(), dy.bytes.data(), gamma.bytes.data(), mean.bytes.data(), invstd.bytes.data()};
  void* op[] = {got[0].bytes.data(), got[1].bytes.data(), got[2].bytes.data()};
  sg::visit_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (sg::is_float_c<sg::compute_of<T>>) {
      sg::gn_backward_emulate<T>(gix, ip, op, ws.data());
      if (c.threads > 0) {
        // dx from the register path alone.
        std::fill(got[0].bytes.begin(), got[0].bytes.end(), uint8_t{0xff});
        sg::ln_reg_backward_emulate<T>(gix, c, ip, op);
      }
    }
  });
  (c.threads > 0 ? n->fast : n->general) += 1;
  const char* names[] = {"dx", "dgamma", "dbeta"};
  for (size_t i = 0; i < 3; ++i) {
    // As the general kernel's test: dx cancels, the parameter sums have
    // mixed signs; absolute floors at the dtype's precision.
    const double scale = i == 0 ? 8 : std::sqrt(static_cast<double>(x.numel() + 1)) * 4;
    EXPECT_EQ(compare(got[i], want[i], 4 * ulp_rel(dt), scale * ulp_rel(dt), what + " " + names[i]), 0);
    if (!specials && dt != SPORA_DTYPE_F64) {
      EXPECT_GE(exact_fraction(got[i], want[i]), 0.9) << names[i];
    }
  }
}

const int64_t kLens[] = {1, 7, 31, 64, 500, 1000, 1024, 2048, 4096, 4097, 8192, 16384, 16392};

int64_t rows_for(int64_t len) { return len >= 4096 ? 3 : len >= 500 ? 5 : 9; }

TEST(GpuMathLayerNorm, RegisterPathMatchesReference) {
  Checked n;
  for (int32_t dt : kFloatDtypes)
    for (int64_t len : kLens)
      for (bool affine : {true, false}) check(rows_for(len), len, dt, affine, false, true, 32, &n);
  // Every length but the longest takes the register path for some dtype.
  EXPECT_GT(n.fast, 2 * 4 * 8);
  EXPECT_GT(n.general, 2 * 4);
}

TEST(GpuMathLayerNorm, GradRegisterPathMatchesReference) {
  Checked n;
  for (int32_t dt : kFloatDtypes)
    for (int64_t len : kLens)
      for (bool affine : {true, false}) check_grad(rows_for(len), len, dt, affine, false, true, 32, &n);
  EXPECT_GT(n.fast, 2 * 4 * 8);
  EXPECT_GT(n.general, 2 * 4);
}

// Scalar slots (tensors not aligned to 16 bytes, or rows that are no whole
// number of vectors) and the ROCm plugin's 64-lane warps.
TEST(GpuMathLayerNorm, ScalarSlotsAndWideWarpsMatchReference) {
  Checked n;
  for (int32_t dt : kFloatDtypes)
    for (int64_t len : {1, 7, 31, 100, 257, 512, 1000, 1024, 4096})
      for (int warp : {32, 64}) {
        check(rows_for(len), len, dt, true, false, false, warp, &n);
        check_grad(rows_for(len), len, dt, true, false, false, warp, &n);
        if (warp == 64) {
          check(rows_for(len), len, dt, true, false, true, warp, &n);
          check_grad(rows_for(len), len, dt, true, false, true, warp, &n);
        }
      }
  EXPECT_GT(n.fast, 4 * 24);
}

// NaN and infinities in a row make its statistics and outputs (dx) NaN, as
// the reference's; other rows are unaffected.
TEST(GpuMathLayerNorm, SpecialValuesPropagateAsReference) {
  Checked n;
  for (int32_t dt : kFloatDtypes)
    for (int64_t len : {40, 1024, 8192}) {
      check(4, len, dt, true, true, true, 32, &n);
      check_grad(4, len, dt, true, true, true, 32, &n);
    }
  EXPECT_GT(n.fast, 4 * 4);
}

}  // namespace
