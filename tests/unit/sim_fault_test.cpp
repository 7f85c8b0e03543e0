// Sticky device failures on sim, like CUDA's illegal-address errors: with
// sim.fault_after_launches = 3 (SPORA_SIM_FAULT_AFTER_LAUNCHES) the third
// kernel launch on device 0 faults when its stream runs it. The failure is
// process-wide, hence a binary of its own with one test.
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "sim_test_host.h"

namespace simtest {
const std::map<std::string, std::string>& config_overrides() {
  static const std::map<std::string, std::string> m = {{"sim.fault_after_launches", "3"}};
  return m;
}
}  // namespace simtest

namespace {

using simtest::api;
using simtest::take;
using simtest::take_err;

::testing::Environment* const g_env = ::testing::AddGlobalTestEnvironment(new simtest::Environment);

struct Calls {
  std::atomic<int> before{0}, after{0};
  std::atomic<bool> before_status_null{false};
};
void before_fault(void* user, const spora_plugin_error_t* status) {
  auto* c = static_cast<Calls*>(user);
  c->before_status_null = status == nullptr;
  ++c->before;
}
void after_fault(void* user, const spora_plugin_error_t*) { ++static_cast<Calls*>(user)->after; }

TEST(SimFault, InjectedFaultIsStickyAndDropsLaterCallbacks) {
  ASSERT_NE(api, nullptr) << simtest::setup_error;
  constexpr size_t n = 256;
  const int64_t dims[1] = {static_cast<int64_t>(n)};
  spora_kernel_t* add = nullptr;
  SIM_OK(simtest::create_add(dims, &add));
  spora_stream_t *s = nullptr, *bystander = nullptr;
  SIM_OK(api->stream_create(0, &s));
  SIM_OK(api->stream_create(0, &bystander));
  spora_event_t* ev = nullptr;
  SIM_OK(api->event_create(0, &ev));
  spora_devptr_t x = nullptr, y = nullptr;
  SIM_OK(api->mem_alloc(0, n * sizeof(float), &x));
  SIM_OK(api->mem_alloc(0, n * sizeof(float), &y));
  std::vector<float> ones(n, 1.f), out(n, 0.f);
  SIM_OK(api->copy_h2d(0, x, ones.data(), n * sizeof(float)));

  Calls calls;
  const spora_devptr_t ins[2] = {x, x};
  SIM_OK(api->kernel_launch(add, ins, &y, nullptr, s));  // launch 1
  SIM_OK(api->kernel_launch(add, ins, &y, nullptr, s));  // launch 2
  SIM_OK(api->stream_add_callback(s, before_fault, &calls));
  SIM_OK(api->kernel_launch(add, ins, &y, nullptr, s));  // launch 3: faults when run
  // Enqueued before the stream ran the fault (a lag may still be running):
  // either accepted and then skipped, or refused with the sticky error.
  const simtest::Err late_cb = take_err(api->stream_add_callback(s, after_fault, &calls));

  const simtest::Err fault = take_err(api->stream_synchronize(s));
  EXPECT_EQ(fault.code, SPORA_PLUGIN_UNAVAILABLE);
  EXPECT_EQ(fault.message,
            "[sim] illegal memory access in kernel add (injected by SPORA_SIM_FAULT_AFTER_LAUNCHES=3); "
            "the device is unusable");
  EXPECT_EQ(calls.before.load(), 1);
  EXPECT_TRUE(calls.before_status_null.load());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(calls.after.load(), 0) << "a callback queued behind the fault ran; CUDA never runs it";
  if (!late_cb.message.empty()) EXPECT_EQ(late_cb.code, SPORA_PLUGIN_UNAVAILABLE) << late_cb.message;

  // Sticky: every later call on the device returns it, naming the call.
  auto expect_sticky = [&](const char* fn, spora_plugin_error_t* err) {
    const simtest::Err e = take_err(err);
    EXPECT_EQ(e.code, SPORA_PLUGIN_UNAVAILABLE) << fn << ": " << e.message;
    EXPECT_EQ(e.message.rfind(std::string("[sim] ") + fn + ": device 0 failed earlier", 0), 0u) << e.message;
    EXPECT_NE(e.message.find("illegal memory access in kernel add"), std::string::npos) << e.message;
  };
  expect_sticky("stream_synchronize", api->stream_synchronize(s));
  expect_sticky("stream_synchronize", api->stream_synchronize(bystander));
  expect_sticky("kernel_launch", api->kernel_launch(add, ins, &y, nullptr, bystander));
  expect_sticky("copy_h2d_async", api->copy_h2d_async(s, x, ones.data(), n * sizeof(float)));
  expect_sticky("copy_d2h_async", api->copy_d2h_async(s, out.data(), y, n * sizeof(float)));
  expect_sticky("copy_d2d_async", api->copy_d2d_async(s, y, x, n * sizeof(float)));
  expect_sticky("memset_async", api->memset_async(s, y, 0, n * sizeof(float)));
  expect_sticky("stream_add_callback", api->stream_add_callback(s, after_fault, &calls));
  expect_sticky("stream_wait_event", api->stream_wait_event(s, ev));
  expect_sticky("event_record", api->event_record(ev, s));
  expect_sticky("event_synchronize", api->event_synchronize(ev));
  int32_t done = -1;
  expect_sticky("stream_query", api->stream_query(s, &done));
  expect_sticky("event_query", api->event_query(ev, &done));
  expect_sticky("copy_h2d", api->copy_h2d(0, x, ones.data(), n * sizeof(float)));
  expect_sticky("copy_d2h", api->copy_d2h(0, out.data(), y, n * sizeof(float)));
  expect_sticky("memset", api->memset(0, y, 0, n * sizeof(float)));
  spora_devptr_t z = nullptr;
  expect_sticky("mem_alloc", api->mem_alloc(0, 64, &z));
  spora_stream_t* s2 = nullptr;
  expect_sticky("stream_create", api->stream_create(0, &s2));

  // Tear-down still works; mem_free frees and reports the failure.
  expect_sticky("mem_free", api->mem_free(0, x));
  expect_sticky("mem_free", api->mem_free(0, y));
  SIM_OK(api->stream_destroy(s));
  SIM_OK(api->stream_destroy(bystander));
  SIM_OK(api->event_destroy(ev));
  SIM_OK(api->kernel_destroy(add));
  EXPECT_EQ(calls.after.load(), 0);
}

}  // namespace
