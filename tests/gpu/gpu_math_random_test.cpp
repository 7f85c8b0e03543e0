// uniform, normal, truncated_normal and dropout of math/random_math.h
// against the reference kernels (plugins/common/kernels/random.cpp), bit
// for bit: the host emulation runs the kernels' per-block functions over
// every Philox block (in reverse order: each block stands alone), for every
// float dtype, several seeds (negative ones: all 64 bits), offsets (beyond
// 32 bits), sizes (not multiples of the 4 or 2 elements a block feeds) and
// parameters. On the device, sqrt and the basic operations round as here
// and log/sin/cos/erfc/exp are spora/sdk/exact_math.h's on both sides
// (built from those operations), so the emulation's bits are the device's
// for every dtype, f64 normal and truncated_normal included.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "math/random_math.h"

namespace {

using namespace gputest;

const int64_t kSeeds[] = {0, 1234, -1, 0x0123456789abcdefll};
const int64_t kOffsets[] = {0, 1, 3, (int64_t{1} << 33) + 5};
const int64_t kSizes[] = {1, 2, 3, 5, 7, 1001};

std::string label(const std::string& op, int32_t dt, int64_t seed, int64_t offset, int64_t n, const std::string& extra) {
  return op + " " + sp::dtype_name(dt) + " seed " + std::to_string(seed) + " offset " + std::to_string(offset) +
         " n " + std::to_string(n) + extra;
}

// Byte-exact equality, naming the first differing element.
void expect_same(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.bytes.size(), want.bytes.size()) << what;
  if (got.bytes == want.bytes) return;
  const size_t es = sp::dtype_size(want.dtype);
  for (size_t i = 0; i < want.bytes.size() / es; ++i)
    if (std::memcmp(&got.bytes[i * es], &want.bytes[i * es], es) != 0) {
      ADD_FAILURE() << what << ": element " << i << " got " << value_at(got, static_cast<int64_t>(i)) << " want "
                    << value_at(want, static_cast<int64_t>(i));
      return;
    }
}

// The device's work for a generated op: every Philox block of the output.
void emulate_generated(sg::RndKind kind, const sp::KernelPlan& plan, Tensor& y) {
  const int64_t n = y.numel();
  sg::visit_storage(y.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point<sg::compute_of<T>>::value) {
      T* out = y.as<T>();
      const int64_t blocks = sg::rnd_blocks<T>(n);
      if (kind == sg::RndKind::kUniform) {
        const sg::UniformArgs a = sg::uniform_args_of(plan);
        for (int64_t b = blocks - 1; b >= 0; --b) sg::uniform_block<T>(a, out, b, n);
      } else if (kind == sg::RndKind::kNormal) {
        const sg::NormalArgs a = sg::normal_args_of(plan);
        for (int64_t b = blocks - 1; b >= 0; --b) sg::normal_block<T>(a, out, b, n);
      } else {
        const sg::TruncArgs a = sg::trunc_args_of(plan);
        for (int64_t b = blocks - 1; b >= 0; --b) sg::trunc_block<T>(a, out, b, n);
      }
    } else {
      ADD_FAILURE() << "not a float dtype";
    }
  });
}

// Plans and runs `op` with the reference, emulates it, compares the bytes.
void check_generated(const std::string& op, int32_t dt, int64_t n, int64_t seed, int64_t offset,
                     std::vector<AttrSpec> attrs, const std::string& extra = "") {
  const std::string what = label(op, dt, seed, offset, n, extra);
  attrs.push_back(int_attr("seed", seed));
  attrs.push_back(int_attr("offset", offset));
  Tensor want = make(dt, {n});
  Tensor got = make(dt, {n});
  // Garbage in both, so an element nobody writes shows up.
  std::fill(want.bytes.begin(), want.bytes.end(), 0xa5);
  std::fill(got.bytes.begin(), got.bytes.end(), 0x5a);
  sp::KernelPlan plan;
  std::string why;
  ASSERT_TRUE(ref_plan(op, {}, {&want}, attrs, &plan, &why)) << what << ": " << why;
  ref_run(plan, {}, {&want});
  sg::RndKind kind;
  ASSERT_TRUE(sg::rnd_kind_of(op, &kind)) << op;
  emulate_generated(kind, plan, got);
  expect_same(got, want, what);
}

