// cuBLASLt's arguments for matmul, linear, linear_act and linear_add_act
// (math/blas_args.h): the call's column-major semantics, emulated on the
// host from the same LtArgs the plugin gives cublasLtMatmul, against the
// reference kernels; the epilogue choice and compute type per dtype and
// precision; and, where libcublasLt loads (no GPU needed), the plugin's
// loader and descriptors (gpu_blaslt_api.h) read back from the library.
#include <cmath>
#include <string>
#include <vector>

#include "gpu_blaslt_api.h"
#include "gpu_test_util.h"
#include "math/blas_args.h"

namespace gputest {
namespace {

// Small integers: every product and sum below is exact in the compute type,
// so a correct mapping gives the reference's bits (one rounding at the end).
void fill_ints(Tensor& t) {
  sg::visit_storage(t.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = sg::compute_of<T>;
    for (int64_t i = 0; i < t.numel(); ++i) t.as<T>()[i] = sg::elem<T>::store(static_cast<C>(std::floor(uniform() * 7) - 3));
  });
}

// cublasLtMatmul as documented: per batch entry, D = epilogue(alpha op(A)
// op(B) + beta C + bias[row]) with alpha = 1, beta = 1 when beta_one (C is
// D), column-major operands at their layouts' leading dimensions and batch
// strides, accumulated in the compute type. Lt's gelu is the tanh form.
template <class T>
void lt_emulate(const sg::LtArgs& x, const T* A, const T* B, const T* bias, T* D) {
  using C = sg::compute_of<T>;
  static_assert(sg::is_float_c<C>, "float dtypes only");
  for (int64_t bi = 0; bi < x.batch; ++bi) {
    const T* a = A + bi * x.a.batch_stride;
    const T* b = B + bi * x.b.batch_stride;
    T* d = D + bi * x.d.batch_stride;
    for (int64_t c = 0; c < x.n; ++c)
      for (int64_t r = 0; r < x.m; ++r) {
        C acc = 0;
        for (int64_t kk = 0; kk < x.k; ++kk) {
          const T av = x.trans_a ? a[kk + r * x.a.ld] : a[r + kk * x.a.ld];
          const T bv = x.trans_b ? b[c + kk * x.b.ld] : b[kk + c * x.b.ld];
          acc += sg::elem<T>::load(av) * sg::elem<T>::load(bv);
        }
        T& out = d[r + c * x.d.ld];
        if (x.beta_one) acc += sg::elem<T>::load(out);
        if (x.epilogue != sg::LtEpilogue::kDefault) acc += sg::elem<T>::load(bias[r]);
        if (x.epilogue == sg::LtEpilogue::kReluBias) acc = acc < C(0) ? C(0) : acc;
        if (x.epilogue == sg::LtEpilogue::kGeluBias)
          acc = C(0.5) * acc * (C(1) + std::tanh(C(0.7978845608028654) * (acc + C(0.044715) * acc * acc * acc)));
        out = sg::elem<T>::store(acc);
      }
  }
}

// The layouts describe what op() needs: op(A) m x k, op(B) k x n, D m x n.
void expect_consistent(const sg::LtArgs& x) {
  EXPECT_EQ(x.trans_a ? x.a.cols : x.a.rows, x.m);
  EXPECT_EQ(x.trans_a ? x.a.rows : x.a.cols, x.k);
  EXPECT_EQ(x.trans_b ? x.b.cols : x.b.rows, x.k);
  EXPECT_EQ(x.trans_b ? x.b.rows : x.b.cols, x.n);
  EXPECT_EQ(x.d.rows, x.m);
  EXPECT_EQ(x.d.cols, x.n);
  for (const sg::LtLayout* l : {&x.a, &x.b, &x.d}) EXPECT_GE(l->ld, l->rows);
}

struct MatmulCase {
  std::vector<int64_t> a, b, y;
  bool ta, tb;
};

const std::vector<MatmulCase> kMatmulCases = {
    {{37, 45}, {45, 29}, {37, 29}, false, false},          // one matrix
    {{3, 37, 45}, {3, 45, 29}, {3, 37, 29}, false, false},  // strided batch
    {{1, 45, 37}, {3, 45, 29}, {3, 37, 29}, true, false},   // A broadcast (stride 0), transposed
    {{3, 37, 45}, {1, 29, 45}, {3, 37, 29}, false, true},   // B broadcast, transposed
    {{3, 45, 37}, {3, 29, 45}, {3, 37, 29}, true, true},
    {{2, 1, 9}, {2, 9, 1}, {2, 1, 1}, false, false},        // vectors
};

TEST(GpuMathBlasLt, MatmulArgumentsComputeTheRowMajorMatmul) {
  int checked = 0;
  for (int32_t dt : kFloatDtypes) {
    for (const MatmulCase& c : kMatmulCases) {
      Tensor a = make(dt, c.a), b = make(dt, c.b), want = make(dt, c.y), got = make(dt, c.y);
      fill_ints(a);
      fill_ints(b);
      sp::KernelPlan plan;
      ASSERT_TRUE(ref_plan("matmul", {&a, &b}, {&want}, {bool_attr("transpose_a", c.ta), bool_attr("transpose_b", c.tb)},
                           &plan));
      ref_run(plan, {&a, &b}, {&want});
      const int r = static_cast<int>(c.y.size());
      const int64_t m = c.y[r - 2], n = c.y[r - 1], k = c.ta ? c.a[r - 2] : c.a[r - 1];
      const int64_t batch = r == 3 ? c.y[0] : 1;
      // Batch strides as matmul.cu gives them: a whole matrix, or 0 for a broadcast one.
      const int64_t sa = r == 3 && c.a[0] == 1 ? 0 : m * k, sb = r == 3 && c.b[0] == 1 ? 0 : k * n;
      const sg::LtArgs base =
          sg::lt_args_row_major(dt, sg::MatmulPrecision::kHighest, c.ta, c.tb, m, n, k, batch, sa, sb);
      const std::vector<sg::LtArgs> cands = sg::lt_candidates(base, false, nullptr);
      ASSERT_EQ(cands.size(), 1u);
      const sg::LtArgs& x = cands[0];
      EXPECT_EQ(x.epilogue, sg::LtEpilogue::kDefault);
      EXPECT_FALSE(x.beta_one);
      EXPECT_FALSE(x.own_epilogue);
      expect_consistent(x);
      sg::visit_storage(dt, [&](auto tag) {
        using T = decltype(tag);
        if constexpr (sg::is_float_c<sg::compute_of<T>>)
          lt_emulate<T>(x, b.as<T>(), a.as<T>(), nullptr, got.as<T>());  // Lt's A is our B
      });
      EXPECT_EQ(compare(got, want, 0, 0, "Lt matmul arguments"), 0) << "dtype " << dt << " ta " << c.ta << " tb " << c.tb;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 4 * static_cast<int>(kMatmulCases.size()));
}

// One form of linear as the plugin runs it: the bias rows first when
// beta_one (bias_rows_kernel), the Lt call, then the plugin's epilogue
// kernel (gemm_store over D) when own_epilogue.
template <class T>
void run_form(const sg::LtArgs& c, const sg::GemmEpilogue& ep, const Tensor& x, const Tensor& w, const Tensor& bias,
              const Tensor* res, Tensor* got) {
  T* y = got->as<T>();
  const int64_t n = c.m, mn = c.m * c.n;
  if (c.beta_one)
    for (int64_t i = 0; i < mn; ++i) y[i] = bias.as<T>()[i % n];
  lt_emulate<T>(c, w.as<T>(), x.as<T>(), bias.as<T>(), y);
  if (c.own_epilogue)
    for (int64_t i = 0; i < mn; ++i)
      y[i] = sg::gemm_store<T>(&ep, sg::elem<T>::load(y[i]), res ? res->as<T>() + i : nullptr);
}

struct LinearCase {
  const char* op;
  const char* act;  // linear_act / linear_add_act's activation
};

const std::vector<LinearCase> kLinearCases = {
    {"linear", ""},          {"linear_act", "none"},     {"linear_act", "relu"},     {"linear_act", "gelu"},
    {"linear_act", "gelu_tanh"}, {"linear_act", "sigmoid"}, {"linear_act", "tanh"},  {"linear_add_act", "none"},
    {"linear_add_act", "relu"}, {"linear_add_act", "gelu_tanh"}, {"linear_add_act", "sigmoid"},
};

// Every form lt_candidates offers for linear and its fused ops (the plugin
// takes the first Lt has an algorithm for), run as the plugin runs it.
TEST(GpuMathBlasLt, LinearFormsMatchReference) {
  int checked = 0;
  for (int32_t dt : kFloatDtypes) {
    const bool half = dt == SPORA_DTYPE_F16 || dt == SPORA_DTYPE_BF16;
    for (const LinearCase& lc : kLinearCases) {
      for (const std::vector<int64_t>& mnk : {std::vector<int64_t>{5, 6, 7}, std::vector<int64_t>{33, 29, 45}}) {
        const int64_t m = mnk[0], n = mnk[1], k = mnk[2];
        const std::string op = lc.op;
        const bool add = op == "linear_add_act";
        Tensor x = make(dt, {m, k}), w = make(dt, {n, k}), bias = make(dt, {n}), res = make(dt, {m, n});
        fill_ints(x);
        fill_ints(w);
        fill_ints(bias);
        fill_ints(res);
        Tensor want = make(dt, {m, n});
        std::vector<const Tensor*> ins = {&x, &w, &bias};
        if (add) ins.push_back(&res);
        std::vector<AttrSpec> attrs;
        if (op != "linear") attrs.push_back(string_attr("activation", lc.act));
        sp::KernelPlan plan;
        std::string why;
        ASSERT_TRUE(ref_plan(op, ins, {&want}, attrs, &plan, &why)) << why;
        ref_run(plan, ins, {&want});

        sg::GemmEpilogue ep;
        const bool use_ep = op != "linear";
        if (use_ep) {
          ASSERT_TRUE(sg::gemm_epilogue_of(lc.act, add, &ep));
        }
        const sg::LtArgs base =
            sg::lt_args_row_major(dt, sg::MatmulPrecision::kHighest, false, true, m, n, k, 1, 0, 0);
        const std::vector<sg::LtArgs> cands = sg::lt_candidates(base, true, use_ep ? &ep : nullptr);
        // The first choice: Lt's own activation only for relu, and gelu's
        // tanh form on the half types, without a residual add.
        const std::string act = lc.act;
        const sg::LtEpilogue first = !add && act == "relu"                ? sg::LtEpilogue::kReluBias
                                     : !add && act == "gelu_tanh" && half ? sg::LtEpilogue::kGeluBias
                                                                          : sg::LtEpilogue::kBias;
        ASSERT_FALSE(cands.empty());
        EXPECT_EQ(cands[0].epilogue, first) << op << " " << act;
        EXPECT_EQ(cands.size(), first == sg::LtEpilogue::kBias ? 2u : 3u);
        EXPECT_TRUE(cands.back().beta_one);
        EXPECT_EQ(cands.back().epilogue, sg::LtEpilogue::kDefault);
        // Exact where no transcendental function runs.
        const bool exact = act.empty() || act == "none" || act == "relu";
        for (const sg::LtArgs& c : cands) {
          expect_consistent(c);
          // The plugin's epilogue kernel runs exactly when Lt's epilogue
          // does not already apply everything.
          const bool native = c.epilogue == sg::LtEpilogue::kReluBias || c.epilogue == sg::LtEpilogue::kGeluBias;
          EXPECT_EQ(c.own_epilogue, !native && use_ep && (add || act != "none")) << op << " " << act;
          Tensor got = make(dt, {m, n});
          sg::visit_storage(dt, [&](auto tag) {
            using T = decltype(tag);
            if constexpr (sg::is_float_c<sg::compute_of<T>>)
              run_form<T>(c, ep, x, w, bias, add ? &res : nullptr, &got);
          });
          const double rel = exact ? 0 : 4 * ulp_rel(dt), abs_tol = exact ? 0 : 4 * ulp_rel(dt);
          EXPECT_EQ(compare(got, want, rel, abs_tol, "Lt " + op + " " + act), 0)
              << "dtype " << dt << " epilogue " << static_cast<int>(c.epilogue) << " beta_one " << c.beta_one;
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 4 * 11 * 2 * 2);
}

TEST(GpuMathBlasLt, ComputeTypePerDtypeAndPrecision) {
  sg::MatmulPrecision p = sg::MatmulPrecision::kHighest;
  ASSERT_TRUE(sg::matmul_precision_of("high", &p));
  EXPECT_EQ(p, sg::MatmulPrecision::kHigh);
  ASSERT_TRUE(sg::matmul_precision_of("medium", &p));
  EXPECT_EQ(p, sg::MatmulPrecision::kMedium);
  ASSERT_TRUE(sg::matmul_precision_of("highest", &p));
  EXPECT_EQ(p, sg::MatmulPrecision::kHighest);
  EXPECT_FALSE(sg::matmul_precision_of("fast", &p));
  EXPECT_FALSE(sg::matmul_precision_of("", &p));
  for (sg::MatmulPrecision q : {sg::MatmulPrecision::kHighest, sg::MatmulPrecision::kHigh, sg::MatmulPrecision::kMedium}) {
    // Only f32 is ever computed in a reduced precision; the half types
    // always accumulate in f32 (the reference's compute type).
    EXPECT_EQ(sg::lt_compute_of(SPORA_DTYPE_F64, q), sg::LtCompute::k64F);
    EXPECT_EQ(sg::lt_compute_of(SPORA_DTYPE_F16, q), sg::LtCompute::k32F);
    EXPECT_EQ(sg::lt_compute_of(SPORA_DTYPE_BF16, q), sg::LtCompute::k32F);
  }
  EXPECT_EQ(sg::lt_compute_of(SPORA_DTYPE_F32, sg::MatmulPrecision::kHighest), sg::LtCompute::k32F);
  EXPECT_EQ(sg::lt_compute_of(SPORA_DTYPE_F32, sg::MatmulPrecision::kHigh), sg::LtCompute::k32FFastTF32);
  EXPECT_EQ(sg::lt_compute_of(SPORA_DTYPE_F32, sg::MatmulPrecision::kMedium), sg::LtCompute::k32FFast16BF);
  namespace lt = spora::gpu::lt;
  EXPECT_EQ(lt::compute_type_of(sg::LtCompute::k32F), lt::kCompute32F);
  EXPECT_EQ(lt::compute_type_of(sg::LtCompute::k32FFastTF32), lt::kCompute32FFastTF32);
  EXPECT_EQ(lt::compute_type_of(sg::LtCompute::k32FFast16BF), lt::kCompute32FFast16BF);
  EXPECT_EQ(lt::compute_type_of(sg::LtCompute::k64F), lt::kCompute64F);
  EXPECT_EQ(lt::scale_type_of(SPORA_DTYPE_F64), lt::kR64F);
  for (int32_t dt : {SPORA_DTYPE_F32, SPORA_DTYPE_F16, SPORA_DTYPE_BF16}) EXPECT_EQ(lt::scale_type_of(dt), lt::kR32F);
  EXPECT_EQ(lt::data_type_of(SPORA_DTYPE_F16), lt::kR16F);
  EXPECT_EQ(lt::data_type_of(SPORA_DTYPE_BF16), lt::kR16BF);
  EXPECT_EQ(lt::data_type_of(SPORA_DTYPE_F32), lt::kR32F);
  EXPECT_EQ(lt::data_type_of(SPORA_DTYPE_F64), lt::kR64F);
}

// ---- the loader and descriptors, where libcublasLt loads ----

namespace lt = spora::gpu::lt;

// The plugin's loader (gpu_blaslt_api.h) on libcublasLt.so.13, once, from
// the system (no NVIDIA wheel directories: lib_search_test covers those).
std::string g_lt_opened;
const lt::Api* lt_api(std::string* why) {
  static lt::Api api;
  static const std::string reason = lt::load("libcublasLt.so.13", {}, &api, &g_lt_opened);
  *why = reason;
  return reason.empty() ? &api : nullptr;
}

TEST(GpuMathBlasLt, LoaderResolvesEveryEntryPoint) {
  lt::Api missing;
  std::string opened;
  const std::string why_missing = lt::load("libcublasLt.so.0-not-a-library", {}, &missing, &opened);
  EXPECT_NE(why_missing.find("libcublasLt.so.0-not-a-library"), std::string::npos) << why_missing;
  EXPECT_EQ(missing.matmul, nullptr);
  std::string why;
  const lt::Api* api = lt_api(&why);
  if (!api) GTEST_SKIP() << "libcublasLt.so.13 not loadable here: " << why;
  EXPECT_EQ(g_lt_opened, "libcublasLt.so.13 (system)");
  EXPECT_GE(api->version(), 130000u);
  EXPECT_LT(api->version(), 140000u);
}

template <class V, class Get>
V attr(Get get, void* obj, int32_t id) {
  V v{};
  size_t written = 0;
  EXPECT_EQ(get(obj, id, &v, sizeof v, &written), lt::kSuccess) << "attribute " << id;
  EXPECT_EQ(written, sizeof v) << "attribute " << id;
  return v;
}

// The library accepts every descriptor the plugin builds (its own checks of
// each attribute's size and value) and hands back what LtArgs say.
TEST(GpuMathBlasLt, LibraryTakesTheDescriptors) {
  std::string why;
  const lt::Api* api = lt_api(&why);
  if (!api) GTEST_SKIP() << "libcublasLt.so.13 not loadable here: " << why;
  std::vector<sg::LtArgs> all;
  sg::GemmEpilogue relu, gelu_tanh, add_sigmoid;
  ASSERT_TRUE(sg::gemm_epilogue_of("relu", false, &relu));
  ASSERT_TRUE(sg::gemm_epilogue_of("gelu_tanh", false, &gelu_tanh));
  ASSERT_TRUE(sg::gemm_epilogue_of("sigmoid", true, &add_sigmoid));
  for (int32_t dt : kFloatDtypes)
    for (sg::MatmulPrecision p : {sg::MatmulPrecision::kHighest, sg::MatmulPrecision::kHigh, sg::MatmulPrecision::kMedium}) {
      for (const MatmulCase& c : kMatmulCases) {
        const int r = static_cast<int>(c.y.size());
        const int64_t m = c.y[r - 2], n = c.y[r - 1], k = c.ta ? c.a[r - 2] : c.a[r - 1];
        const int64_t sa = r == 3 && c.a[0] == 1 ? 0 : m * k, sb = r == 3 && c.b[0] == 1 ? 0 : k * n;
        all.push_back(sg::lt_args_row_major(dt, p, c.ta, c.tb, m, n, k, r == 3 ? c.y[0] : 1, sa, sb));
      }
      const sg::LtArgs lin = sg::lt_args_row_major(dt, p, false, true, 33, 29, 45, 1, 0, 0);
      const sg::GemmEpilogue* eps[] = {nullptr, &relu, &gelu_tanh, &add_sigmoid};
      for (const sg::GemmEpilogue* ep : eps)
        for (const sg::LtArgs& x : sg::lt_candidates(lin, true, ep)) all.push_back(x);
    }
  for (const sg::LtArgs& x : all) {
    lt::Descs d;
    ASSERT_EQ(lt::build(*api, x, &d), "");
    EXPECT_EQ(attr<int32_t>(api->desc_get, d.desc, 0), lt::compute_type_of(x.compute));  // COMPUTE_TYPE
    EXPECT_EQ(attr<int32_t>(api->desc_get, d.desc, 1), lt::scale_type_of(x.dtype));       // SCALE_TYPE
    EXPECT_EQ(attr<int32_t>(api->desc_get, d.desc, lt::kDescTransA), x.trans_a ? lt::kOpT : lt::kOpN);
    EXPECT_EQ(attr<int32_t>(api->desc_get, d.desc, lt::kDescTransB), x.trans_b ? lt::kOpT : lt::kOpN);
    EXPECT_EQ(attr<uint32_t>(api->desc_get, d.desc, lt::kDescEpilogue), lt::epilogue_of(x.epilogue));
    if (x.epilogue != sg::LtEpilogue::kDefault) {
      EXPECT_EQ(attr<int32_t>(api->desc_get, d.desc, lt::kDescBiasDataType), lt::data_type_of(x.dtype));
    }
    const sg::LtLayout* want[4] = {&x.a, &x.b, &x.d, &x.d};
    void* got[4] = {d.a, d.b, d.c, d.d};
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(attr<uint32_t>(api->layout_get, got[i], 0), static_cast<uint32_t>(lt::data_type_of(x.dtype)));  // TYPE
      EXPECT_EQ(attr<uint64_t>(api->layout_get, got[i], 2), static_cast<uint64_t>(want[i]->rows));               // ROWS
      EXPECT_EQ(attr<uint64_t>(api->layout_get, got[i], 3), static_cast<uint64_t>(want[i]->cols));               // COLS
      EXPECT_EQ(attr<int64_t>(api->layout_get, got[i], 4), want[i]->ld);                                          // LD
      EXPECT_EQ(attr<int32_t>(api->layout_get, got[i], lt::kLayoutBatchCount), x.batch);
      if (x.batch != 1) {
        EXPECT_EQ(attr<int64_t>(api->layout_get, got[i], lt::kLayoutStridedBatchOffset), want[i]->batch_stride);
      }
    }
    lt::destroy(*api, &d);
    EXPECT_EQ(d.desc, nullptr);
  }
  // Per dtype and precision: the matmuls, then linear's forms (plain 2,
  // relu 3, gelu_tanh 3 on the half types else 2, add+sigmoid 2).
  EXPECT_EQ(all.size(), 3u * (4 * kMatmulCases.size() + 2 * 10 + 2 * 9));
}

}  // namespace
}  // namespace gputest
