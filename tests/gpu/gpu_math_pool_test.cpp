// The own pooling kernels' arithmetic (plugins/cuda/math/pool_math.h)
// against the reference kernels (plugins/common/kernels/pool.cpp): max, avg
// (count_include_pad both ways) and adaptive avg pooling and their
// gradients; strides, dilations, asymmetric and wide padding, ceil-mode
// output sizes (windows hanging off the input), overlapping windows, ties
// and NaN for max; every float dtype. The device order is the reference's,
// so every result is bit-exact.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "math/pool_math.h"

namespace {

using namespace gputest;

struct PoolCase {
  int64_t n, c, h, w, kh, kw, sh, sw, dh, dw;
  int64_t pt, pb, pl, pr;
  int64_t extra = 0;  // added to both output sizes: 1 = a ceil-mode output
};

const std::vector<PoolCase> kCases = {
    {2, 3, 8, 8, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0},        // LeNet's 2x2
    {1, 2, 7, 9, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},        // overlapping, padded
    {1, 2, 7, 9, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1},     // the same, ceil mode
    {2, 1, 11, 10, 3, 2, 1, 3, 2, 1, 1, 0, 0, 1},      // dilation, asymmetric
    {1, 3, 5, 6, 4, 3, 3, 2, 1, 2, 2, 1, 1, 2, 1},     // dilation 2 across, ceil mode
    {1, 1, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},        // 3x3 same
    {1, 2, 4, 5, 5, 5, 1, 1, 1, 1, 0, 0, 0, 0, -0},    // window larger than the input: no output
};

int64_t out_size(int64_t in, int64_t p0, int64_t p1, int64_t d, int64_t k, int64_t s) {
  const int64_t span = in + p0 + p1 - d * (k - 1) - 1;
  return span < 0 ? 0 : span / s + 1;
}

std::vector<AttrSpec> pool_attrs(const PoolCase& k, bool include_pad) {
  return {ints_attr("kernel_size", {k.kh, k.kw}), ints_attr("stride", {k.sh, k.sw}),
          ints_attr("dilation", {k.dh, k.dw}), ints_attr("padding", {k.pt, k.pb, k.pl, k.pr}),
          bool_attr("count_include_pad", include_pad)};
}

// Small integers in [-2, 2) (ties in most windows), every 13th element a
// special value (NaN, inf) when `specials`.
void fill_ties(Tensor& t, bool specials) {
  static const double kSpecial[] = {NAN, INFINITY, -INFINITY, -0.0};
  sg::visit_storage(t.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = sg::compute_of<T>;
    if constexpr (sg::is_float_c<C>) {
      for (int64_t i = 0; i < t.numel(); ++i) {
        double v = std::floor(uniform() * 4) - 2;
        if (specials && i % 13 == 4) v = kSpecial[(i / 13) % 4];
        t.as<T>()[i] = sg::elem<T>::store(static_cast<C>(v));
      }
    }
  });
}

sg::PoolIndex index_of(const sp::KernelPlan& plan) {
  sg::PoolIndex ix;
  std::string why;
  EXPECT_TRUE(sg::pool_index_of(plan, &ix, &why)) << why;
  return ix;
}

// Runs the reference op and the device functions over the same inputs;
// `emulate(ix, got)` fills got. Returns whether the reference planned it.
template <class Emulate>
void check(const std::string& what, const std::string& op, const std::vector<const Tensor*>& in, Tensor want,
           const std::vector<AttrSpec>& attrs, Emulate&& emulate) {
  Tensor got = want;
  sp::KernelPlan plan;
  std::string why;
  ASSERT_TRUE(ref_plan(op, in, {&want}, attrs, &plan, &why)) << what << ": " << why;
  ref_run(plan, in, {&want});
  const sg::PoolIndex ix = index_of(plan);
  ASSERT_EQ(sg::pool_out_elems(ix), want.numel()) << what;
  emulate(ix, got);
  EXPECT_EQ(compare(got, want, 0, 0, what), 0);
}