TEST(GpuMathRandom, UniformMatchesReferenceBitForBit) {
  for (int32_t dt : kFloatDtypes)
    for (int64_t seed : kSeeds)
      for (int64_t offset : kOffsets)
        for (int64_t n : kSizes) check_generated("uniform", dt, n, seed, offset, {});
}

TEST(GpuMathRandom, UniformRangesIncludingRoundingToHigh) {
  // Ranges where low + span * u rounds up to high in the narrow dtypes (the
  // step down below high), negative and wide ranges, a tiny one.
  const double ranges[][2] = {{0, 1}, {-3, -1}, {-1e4, 1e4}, {1000, 1001}, {-1, 1e-30}, {0.1, 0.1000001}, {2, 65504}};
  for (int32_t dt : kFloatDtypes)
    for (const auto& r : ranges)
      for (int64_t seed : {int64_t{7}, int64_t{-99}})
        check_generated("uniform", dt, 4099, seed, 11, {float_attr("low", r[0]), float_attr("high", r[1])},
                        " low " + std::to_string(r[0]) + " high " + std::to_string(r[1]));
}

TEST(GpuMathRandom, NormalMatchesReferenceBitForBit) {
  for (int32_t dt : kFloatDtypes)
    for (int64_t seed : kSeeds)
      for (int64_t offset : kOffsets)
        for (int64_t n : kSizes) check_generated("normal", dt, n, seed, offset, {});
  const double params[][2] = {{-2, 0.5}, {1, 0}, {1e3, 1e-3}, {0, 300}};
  for (int32_t dt : kFloatDtypes)
    for (const auto& m : params)
      check_generated("normal", dt, 4099, 42, 2, {float_attr("mean", m[0]), float_attr("std", m[1])},
                      " mean " + std::to_string(m[0]) + " std " + std::to_string(m[1]));
}

TEST(GpuMathRandom, TruncatedNormalMatchesReferenceBitForBit) {
  for (int32_t dt : kFloatDtypes)
    for (int64_t seed : kSeeds)
      for (int64_t offset : kOffsets)
        for (int64_t n : kSizes) check_generated("truncated_normal", dt, n, seed, offset, {});
  // Intervals: around 0, one-sided (mirrored when a >= 0), infinite ends,
  // far tails (the log branch of the inverse CDF), a narrow one.
  const double inf = std::numeric_limits<double>::infinity();
  const double bounds[][2] = {{-2, 2},  {0.5, 3},   {-3, -0.5}, {-inf, 1},   {-1, inf}, {1, inf},
                              {-inf, -2}, {-30, -25}, {25, 30},   {2.5, 2.5001}, {0, 1e-3}, {-inf, inf}};
  const double params[][2] = {{0, 1}, {0.5, 1.5}, {-4, 0}};
  for (int32_t dt : kFloatDtypes)
    for (const auto& ab : bounds)
      for (const auto& m : params)
        check_generated("truncated_normal", dt, 2049, 5, 9,
                        {float_attr("a", ab[0]), float_attr("b", ab[1]), float_attr("mean", m[0]), float_attr("std", m[1])},
                        " a " + std::to_string(ab[0]) + " b " + std::to_string(ab[1]) + " mean " + std::to_string(m[0]) +
                            " std " + std::to_string(m[1]));
}

