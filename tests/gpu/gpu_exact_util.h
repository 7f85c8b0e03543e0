// Bit-exact comparison for the GPU math tests of ops the reference computes
// exactly (indexing, scans, pad, creation): every element's bytes equal,
// except that two NaNs match whatever their payloads -- which NaN an
// arithmetic operation returns is not specified (x86 keeps an operand's
// payload, GPUs return a canonical NaN).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "gpu_test_util.h"

namespace gputest {

inline void expect_bits(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.dtype, want.dtype) << what;
  ASSERT_EQ(got.bytes.size(), want.bytes.size()) << what;
  const size_t es = sp::dtype_size(want.dtype);
  int64_t bad = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double g = value_at(got, i), w = value_at(want, i);
    if (std::isnan(g) && std::isnan(w)) continue;
    if (std::memcmp(got.bytes.data() + i * es, want.bytes.data() + i * es, es) == 0) continue;
    if (++bad <= 5) ADD_FAILURE() << what << ": element " << i << " got " << g << " want " << w << " (bits differ)";
  }
  EXPECT_EQ(bad, 0) << what;
}

}  // namespace gputest
