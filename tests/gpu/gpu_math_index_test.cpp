// gather_nd, gather_elements and scatter_add of math/index_math.h against
// the reference kernels (plugins/common/kernels/indexing.cpp), bit for bit:
// every dtype, both index dtypes, negative and out-of-range indices, and
// scatter_add's repeated targets (whose sums must keep the reference's
// order).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "gpu_exact_util.h"
#include "gpu_test_util.h"
#include "math/index_math.h"

namespace {

using namespace gputest;

const int32_t kIndexDtypes[] = {SPORA_DTYPE_I32, SPORA_DTYPE_I64};

// Index values uniform in [lo, hi): out-of-range ones on both sides when
// the range is wider than the dim.
Tensor indices(int32_t dtype, std::vector<int64_t> dims, int64_t lo, int64_t hi) {
  Tensor t = make(dtype, std::move(dims));
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int64_t v = lo + static_cast<int64_t>(uniform() * static_cast<double>(hi - lo));
    if (dtype == SPORA_DTYPE_I64) t.as<int64_t>()[i] = v;
    else t.as<int32_t>()[i] = static_cast<int32_t>(v);
  }
  return t;
}

// Calls f(I{}, U{}) with the index type and the unsigned type of the
// element's size, as the kernels dispatch.
template <class F>
void visit_bits(int32_t index_dtype, int32_t dtype, F&& f) {
  auto with_i = [&](auto itag) {
    switch (sp::dtype_size(dtype)) {
      case 1: f(itag, uint8_t{}); break;
      case 2: f(itag, uint16_t{}); break;
      case 4: f(itag, uint32_t{}); break;
      default: f(itag, uint64_t{}); break;
    }
  };
  if (index_dtype == SPORA_DTYPE_I64) with_i(int64_t{});
  else with_i(int32_t{});
}

void check_gather_nd(int32_t dt, int32_t it, std::vector<int64_t> xd, int64_t m, int64_t q) {
  Tensor x = make(dt, xd);
  fill(x);
  int64_t inner = 1, widest = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(xd.size()); ++d) {
    if (d >= q) inner *= xd[d];
    else widest = std::max(widest, xd[d]);
  }
  Tensor idx = indices(it, {m, q}, -widest - 2, widest + 2);
  Tensor want = make(dt, {m, inner}), got = make(dt, {m, inner});
  const std::string what = std::string("gather_nd ") + sp::dtype_name(dt) + "/" + sp::dtype_name(it) + " q=" +
                           std::to_string(q);
  sp::KernelPlan plan;
  std::string why;
  ASSERT_TRUE(ref_plan("gather_nd", {&x, &idx}, {&want}, {}, &plan, &why)) << what << ": " << why;
  ref_run(plan, {&x, &idx}, {&want});
  const sg::GatherNdIndex g = sg::gather_nd_index_of(plan);
  visit_bits(it, dt, [&](auto itag, auto utag) {
    using I = decltype(itag);
    using U = decltype(utag);
    sg::gather_nd_emulate<I, U>(g, x.as<U>(), idx.as<I>(), got.as<U>(), got.numel());
  });
  expect_bits(got, want, what);
}

TEST(GpuMathIndex, GatherNdMatchesReference) {
  for (int32_t dt : kAllDtypes)
    for (int32_t it : kIndexDtypes)
      for (int64_t q = 0; q <= 3; ++q) check_gather_nd(dt, it, {4, 5, 3}, 9, q);
  check_gather_nd(SPORA_DTYPE_F32, SPORA_DTYPE_I64, {2, 0, 3}, 4, 1);  // empty slices
  check_gather_nd(SPORA_DTYPE_F32, SPORA_DTYPE_I32, {6}, 0, 1);        // no rows
}

void check_gather_el(int32_t dt, int32_t it, std::vector<int64_t> xd, std::vector<int64_t> id, int64_t axis) {
  Tensor x = make(dt, xd);
  fill(x);
  const int64_t n = xd[axis];
  Tensor idx = indices(it, id, -n - 2, n + 2);
  Tensor want = make(dt, id), got = make(dt, id);
  const std::string what = std::string("gather_elements ") + sp::dtype_name(dt) + "/" + sp::dtype_name(it) +
                           " axis=" + std::to_string(axis);
  sp::KernelPlan plan;
  std::string why;
  ASSERT_TRUE(ref_plan("gather_elements", {&x, &idx}, {&want}, {int_attr("axis", axis)}, &plan, &why))
      << what << ": " << why;
  ref_run(plan, {&x, &idx}, {&want});
  const sg::GatherElIndex g = sg::gather_el_index_of(plan);
  visit_bits(it, dt, [&](auto itag, auto utag) {
    using I = decltype(itag);
    using U = decltype(utag);
    sg::gather_el_emulate<I, U>(g, x.as<U>(), idx.as<I>(), got.as<U>(), got.numel());
  });
  expect_bits(got, want, what);
}

