// A cpu-placed step's failure in a host callback (sched/host_errors.h)
// reaches the caller whose run queued it -- at that thread's synchronize or
// next run -- and never a different caller that runs the same plan next.
// This binary disables softmax on sim (placement_test.cpp), so softmax runs
// on cpu from a host callback; the test breaks that step's kernel for one
// run (a null kernel handle, which the cpu plugin rejects at launch).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <thread>

#include "device_test_util.h"
#include "sched/executor.h"
#include "sched/host_errors.h"
#include "sched/plan_build.h"
#include "support/error.h"

namespace spora {
namespace {

ir::Graph softmax_graph() {
  ir::Graph g("host_error");
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({2, 3}));
  Attrs axis;
  axis.set("axis", AttrValue::of_int(1));
  auto t = g.add_op("tanh", {x}, {})[0];
  g.set_outputs({g.add_op("softmax", {t}, axis, {"model.py", 7})[0]});
  return g;
}

// What the thread's next synchronizing call would raise ("" if nothing).
std::string collect() {
  try {
    sched::raise_host_error();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

struct Fixture {
  Device* sim = device("sim");
  std::unique_ptr<sched::ExecutionPlan> plan = sched::build_plan(softmax_graph(), sim);
  sched::Step* host_step = nullptr;
  KernelRef good, broken;
  Tensor x = f32_tensor(sim, S({2, 3}), {1, 2, 3, -1, 0, 1});

  Fixture() {
    for (auto& s : plan->steps)
      if (s->kind == sched::Step::kHostKernel) host_step = s.get();
    if (!host_step || !plan->host_steps_async) return;
    good = host_step->kernel;
    auto b = std::make_shared<KernelEntry>();
    b->op = good->op;
    b->num_inputs = good->num_inputs;
    b->operands = good->operands;
    b->attrs = good->attrs;
    broken = b;  // kernel == nullptr: "[cpu] kernel_launch: null argument"
  }
  // Runs the plan (queues it; returns before the host callback ran).
  Tensor run() {
    Tensor y = make_tensor(sim, SPORA_DTYPE_F32, S({2, 3}));
    sched::run_plan(*plan, {&x}, {y});
    return y;
  }
};

void expect_the_failure(const std::string& err) {
  EXPECT_NE(err.find("kernel_launch: null argument"), std::string::npos) << err;
  EXPECT_NE(err.find("model.py:7"), std::string::npos) << err;
  EXPECT_NE(err.find("in an earlier run of graph 'host_error'"), std::string::npos) << err;
}

TEST(HostErrors, ReachTheCallerWhoseRunFailedNotTheNextCaller) {
  Fixture f;
  ASSERT_NE(f.host_step, nullptr) << "softmax is not placed on cpu";
  ASSERT_TRUE(f.plan->host_steps_async) << "sim's cpu steps do not run from host callbacks";

  // Caller A's run fails in its callback, after run_plan returned.
  f.host_step->kernel = f.broken;
  std::string a_err;
  std::thread a([&] {
    f.run();
    f.sim->synchronize();  // the callback has run
    a_err = collect();
    EXPECT_EQ(collect(), "") << "raised once";
  });
  a.join();
  expect_the_failure(a_err);

  // The same again, but A collects nothing; caller B then runs the same
  // plan (kernel mended) and must neither see A's error nor fail.
  f.host_step->kernel = f.broken;
  std::thread a2([&] {
    f.run();
    f.sim->synchronize();
  });
  a2.join();
  f.host_step->kernel = f.good;
  std::thread b([&] {
    Tensor y;
    EXPECT_NO_THROW(y = f.run());
    f.sim->synchronize();
    EXPECT_EQ(collect(), "");
    const std::vector<float> got = read(y);
    for (int r = 0; r < 2; ++r) {
      float sum = 0;
      for (int c = 0; c < 3; ++c) sum += got[static_cast<size_t>(r * 3 + c)];
      EXPECT_NEAR(sum, 1.0f, 1e-5f) << "row " << r;
    }
  });
  b.join();
}

TEST(HostErrors, TheFailingCallersNextRunRaisesIt) {
  Fixture f;
  ASSERT_NE(f.host_step, nullptr) << "softmax is not placed on cpu";
  ASSERT_TRUE(f.plan->host_steps_async);
  std::thread a([&] {
    f.host_step->kernel = f.broken;
    f.run();
    f.sim->synchronize();
    f.host_step->kernel = f.good;
    try {
      f.run();
      ADD_FAILURE() << "the next run did not raise the earlier run's failure";
    } catch (const Error& e) {
      expect_the_failure(e.what());
    }
    f.run();  // raised once: this run is clean
    f.sim->synchronize();
    EXPECT_EQ(collect(), "");
  });
  a.join();
}

}  // namespace
}  // namespace spora