void check_dropout(int32_t dt, int64_t n, int64_t seed, int64_t offset, double p, bool training) {
  const std::string what =
      label("dropout", dt, seed, offset, n, " p " + std::to_string(p) + (training ? " training" : " eval"));
  Tensor x = make(dt, {n});
  fill(x, -5, 5);  // inf and NaN among them: dropped elements are 0 all the same
  // NaNs with payloads, signs, a signaling one: kept ones keep the payload.
  const uint32_t nans[] = {0x7fa12345u, 0xffc00001u, 0x7fc0ff00u, 0xff800001u};
  sg::visit_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point<sg::compute_of<T>>::value) {
      for (int64_t i = 11, j = 0; i < n; i += 29, ++j) {
        float v;
        std::memcpy(&v, &nans[j % 4], 4);
        x.as<T>()[i] = sg::elem<T>::store(v);
      }
      if constexpr (std::is_same<T, double>::value)
        for (int64_t i = 13; i < n; i += 31) {
          const uint64_t u = 0x7ff0000000000123ull;  // signaling, payload 0x123
          std::memcpy(&x.as<double>()[i], &u, 8);
        }
    }
  });
  Tensor want = make(dt, {n}), want_mask = make(SPORA_DTYPE_BOOL, {n});
  Tensor got = make(dt, {n}), got_mask = make(SPORA_DTYPE_BOOL, {n});
  std::fill(want.bytes.begin(), want.bytes.end(), 0xa5);
  std::fill(got.bytes.begin(), got.bytes.end(), 0x5a);
  std::fill(want_mask.bytes.begin(), want_mask.bytes.end(), 7);
  std::fill(got_mask.bytes.begin(), got_mask.bytes.end(), 9);
  sp::KernelPlan plan;
  std::string why;
  ASSERT_TRUE(ref_plan("dropout", {&x}, {&want, &want_mask},
                       {float_attr("p", p), bool_attr("training", training), int_attr("seed", seed),
                        int_attr("offset", offset)},
                       &plan, &why))
      << what << ": " << why;
  ref_run(plan, {&x}, {&want, &want_mask});
  const sg::DropoutArgs a = sg::dropout_args_of(plan);
  sg::visit_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point<sg::compute_of<T>>::value) {
      for (int64_t b = sg::dropout_blocks(n) - 1; b >= 0; --b)
        sg::dropout_block<T>(a, x.as<T>(), got.as<T>(), got_mask.as<sg::bool_t>(), b, n);
    }
  });
  expect_same(got, want, what + " y");
  expect_same(got_mask, want_mask, what + " mask");
}

TEST(GpuMathRandom, DropoutMatchesReferenceBitForBit) {
  for (int32_t dt : kFloatDtypes) {
    for (int64_t seed : kSeeds)
      for (int64_t offset : kOffsets)
        for (int64_t n : kSizes) check_dropout(dt, n, seed, offset, 0.5, true);
    // Probabilities whose scale 1 / (1 - p) rounds in the compute type, the
    // identity cases (p = 0, training off) and p = 1 (all dropped).
    for (double p : {0.0, 0.1, 0.3, 0.9, 0.999, 1.0})
      for (bool training : {true, false}) check_dropout(dt, 1003, 31, 4, p, training);
    // p * 2^32 equal to word 0 of the stream: that element sits on the
    // threshold and is kept (word >= threshold).
    const uint32_t w0 = sp::PhiloxStream(31, 4).block(0).v[0];
    check_dropout(dt, 5, 31, 4, std::ldexp(static_cast<double>(w0), -32), true);
  }
}

TEST(GpuMathRandom, DropoutScaleKeepsNaNPayloadsAsTheHost) {
  // GPUs return a canonical NaN from x * scale; the reference (host FPU)
  // returns x, quietened.
  const uint32_t fnans[] = {0x7fa12345u, 0xffc00001u, 0x7f800001u};
  for (uint32_t b : fnans) {
    volatile float v = sg::bits_float(b), s = 2.0f;
    const float host = v * s;
    EXPECT_EQ(sg::float_bits(sg::rnd_scale(sg::bits_float(b), 2.0f)), sg::float_bits(host)) << std::hex << b;
    EXPECT_EQ(sg::float_bits(sg::rnd_scale(sg::bits_float(b), 2.0f)), b | 0x00400000u) << std::hex << b;
  }
  const uint64_t dnans[] = {0x7ff0000000000123ull, 0xfff8000000000001ull};
  for (uint64_t b : dnans) {
    double v;
    std::memcpy(&v, &b, 8);
    const double got = sg::rnd_scale(v, 2.0);
    uint64_t g;
    std::memcpy(&g, &got, 8);
    EXPECT_EQ(g, b | 0x0008000000000000ull) << std::hex << b;
  }
  EXPECT_EQ(sg::rnd_scale(3.0f, 0.5f), 1.5f);
  EXPECT_EQ(sg::rnd_scale(-3.0, 4.0), -12.0);
}