TEST(GpuMathIndex, GatherElementsMatchesReference) {
  for (int32_t dt : kAllDtypes)
    for (int32_t it : kIndexDtypes) {
      // The index may be longer than x along the axis, shorter elsewhere.
      check_gather_el(dt, it, {3, 5, 4}, {2, 7, 3}, 1);
      check_gather_el(dt, it, {3, 5, 4}, {6, 4, 4}, 0);
      check_gather_el(dt, it, {3, 5, 4}, {3, 2, 9}, 2);
      check_gather_el(dt, it, {8}, {11}, 0);
    }
  check_gather_el(SPORA_DTYPE_F32, SPORA_DTYPE_I64, {3, 4}, {0, 4}, 1);
}

void check_scatter(int32_t dt, int32_t it, std::vector<int64_t> xd, std::vector<int64_t> id, std::vector<int64_t> ud,
                   int64_t axis, int64_t spread) {
  Tensor x = make(dt, xd), upd = make(dt, ud);
  fill(x);
  fill(upd);
  // A narrow range puts many updates on one element; `spread` past the dim
  // adds out-of-range ones.
  const int64_t n = xd[axis];
  Tensor idx = indices(it, id, -n - spread, n + spread);
  Tensor want = make(dt, xd), got = make(dt, xd);
  const std::string what = std::string("scatter_add ") + sp::dtype_name(dt) + "/" + sp::dtype_name(it) +
                           " axis=" + std::to_string(axis);
  sp::KernelPlan plan;
  std::string why;
  ASSERT_TRUE(ref_plan("scatter_add", {&x, &idx, &upd}, {&want}, {int_attr("axis", axis)}, &plan, &why))
      << what << ": " << why;
  ref_run(plan, {&x, &idx, &upd}, {&want});
  const sg::ScatterIndex s = sg::scatter_index_of(plan);
  sg::visit_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    if (it == SPORA_DTYPE_I64)
      sg::scatter_add_emulate<T, int64_t>(s, x.as<T>(), idx.as<int64_t>(), upd.as<T>(), got.as<T>(), got.numel());
    else
      sg::scatter_add_emulate<T, int32_t>(s, x.as<T>(), idx.as<int32_t>(), upd.as<T>(), got.as<T>(), got.numel());
  });
  expect_bits(got, want, what);
}

TEST(GpuMathIndex, ScatterAddMatchesReferenceInOrder) {
  for (int32_t dt : kAllDtypes)
    for (int32_t it : kIndexDtypes) {
      check_scatter(dt, it, {4, 5, 3}, {4, 9, 3}, {4, 9, 3}, 1, 2);
      check_scatter(dt, it, {4, 5, 3}, {3, 4, 2}, {4, 6, 3}, 0, 1);  // updates larger than indices
      check_scatter(dt, it, {4, 5, 3}, {2, 5, 40}, {2, 5, 41}, 2, 0);
      check_scatter(dt, it, {3}, {50}, {50}, 0, 1);  // 50 updates onto 3 elements
    }
  check_scatter(SPORA_DTYPE_F32, SPORA_DTYPE_I32, {4, 5}, {0, 5}, {0, 5}, 0, 0);  // no updates: y = x
}

// Rounding order matters: 16-bit floats accumulate in float and round once.
TEST(GpuMathIndex, ScatterAddHalfSumsRoundOnce) {
  for (int32_t dt : {SPORA_DTYPE_F16, SPORA_DTYPE_BF16}) {
    Tensor x = make(dt, {1}), upd = make(dt, {64});
    fill(x, 0, 1, false);
    fill(upd, 0, 1e-2, false);
    Tensor idx = make(SPORA_DTYPE_I64, {64});  // every update onto element 0
    Tensor want = make(dt, {1}), got = make(dt, {1});
    sp::KernelPlan plan;
    ASSERT_TRUE(ref_plan("scatter_add", {&x, &idx, &upd}, {&want}, {int_attr("axis", 0)}, &plan));
    ref_run(plan, {&x, &idx, &upd}, {&want});
    sg::visit_storage(dt, [&](auto tag) {
      using T = decltype(tag);
      sg::scatter_add_emulate<T, int64_t>(sg::scatter_index_of(plan), x.as<T>(), idx.as<int64_t>(), upd.as<T>(),
                                         got.as<T>(), 1);
    });
    expect_bits(got, want, "scatter_add one target");
  }
}

}  // namespace
