// The GPU plugins' training-path kernel arithmetic, checked on the CPU: the
// tiled GEMM and linear epilogues, the fused optimizer updates and global
// norm, the losses and the layout copies. See gpu_math_test.cpp for how
// (device-order host emulation of plugins/cuda/math against the reference
// kernels of plugins/common).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/copy.h"
#include "kernels/optim.h"
#include "math/blas_args.h"
#include "math/copy_math.h"
#include "math/gemm_math.h"
#include "math/index_math.h"
#include "math/loss_math.h"
#include "math/norm_math.h"
#include "math/optim_math.h"
#include "gpu_test_util.h"

namespace {

using namespace gputest;

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

// ---- the cuBLAS call's arguments ----

// The BLAS definition of a column-major, strided-batched GEMM with
// alpha = 1: C[i + j ldc] = beta C[...] + sum_l op(X)[i, l] op(Y)[l, j],
// op(X)[i, l] = trans ? X[l + i ldx] : X[i + l ldx].
template <class F>
void column_major_gemm(bool tx, bool ty, int64_t m, int64_t n, int64_t k, const F* x, int64_t ldx, int64_t sx,
                       const F* y, int64_t ldy, int64_t sy, F beta, F* c, int64_t ldc, int64_t sc, int64_t batch) {
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < m; ++i) {
        F acc = 0;
        for (int64_t l = 0; l < k; ++l) {
          const F xv = tx ? x[b * sx + l + i * ldx] : x[b * sx + i + l * ldx];
          const F yv = ty ? y[b * sy + j + l * ldy] : y[b * sy + l + j * ldy];
          acc += xv * yv;
        }
        F& out = c[b * sc + i + j * ldc];
        out = beta * out + acc;
      }
}

TEST(GpuMath, CublasArgumentsComputeTheRowMajorMatmul) {
  // cuBLAS never runs here; its arguments do, through the BLAS definition.
  struct Case {
    std::vector<int64_t> a, b, y;
    bool ta, tb;
  };
  const std::vector<Case> cases = {{{3, 37, 45}, {3, 45, 29}, {3, 37, 29}, false, false},
                                   {{1, 45, 37}, {3, 45, 29}, {3, 37, 29}, true, false},
                                   {{3, 37, 45}, {1, 29, 45}, {3, 37, 29}, false, true},
                                   {{3, 45, 37}, {3, 29, 45}, {3, 37, 29}, true, true}};
  for (const Case& c : cases) {
    Tensor a = make(SPORA_DTYPE_F64, c.a), b = make(SPORA_DTYPE_F64, c.b);
    fill(a, -1, 1, false);
    fill(b, -1, 1, false);
    Tensor want = make(SPORA_DTYPE_F64, c.y);
    sp::KernelPlan plan;
    ASSERT_TRUE(ref_plan("matmul", {&a, &b}, {&want}, {bool_attr("transpose_a", c.ta), bool_attr("transpose_b", c.tb)}, &plan));
    ref_run(plan, {&a, &b}, {&want});
    const int64_t m = 37, n = 29, k = 45;
    const sg::BlasArgs x = sg::blas_args_row_major(c.ta, c.tb, m, n, k);
    // Batch strides as matmul.cu computes them: a whole matrix, or 0 for a broadcast one.
    const int64_t sa = c.a[0] == 1 ? 0 : m * k, sb = c.b[0] == 1 ? 0 : k * n;
    for (double bias : {0.0, 0.5}) {  // beta = 0, and beta = 1 over bias rows (linear)
      Tensor got = make(SPORA_DTYPE_F64, c.y);
      for (int64_t i = 0; i < got.numel(); ++i) got.as<double>()[i] = bias;
      column_major_gemm<double>(x.trans_first, x.trans_second, x.rows, x.cols, x.inner, b.as<double>(), x.ld_first, sb,
                                a.as<double>(), x.ld_second, sa, bias != 0 ? 1.0 : 0.0, got.as<double>(), x.ld_out,
                                m * n, 3);
      for (int64_t i = 0; i < got.numel(); ++i) got.as<double>()[i] -= bias;
      EXPECT_EQ(compare(got, want, 1e-12, 1e-13, "cuBLAS arguments"), 0) << c.ta << c.tb;
    }
  }
}