TEST(GpuMathPool, MaxPoolAndGradientMatchReference) {
  int checked = 0;
  for (const PoolCase& k : kCases) {
    const int64_t oh = out_size(k.h, k.pt, k.pb, k.dh, k.kh, k.sh) + k.extra;
    const int64_t ow = out_size(k.w, k.pl, k.pr, k.dw, k.kw, k.sw) + k.extra;
    for (int32_t dt : kFloatDtypes) {
      for (int variant = 0; variant < 3; ++variant) {  // random values, ties, ties with NaN/inf
        const std::string what = "max_pool2d h" + std::to_string(k.h) + " w" + std::to_string(k.w) + " k" +
                                 std::to_string(k.kh) + " v" + std::to_string(variant) + " " + sp::dtype_name(dt);
        Tensor x = make(dt, {k.n, k.c, k.h, k.w}), dy = make(dt, {k.n, k.c, oh, ow});
        if (variant == 0) fill(x);
        else fill_ties(x, variant == 2);
        fill(dy, -1, 1, false);
        const auto attrs = pool_attrs(k, true);
        check(what, "max_pool2d", {&x}, make(dt, {k.n, k.c, oh, ow}), attrs, [&](const sg::PoolIndex& ix, Tensor& got) {
          sg::visit_storage(dt, [&](auto tag) {
            using T = decltype(tag);
            if constexpr (sg::is_float_c<sg::compute_of<T>>)
              for (int64_t e = 0; e < got.numel(); ++e) got.as<T>()[e] = sg::pool_max_elem<T>(ix, x.as<T>(), e);
          });
        });
        check(what + " grad", "max_pool2d_grad", {&x, &dy}, make(dt, {k.n, k.c, k.h, k.w}), attrs,
              [&](const sg::PoolIndex& ix, Tensor& got) {
                sg::visit_storage(dt, [&](auto tag) {
                  using T = decltype(tag);
                  if constexpr (sg::is_float_c<sg::compute_of<T>>) {
                    std::vector<int64_t> arg(static_cast<size_t>(ix.planes * ix.oh * ix.ow));
                    for (size_t e = 0; e < arg.size(); ++e)
                      arg[e] = sg::pool_argmax_elem<T>(ix, x.as<T>(), static_cast<int64_t>(e));
                    for (int64_t e = 0; e < got.numel(); ++e)
                      got.as<T>()[e] = sg::pool_max_grad_elem<T>(ix, arg.data(), dy.as<T>(), e);
                  }
                });
              });
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, static_cast<int>(kCases.size() * 4 * 3));
}

TEST(GpuMathPool, AvgPoolAndGradientMatchReference) {
  int checked = 0;
  for (const PoolCase& k : kCases) {
    if (k.dh != 1 || k.dw != 1) continue;  // avg pooling has no dilation
    const int64_t oh = out_size(k.h, k.pt, k.pb, 1, k.kh, k.sh) + k.extra;
    const int64_t ow = out_size(k.w, k.pl, k.pr, 1, k.kw, k.sw) + k.extra;
    for (int32_t dt : kFloatDtypes) {
      for (bool include_pad : {true, false}) {
        const std::string what = "avg_pool2d h" + std::to_string(k.h) + " w" + std::to_string(k.w) + " k" +
                                 std::to_string(k.kh) + (include_pad ? " include_pad " : " ") + sp::dtype_name(dt);
        Tensor x = make(dt, {k.n, k.c, k.h, k.w}), dy = make(dt, {k.n, k.c, oh, ow});
        fill(x);
        fill(dy, -1, 1, false);
        const auto attrs = pool_attrs(k, include_pad);
        check(what, "avg_pool2d", {&x}, make(dt, {k.n, k.c, oh, ow}), attrs, [&](const sg::PoolIndex& ix, Tensor& got) {
          sg::visit_storage(dt, [&](auto tag) {
            using T = decltype(tag);
            if constexpr (sg::is_float_c<sg::compute_of<T>>)
              for (int64_t e = 0; e < got.numel(); ++e) got.as<T>()[e] = sg::pool_avg_elem<T>(ix, x.as<T>(), e);
          });
        });
        check(what + " grad", "avg_pool2d_grad", {&dy}, make(dt, {k.n, k.c, k.h, k.w}), attrs,
              [&](const sg::PoolIndex& ix, Tensor& got) {
                sg::visit_storage(dt, [&](auto tag) {
                  using T = decltype(tag);
                  if constexpr (sg::is_float_c<sg::compute_of<T>>)
                    for (int64_t e = 0; e < got.numel(); ++e)
                      got.as<T>()[e] = sg::pool_avg_grad_elem<T>(ix, dy.as<T>(), e);
                });
              });
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 40);  // the five cases without dilation
}

TEST(GpuMathPool, AdaptiveAvgPoolAndGradientMatchReference) {
  // (h, w) -> (oh, ow): dividing, non-dividing, identity, upsampling
  // (overlapping bins), global.
  const std::vector<std::vector<int64_t>> sizes = {{8, 8, 4, 4}, {7, 9, 3, 4}, {5, 5, 5, 5}, {4, 6, 7, 5}, {10, 3, 1, 1}};
  int checked = 0;
  for (const auto& s : sizes) {
    for (int32_t dt : kFloatDtypes) {
      const std::string what = "adaptive_avg_pool2d " + std::to_string(s[0]) + "x" + std::to_string(s[1]) + "->" +
                               std::to_string(s[2]) + "x" + std::to_string(s[3]) + " " + sp::dtype_name(dt);
      Tensor x = make(dt, {2, 3, s[0], s[1]}), dy = make(dt, {2, 3, s[2], s[3]});
      fill(x);
      fill(dy, -1, 1, false);
      const std::vector<AttrSpec> attrs = {ints_attr("output_size", {s[2], s[3]})};
      check(what, "adaptive_avg_pool2d", {&x}, make(dt, {2, 3, s[2], s[3]}), attrs,
            [&](const sg::PoolIndex& ix, Tensor& got) {
              sg::visit_storage(dt, [&](auto tag) {
                using T = decltype(tag);
                if constexpr (sg::is_float_c<sg::compute_of<T>>)
                  for (int64_t e = 0; e < got.numel(); ++e) got.as<T>()[e] = sg::pool_adaptive_elem<T>(ix, x.as<T>(), e);
              });
            });
      check(what + " grad", "adaptive_avg_pool2d_grad", {&dy}, make(dt, {2, 3, s[0], s[1]}), attrs,
            [&](const sg::PoolIndex& ix, Tensor& got) {
              sg::visit_storage(dt, [&](auto tag) {
                using T = decltype(tag);
                if constexpr (sg::is_float_c<sg::compute_of<T>>)
                  for (int64_t e = 0; e < got.numel(); ++e)
                    got.as<T>()[e] = sg::pool_adaptive_grad_elem<T>(ix, dy.as<T>(), e);
              });
            });
      ++checked;
    }
  }
  EXPECT_EQ(checked, static_cast<int>(sizes.size() * 4));
}

}  // namespace