TEST(GpuMathRandom, NextBelowMatchesNextafter) {
  const float fs[] = {0.0f, -0.0f, 1.0f, -1.0f, 1e-45f, -1e-45f, std::numeric_limits<float>::max(),
                      std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(), 3.5f};
  for (float f : fs) {
    const float want = std::nextafter(f, -std::numeric_limits<float>::infinity());
    EXPECT_EQ(sg::float_bits(sg::rnd_next_below(f)), sg::float_bits(want)) << f;
  }
  const double ds[] = {0.0, -0.0, 1.0, -1.0, 5e-324, -5e-324, std::numeric_limits<double>::max(),
                       std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(), 0.1};
  for (double d : ds) {
    const double want = std::nextafter(d, -std::numeric_limits<double>::infinity()), got = sg::rnd_next_below(d);
    EXPECT_EQ(std::memcmp(&got, &want, 8), 0) << d;
  }
  // 16-bit: sign-magnitude steps, +0 to the smallest negative subnormal.
  EXPECT_EQ(sg::rnd_next_below(sg::half_t{0x0000}).bits, 0x8001u);
  EXPECT_EQ(sg::rnd_next_below(sg::half_t{0x8000}).bits, 0x8001u);
  EXPECT_EQ(sg::rnd_next_below(sg::half_t{0x3c00}).bits, 0x3bffu);
  EXPECT_EQ(sg::rnd_next_below(sg::bhalf_t{0xbf80}).bits, 0xbf81u);
}

// The exact functions leave the distribution as glibc's would: f64
// Box-Muller and inverse-CDF values within a few ulps of the same formulas
// evaluated with the host libm (the bits differ, the numbers do not).
TEST(GpuMathRandom, F64ValuesAgreeWithLibmFormulas) {
  const int64_t n = 20000;
  Tensor y = make(SPORA_DTYPE_F64, {n});
  sp::KernelPlan plan;
  std::string why;
  ASSERT_TRUE(ref_plan("normal", {}, {&y}, {int_attr("seed", 77), int_attr("offset", 5)}, &plan, &why)) << why;
  ref_run(plan, {}, {&y});
  const sp::PhiloxStream st(77, 5);
  for (int64_t j = 0; j < n / 2; ++j) {
    const sp::PhiloxBlock w = st.block(static_cast<uint64_t>(j));
    const double u1 = sp::uniform53_open0(w.v[0], w.v[1]), u2 = sp::uniform53(w.v[2], w.v[3]);
    const double r = std::sqrt(-2 * std::log(u1)), t = 6.283185307179586 * u2;
    // The libm's cos(fl(2 pi u2)) carries fl's rounding: an absolute error.
    EXPECT_NEAR(y.as<double>()[2 * j], r * std::cos(t), 1e-15 * (1 + r)) << j;
    EXPECT_NEAR(y.as<double>()[2 * j + 1], r * std::sin(t), 1e-15 * (1 + r)) << j;
  }
  // truncated_normal on [-2, 2]: Phi(x) of each value is cdf_lo + u mass.
  Tensor z = make(SPORA_DTYPE_F64, {n});
  ASSERT_TRUE(ref_plan("truncated_normal", {}, {&z}, {int_attr("seed", 78), int_attr("offset", 0)}, &plan, &why))
      << why;
  ref_run(plan, {}, {&z});
  const sp::PhiloxStream st2(78, 0);
  const double lo = 0.5 * std::erfc(2 / std::sqrt(2.0)), mass = 1 - 2 * lo;
  for (int64_t i = 0; i < n; ++i) {
    const sp::PhiloxBlock w = st2.block(static_cast<uint64_t>(i / 2));
    const int k = static_cast<int>(i % 2);
    const double u = sp::uniform53_mid(w.v[2 * k], w.v[2 * k + 1]);
    const double p = 0.5 * std::erfc(-z.as<double>()[i] / std::sqrt(2.0));
    EXPECT_NEAR(p, lo + u * mass, 1e-14) << i;
  }
}

}  // namespace
