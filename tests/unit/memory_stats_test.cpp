// Device memory statistics through the public C API
// (spora_device_memory_stats, spora_device_reset_peak_memory_stats, plugin
// ABI 1.1 memory_stats) on the cpu and sim plugins: tensors raise the
// allocated bytes by at least their size, peaks outlive frees until a reset,
// reserved bytes cover allocated ones.
#include <gtest/gtest.h>
#include <spora/spora.h>

#include <string>
#include <vector>

namespace {

struct Stats {
  uint64_t allocated = 0, peak_allocated = 0, reserved = 0, peak_reserved = 0;
};

class MemoryStatsTest : public ::testing::TestWithParam<std::string> {
 protected:
  static spora_context_t* ctx() {
    static spora_context_t* c = [] {
      spora_context_t* p = nullptr;
      EXPECT_EQ(spora_context_create(&p), SPORA_OK);
      return p;
    }();
    return c;
  }
  spora_device_t* dev() {
    spora_device_t* d = nullptr;
    EXPECT_EQ(spora_device_find(ctx(), GetParam().c_str(), &d), SPORA_OK) << spora_last_error();
    return d;
  }
  static Stats stats(spora_device_t* d) {
    Stats s;
    EXPECT_EQ(spora_device_memory_stats(d, &s.allocated, &s.peak_allocated, &s.reserved, &s.peak_reserved), SPORA_OK)
        << spora_last_error();
    EXPECT_GE(s.peak_allocated, s.allocated);
    EXPECT_GE(s.reserved, s.allocated);
    EXPECT_GE(s.peak_reserved, s.reserved);
    return s;
  }
  static spora_tensor_t* f32(spora_device_t* d, int64_t n) {
    std::vector<float> v(static_cast<size_t>(n), 1.5f);
    spora_tensor_t* t = nullptr;
    EXPECT_EQ(spora_tensor_create(d, SPORA_DTYPE_F32, &n, 1, v.data(), v.size() * sizeof(float), &t), SPORA_OK)
        << spora_last_error();
    return t;
  }
};

TEST_P(MemoryStatsTest, TensorsRaiseAllocatedAndPeaksOutliveFrees) {
  spora_device_t* d = dev();
  ASSERT_NE(d, nullptr);
  ASSERT_EQ(spora_device_synchronize(d), SPORA_OK);
  const Stats s0 = stats(d);

  const int64_t n1 = 1000, n2 = 1 << 18;  // 4000 B and 1 MiB
  spora_tensor_t* a = f32(d, n1);
  spora_tensor_t* b = f32(d, n2);
  ASSERT_TRUE(a && b);
  const Stats s1 = stats(d);
  EXPECT_GE(s1.allocated, s0.allocated + 4 * (n1 + n2));
  EXPECT_GE(s1.peak_allocated, s1.allocated);
  EXPECT_GE(s1.reserved, s0.allocated + 4 * (n1 + n2));

  // An op's output counts too.
  spora_tensor_t* c = nullptr;
  spora_tensor_t* in[] = {b, b};
  ASSERT_EQ(spora_op_call("add", d, in, 2, nullptr, &c, 1), SPORA_OK) << spora_last_error();
  ASSERT_EQ(spora_device_synchronize(d), SPORA_OK);
  const Stats s2 = stats(d);
  EXPECT_GE(s2.allocated, s1.allocated + 4 * n2);

  ASSERT_EQ(spora_tensor_free(b), SPORA_OK);
  ASSERT_EQ(spora_tensor_free(c), SPORA_OK);
  ASSERT_EQ(spora_device_synchronize(d), SPORA_OK);
  const Stats s3 = stats(d);
  EXPECT_LE(s3.allocated, s2.allocated - 2 * 4 * n2) << "freeing two 1 MiB tensors gave their bytes back";
  EXPECT_GE(s3.peak_allocated, s2.allocated) << "the peak stays until a reset";
  EXPECT_GE(s3.peak_reserved, s2.reserved);

  ASSERT_EQ(spora_device_reset_peak_memory_stats(d), SPORA_OK) << spora_last_error();
  const Stats s4 = stats(d);
  EXPECT_EQ(s4.peak_allocated, s4.allocated) << "a reset starts the peak from the current value";
  EXPECT_LT(s4.peak_allocated, s2.allocated);
  EXPECT_EQ(s4.peak_reserved, s4.reserved);

  // A new, larger peak after the reset.
  spora_tensor_t* e = f32(d, 2 * n2);
  ASSERT_NE(e, nullptr);
  ASSERT_EQ(spora_tensor_free(e), SPORA_OK);
  ASSERT_EQ(spora_device_synchronize(d), SPORA_OK);
  const Stats s5 = stats(d);
  EXPECT_GE(s5.peak_allocated, s4.allocated + 8 * n2);
  EXPECT_LT(s5.allocated, s5.peak_allocated);
  ASSERT_EQ(spora_tensor_free(a), SPORA_OK);
}

TEST_P(MemoryStatsTest, NullOutputsAreAllowed) {
  spora_device_t* d = dev();
  uint64_t peak = 0;
  EXPECT_EQ(spora_device_memory_stats(d, nullptr, &peak, nullptr, nullptr), SPORA_OK) << spora_last_error();
  EXPECT_EQ(spora_device_memory_stats(d, nullptr, nullptr, nullptr, nullptr), SPORA_OK) << spora_last_error();
}

INSTANTIATE_TEST_SUITE_P(Devices, MemoryStatsTest, ::testing::Values("cpu", "sim"));

TEST(MemoryStats, NullDeviceIsAnError) {
  uint64_t a = 0;
  EXPECT_EQ(spora_device_memory_stats(nullptr, &a, nullptr, nullptr, nullptr), SPORA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(spora_last_error()).find("spora_device_memory_stats"), std::string::npos)
      << spora_last_error();
  EXPECT_EQ(spora_device_reset_peak_memory_stats(nullptr), SPORA_ERROR_INVALID_ARGUMENT);
}

}  // namespace