// ---- one_hot and take ----

template <class I>
void fill_indices(Tensor& t, int64_t n) {
  // In range, negative (from the end), and out of range both ways.
  const int64_t special[] = {-1, -n, n, -n - 1, 1000};
  for (int64_t i = 0; i < t.numel(); ++i)
    t.as<I>()[i] = static_cast<I>(i % 5 == 2 ? special[(i / 5) % 5] : static_cast<int64_t>(uniform() * static_cast<double>(n)));
}

TEST(GpuMath, OneHotAndTakeMatchReference) {
  int checked = 0;
  for (int32_t idt : {SPORA_DTYPE_I32, SPORA_DTYPE_I64}) {
    for (int32_t dt : {SPORA_DTYPE_F32, SPORA_DTYPE_BOOL, SPORA_DTYPE_I64, SPORA_DTYPE_F16}) {
      // one_hot: 40 indices, 7 classes.
      Tensor idx = make(idt, {40});
      if (idt == SPORA_DTYPE_I32) fill_indices<int32_t>(idx, 7);
      else fill_indices<int64_t>(idx, 7);
      Tensor want = make(dt, {40, 7});
      sp::KernelPlan plan;
      std::string why;
      ASSERT_TRUE(ref_plan("one_hot", {&idx}, {&want}, {int_attr("depth", 7), float_attr("on_value", 1), float_attr("off_value", 0)}, &plan, &why)) << why;
      ref_run(plan, {&idx}, {&want});
      Tensor got = make(dt, {40, 7});
      uint64_t on = 0, off = 0;
      ASSERT_TRUE(sp::encode_value(dt, 1, &on));
      ASSERT_TRUE(sp::encode_value(dt, 0, &off));
      const size_t es = sp::dtype_size(dt);
      for (int64_t e = 0; e < got.numel(); ++e) {
        uint64_t v = idt == SPORA_DTYPE_I32 ? sg::one_hot_elem<int32_t, uint64_t>(idx.as<int32_t>(), 7, on, off, e)
                                            : sg::one_hot_elem<int64_t, uint64_t>(idx.as<int64_t>(), 7, on, off, e);
        std::memcpy(got.bytes.data() + e * es, &v, es);  // little-endian: the low bytes are the element
      }
      EXPECT_EQ(got.bytes, want.bytes) << "one_hot " << sp::dtype_name(dt);
      // take (gather): x (3, 9, 4), 11 indices.
      Tensor x = make(dt, {3, 9, 4}), ti = make(idt, {11});
      fill(x, -5, 5, false);
      if (idt == SPORA_DTYPE_I32) fill_indices<int32_t>(ti, 9);
      else fill_indices<int64_t>(ti, 9);
      Tensor tw = make(dt, {3, 11, 4});
      sp::KernelPlan tp;
      ASSERT_TRUE(ref_plan("gather", {&x, &ti}, {&tw}, {}, &tp, &why)) << why;
      ref_run(tp, {&x, &ti}, {&tw});
      Tensor tg = make(dt, {3, 11, 4});
      // take_kernel moves elements as unsigned words of the element's size.
      auto take = [&](auto word) {
        using U = decltype(word);
        for (int64_t e = 0; e < tg.numel(); ++e) {
          if (idt == SPORA_DTYPE_I32)
            tg.as<U>()[e] = sg::take_elem<int32_t, U>(x.as<U>(), ti.as<int32_t>(), 9, 11, 4, e);
          else
            tg.as<U>()[e] = sg::take_elem<int64_t, U>(x.as<U>(), ti.as<int64_t>(), 9, 11, 4, e);
        }
      };
      if (es == 1) take(uint8_t{});
      else if (es == 2) take(uint16_t{});
      else if (es == 4) take(uint32_t{});
      else take(uint64_t{});
      EXPECT_EQ(tg.bytes, tw.bytes) << "gather " << sp::dtype_name(dt);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 8);
}

}  // namespace
