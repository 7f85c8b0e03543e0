// pad of math/pad_math.h against the reference kernel
// (plugins/common/kernels/pad.cpp), bit for bit: every dtype, the three
// modes, pads wider than the dim (reflect keeps reflecting), one-element
// and empty dims, scalars and the constant's value.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu_exact_util.h"
#include "gpu_test_util.h"
#include "math/pad_math.h"

namespace {

using namespace gputest;

void check_pad(int32_t dt, std::vector<int64_t> dims, std::vector<int64_t> pads, const char* mode, double value) {
  Tensor x = make(dt, dims);
  fill(x);
  std::vector<int64_t> od = dims;
  for (size_t d = 0; d < dims.size(); ++d) od[d] += pads[2 * d] + pads[2 * d + 1];
  Tensor want = make(dt, od), got = make(dt, od);
  std::string what = std::string("pad ") + sp::dtype_name(dt) + " " + mode + " pads";
  for (int64_t v : pads) what += " " + std::to_string(v);
  sp::KernelPlan plan;
  std::string why;
  ASSERT_TRUE(ref_plan("pad", {&x}, {&want},
                       {ints_attr("pads", pads), string_attr("mode", mode), float_attr("value", value)}, &plan, &why))
      << what << ": " << why;
  ref_run(plan, {&x}, {&want});
  sg::PadIndex ix;
  uint64_t bits = 0;
  ASSERT_TRUE(sg::pad_index_of(plan, &ix, &bits)) << what;
  auto run = [&](auto utag) {
    using U = decltype(utag);
    sg::pad_emulate<U>(ix, x.as<U>(), static_cast<U>(bits), got.as<U>(), got.numel());
  };
  switch (sp::dtype_size(dt)) {
    case 1: run(uint8_t{}); break;
    case 2: run(uint16_t{}); break;
    case 4: run(uint32_t{}); break;
    default: run(uint64_t{}); break;
  }
  expect_bits(got, want, what);
}

TEST(GpuMathPad, EveryModeMatchesReference) {
  for (int32_t dt : kAllDtypes) {
    const bool is_float = dt == SPORA_DTYPE_F32 || dt == SPORA_DTYPE_F64 || dt == SPORA_DTYPE_F16 || dt == SPORA_DTYPE_BF16;
    const double value = is_float ? -2.5 : dt == SPORA_DTYPE_BOOL ? 1 : 7;
    for (const char* mode : {"constant", "reflect", "edge"}) {
      check_pad(dt, {3, 4, 5}, {1, 2, 0, 3, 2, 1}, mode, value);
      check_pad(dt, {3, 4}, {7, 9, 4, 11}, mode, value);  // wider than the dims
      check_pad(dt, {1, 2}, {3, 2, 2, 5}, mode, value);   // one-element dim
      check_pad(dt, {5}, {0, 0}, mode, value);
      check_pad(dt, {}, {}, mode, value);  // scalar: a copy
      check_pad(dt, {2, 3, 1, 2}, {1, 0, 0, 2, 3, 3, 1, 1}, mode, value);
    }
    check_pad(dt, {2, 0, 3}, {1, 1, 2, 0, 0, 1}, "constant", value);  // empty dim padded with the constant
    check_pad(dt, {2, 0, 3}, {1, 1, 0, 0, 0, 1}, "reflect", value);   // empty dim, nothing to read
  }
}

TEST(GpuMathPad, ConstantValueIsTheOutputDtypes) {
  // 0.1 rounds differently per float dtype; the constant's bits must be
  // the output dtype's.
  for (int32_t dt : kFloatDtypes) check_pad(dt, {2, 2}, {1, 1, 1, 1}, "constant", 0.1);
}

}  // namespace
