// cumsum and topk of math/scan_math.h against the reference kernels
// (plugins/common/kernels/scan.cpp), bit for bit: every dtype the
// reference takes, every axis, exclusive/reverse, k from 0 to n, largest
// and sorted both ways, with ties, NaN, signed zeros and integer extremes.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gpu_exact_util.h"
#include "gpu_test_util.h"
#include "math/scan_math.h"

namespace {

using namespace gputest;

const int32_t kCumsumDtypes[] = {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16,
                                 SPORA_DTYPE_BF16, SPORA_DTYPE_I32, SPORA_DTYPE_I64};
const int32_t kTopkDtypes[] = {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16,
                               SPORA_DTYPE_I32, SPORA_DTYPE_I64, SPORA_DTYPE_U8};

void check_cumsum(int32_t dt, std::vector<int64_t> dims, int64_t axis, bool exclusive, bool reverse) {
  Tensor x = make(dt, dims), want = make(dt, dims), got = make(dt, dims);
  fill(x);
  const std::string what = std::string("cumsum ") + sp::dtype_name(dt) + " axis=" + std::to_string(axis) +
                           (exclusive ? " exclusive" : "") + (reverse ? " reverse" : "");
  sp::KernelPlan plan;
  std::string why;
  ASSERT_TRUE(ref_plan("cumsum", {&x}, {&want},
                       {int_attr("axis", axis), bool_attr("exclusive", exclusive), bool_attr("reverse", reverse)},
                       &plan, &why))
      << what << ": " << why;
  ref_run(plan, {&x}, {&want});
  sg::visit_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    sg::cumsum_emulate<T>(sg::scan_index_of(plan), x.as<T>(), got.as<T>());
  });
  expect_bits(got, want, what);
}

TEST(GpuMathScan, CumsumMatchesReferenceBitForBit) {
  for (int32_t dt : kCumsumDtypes)
    for (bool exclusive : {false, true})
      for (bool reverse : {false, true}) {
        for (int64_t axis = 0; axis < 3; ++axis) check_cumsum(dt, {3, 7, 5}, axis, exclusive, reverse);
        check_cumsum(dt, {300}, 0, exclusive, reverse);  // long line: rounding order shows
        check_cumsum(dt, {}, 0, exclusive, reverse);     // scalar
        check_cumsum(dt, {4, 0, 2}, 1, exclusive, reverse);
      }
}

TEST(GpuMathScan, CumsumRefusesWhatTheReferenceRefuses) {
  for (int32_t dt : {SPORA_DTYPE_U8, SPORA_DTYPE_BOOL}) {
    Tensor x = make(dt, {4}), y = make(dt, {4});
    sp::KernelPlan plan;
    EXPECT_FALSE(ref_plan("cumsum", {&x}, {&y}, {}, &plan)) << sp::dtype_name(dt);
  }
}

// Few distinct values (ties everywhere), with NaN, signed zeros and
// infinities among the floats.
const double kTieFloats[] = {1, -1, 0.0, -0.0, NAN, 2, INFINITY, -INFINITY, 1, 2};

void fill_ties(Tensor& t) {
  sg::visit_storage(t.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = sg::compute_of<T>;
    for (int64_t i = 0; i < t.numel(); ++i) {
      const int64_t r = static_cast<int64_t>(uniform() * 10);
      const double v = sg::is_float_c<C> ? kTieFloats[r] : static_cast<double>(r % 4);
      t.as<T>()[i] = sg::elem<T>::store(static_cast<C>(v));
    }
  });
}

void check_topk(int32_t dt, std::vector<int64_t> dims, int64_t axis, int64_t k, bool largest, bool sorted,
                bool ties) {
  Tensor x = make(dt, dims);
  if (ties) fill_ties(x);
  else fill(x);
  std::vector<int64_t> od = dims;
  if (!od.empty()) od[axis] = k;
  Tensor want_v = make(dt, od), want_i = make(SPORA_DTYPE_I64, od);
  Tensor got_v = make(dt, od), got_i = make(SPORA_DTYPE_I64, od);
  const std::string what = std::string("topk ") + sp::dtype_name(dt) + " axis=" + std::to_string(axis) +
                           " k=" + std::to_string(k) + (largest ? " largest" : " smallest") +
                           (sorted ? " sorted" : " unsorted") + (ties ? " ties" : "");
  sp::KernelPlan plan;
  std::string why;
  ASSERT_TRUE(ref_plan("topk", {&x}, {&want_v, &want_i},
                       {int_attr("axis", axis), int_attr("k", k), bool_attr("largest", largest),
                        bool_attr("sorted", sorted)},
                       &plan, &why))
      << what << ": " << why;
  ref_run(plan, {&x}, {&want_v, &want_i});
  sg::visit_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    sg::topk_emulate<T>(sg::scan_index_of(plan), x.as<T>(), got_v.as<T>(), got_i.as<int64_t>());
  });
  expect_bits(got_v, want_v, what + " values");
  expect_bits(got_i, want_i, what + " indices");
}

TEST(GpuMathScan, TopkMatchesReferenceOrderAndTies) {
  for (int32_t dt : kTopkDtypes)
    for (bool largest : {true, false})
      for (bool sorted : {true, false})
        for (bool ties : {false, true}) {
          for (int64_t axis = 0; axis < 3; ++axis)
            for (int64_t k : {0, 1, 2, 3}) check_topk(dt, {3, 4, 5}, axis, k, largest, sorted, ties);
          check_topk(dt, {3, 4, 5}, 2, 5, largest, sorted, ties);  // k = n
          // Both of the reference's selections: a heap for k * 8 < n, else
          // introselect.
          for (int64_t k : {5, 13, 60, 100}) check_topk(dt, {2, 100}, 1, k, largest, sorted, ties);
          check_topk(dt, {}, 0, 1, largest, sorted, ties);  // scalar
        }
}

TEST(GpuMathScan, TopkRefusesBool) {
  Tensor x = make(SPORA_DTYPE_BOOL, {4}), v = make(SPORA_DTYPE_BOOL, {2}), i = make(SPORA_DTYPE_I64, {2});
  sp::KernelPlan plan;
  EXPECT_FALSE(ref_plan("topk", {&x}, {&v, &i}, {int_attr("k", 2)}, &plan));
}

}  // namespace
