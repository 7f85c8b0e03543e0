// The CUDA plugin's error attribution on a real GPU (issue 11), through its
// C table. Skips, saying why, where initialize reports no device (every CI
// machine). One process, one test: the second half leaves the context with a
// sticky error, as CUDA's illegal-address faults do.
//  1. An earlier call's error left in cudaGetLastError (a failed cudaMalloc)
//     is not blamed on the next kernel launch.
//  2. A kernel that faults (illegal address) makes the device failed:
//     synchronize reports it as SPORA_PLUGIN_UNAVAILABLE with the reason,
//     callbacks queued behind it never run (CUDA skips host functions once
//     the context failed; the host must not wait for them alone), and every
//     later call fails at once naming the first failure.
#include <atomic>
#include <cstdint>

#include "sim_test_host.h"  // a minimal plugin host; SPORA_SIM_PLUGIN_PATH names the CUDA plugin here

namespace simtest {
const std::map<std::string, std::string>& config_overrides() {
  static const std::map<std::string, std::string> m;
  return m;
}
}  // namespace simtest

namespace {

using simtest::api;
using simtest::take;
using simtest::take_err;

::testing::Environment* const g_env = ::testing::AddGlobalTestEnvironment(new simtest::Environment);

void count(void* user, const spora_plugin_error_t*) { ++*static_cast<std::atomic<int>*>(user); }

TEST(GpuFailure, StaleErrorsAreNotBlamedAndStickyFaultsFailTheDevice) {
  if (!api) GTEST_SKIP() << "no usable GPU here: " << simtest::setup_error;
  const int64_t n[1] = {1 << 20};
  const size_t bytes = sizeof(float) << 20;
  spora_devptr_t a = nullptr, b = nullptr, c = nullptr;
  SIM_OK(api->mem_alloc(0, bytes, &a));
  SIM_OK(api->mem_alloc(0, bytes, &b));
  SIM_OK(api->mem_alloc(0, bytes, &c));
  SIM_OK(api->memset(0, a, 0, bytes));
  SIM_OK(api->memset(0, b, 0, bytes));
  spora_stream_t* s = nullptr;
  SIM_OK(api->stream_create(0, &s));
  spora_kernel_t* add = nullptr;
  SIM_OK(simtest::create_add(n, &add));

  // 1. A failed allocation leaves cudaErrorMemoryAllocation in the thread's
  //    last-error slot; the next launch must not report it.
  spora_devptr_t huge = nullptr;
  const simtest::Err oom = take_err(api->mem_alloc(0, size_t{1} << 50, &huge));
  EXPECT_EQ(oom.code, SPORA_PLUGIN_OUT_OF_MEMORY) << oom.message;
  const spora_devptr_t ins[2] = {a, b};
  const spora_devptr_t outs[1] = {c};
  EXPECT_EQ(take(api->kernel_launch(add, ins, outs, nullptr, s)), "");
  EXPECT_EQ(take(api->stream_synchronize(s)), "");

  // 2. An input at an address nothing maps: an illegal-address fault.
  const spora_devptr_t bad[2] = {reinterpret_cast<spora_devptr_t>(uintptr_t{0x10}), b};
  std::atomic<int> after{0};
  const simtest::Err launch = take_err(api->kernel_launch(add, bad, outs, nullptr, s));
  EXPECT_EQ(launch.code, 0) << "the fault is asynchronous: " << launch.message;
  const simtest::Err queued = take_err(api->stream_add_callback(s, count, &after));
  const simtest::Err sync = take_err(api->stream_synchronize(s));
  EXPECT_EQ(sync.code, SPORA_PLUGIN_UNAVAILABLE) << sync.message;
  EXPECT_NE(sync.message.find("cudaErrorIllegalAddress"), std::string::npos) << sync.message;
  EXPECT_NE(sync.message.find("device has failed"), std::string::npos) << sync.message;
  EXPECT_EQ(after.load(), 0) << "a callback queued behind the fault ran (queued: '" << queued.message << "')";
  // Later calls fail at once with the first failure, whatever they are.
  const simtest::Err later = take_err(api->mem_alloc(0, 256, &huge));
  EXPECT_EQ(later.code, SPORA_PLUGIN_UNAVAILABLE) << later.message;
  EXPECT_NE(later.message.find("failed earlier"), std::string::npos) << later.message;
  EXPECT_NE(later.message.find("cudaErrorIllegalAddress"), std::string::npos) << later.message;
  int32_t done = 0;
  const simtest::Err query = take_err(api->stream_query(s, &done));
  EXPECT_EQ(query.code, SPORA_PLUGIN_UNAVAILABLE) << query.message;
}

}  // namespace
