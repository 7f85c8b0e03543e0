// arange and eye of math/creation_math.h against the reference kernels
// (plugins/common/kernels/creation.cpp), bit for bit: every dtype, steps
// that do not divide evenly (one rounding per element, no FMA), negative
// steps, integer ranges near the dtype's limits, square and oblong eyes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu_exact_util.h"
#include "gpu_test_util.h"
#include "math/creation_math.h"

namespace {

using namespace gputest;

void check_arange(int32_t dt, double start, double step, int64_t n) {
  Tensor want = make(dt, {n}), got = make(dt, {n});
  const std::string what = std::string("arange ") + sp::dtype_name(dt) + " start " + std::to_string(start) +
                           " step " + std::to_string(step) + " n " + std::to_string(n);
  sp::KernelPlan plan;
  std::string why;
  ASSERT_TRUE(ref_plan("arange", {}, {&want},
                       {float_attr("start", start), float_attr("stop", start + step * static_cast<double>(n)),
                        float_attr("step", step)},
                       &plan, &why))
      << what << ": " << why;
  ref_run(plan, {}, {&want});
  sg::visit_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    sg::arange_emulate<T>(sg::arange_index_of(plan), got.as<T>(), n);
  });
  expect_bits(got, want, what);
}

TEST(GpuMathCreation, ArangeMatchesReference) {
  for (int32_t dt : kFloatDtypes) {
    check_arange(dt, 0, 1, 50);
    check_arange(dt, -1.3, 0.1, 1000);  // inexact step: start + i * step rounds once
    check_arange(dt, 7.25, -0.37, 333);
    check_arange(dt, 1e10, 3.7e-3, 257);
    check_arange(dt, 0.5, 1, 0);
  }
  for (int32_t dt : {SPORA_DTYPE_I32, SPORA_DTYPE_I64}) {
    check_arange(dt, -5, 3, 100);
    check_arange(dt, 40, -7, 80);
    check_arange(dt, 2147483647.0 - 99.0 * 1000.0, 1000, 100);  // ends at i32's max
    check_arange(dt, -2147483648.0, 1, 10);
  }
  check_arange(SPORA_DTYPE_I64, 9.0e15, 1.0e12, 1000);
  check_arange(SPORA_DTYPE_U8, 0, 1, 256);
  check_arange(SPORA_DTYPE_U8, 255, -2, 128);
}

TEST(GpuMathCreation, ArangeRefusesBoolAndInexactIntegers) {
  Tensor b = make(SPORA_DTYPE_BOOL, {3}), i = make(SPORA_DTYPE_I32, {3});
  sp::KernelPlan plan;
  EXPECT_FALSE(ref_plan("arange", {}, {&b}, {}, &plan));
  EXPECT_FALSE(ref_plan("arange", {}, {&i}, {float_attr("start", 0), float_attr("step", 0.5)}, &plan));
}

void check_eye(int32_t dt, int64_t n, int64_t m) {
  Tensor want = make(dt, {n, m}), got = make(dt, {n, m});
  // Garbage in the output: every element must be written.
  for (auto& b : got.bytes) b = 0x5a;
  const std::string what = std::string("eye ") + sp::dtype_name(dt) + " " + std::to_string(n) + "x" + std::to_string(m);
  sp::KernelPlan plan;
  std::string why;
  ASSERT_TRUE(ref_plan("eye", {}, {&want}, {}, &plan, &why)) << what << ": " << why;
  ref_run(plan, {}, {&want});
  sg::visit_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    sg::eye_emulate<T>(n, m, got.as<T>());
  });
  expect_bits(got, want, what);
}

TEST(GpuMathCreation, EyeMatchesReference) {
  for (int32_t dt : kAllDtypes)
    for (auto nm : std::vector<std::pair<int64_t, int64_t>>{{4, 4}, {3, 5}, {5, 3}, {1, 1}, {1, 7}, {0, 3}, {3, 0}})
      check_eye(dt, nm.first, nm.second);
}

}  // namespace
