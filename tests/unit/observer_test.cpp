// Op observers (runtime/observer.h): the interpreter tells them of every op
// and constant it runs, an op's eager fallback does not tell them of its
// decomposition's parts, and pausing silences them. This binary's sim lacks
// relu, which has a decomposition (placement_test.cpp).
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "device_test_util.h"
#include "runtime/interpreter.h"
#include "runtime/observer.h"

namespace spora {
namespace {

struct Recorder final : OpObserver {
  std::vector<std::string> ops;
  int constants = 0;
  void on_op(const OpDef& op, const Tensor* const*, int, const Attrs&, const Tensor*, int, const char*,
             int32_t) override {
    ops.push_back(op.name);
  }
  void on_constant(const ir::Node&, const Tensor&) override { ++constants; }
};

// Registered on this thread for the test's lifetime.
struct Registered {
  Recorder r;
  Registered() { add_thread_observer(&r); }
  ~Registered() { remove_thread_observer(&r); }
};

ir::Graph relu_plus_one() {
  ir::Graph g("relu_plus_one");
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({4}));
  const float one = 1.f;
  auto c = g.add_constant(SPORA_DTYPE_F32, S({}), std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(&one),
                                                                       reinterpret_cast<const uint8_t*>(&one) + 4));
  g.set_outputs({g.add_op("add", {g.add_op("relu", {x}, {})[0], c}, {})[0]});
  return g;
}

TEST(Observer, TheInterpreterTellsOfOpsAndConstantsButNotOfAFallbacksParts) {
  Device* sim = device("sim");
  const Tensor x = f32_tensor(sim, S({4}), {-1.f, 0.f, 2.f, -3.f});
  EXPECT_FALSE(observing());
  {
    Registered reg;
    EXPECT_TRUE(observing());
    const std::vector<Tensor> y = run_eager(relu_plus_one(), sim, {&x});
    EXPECT_EQ(read(y[0]), (std::vector<float>{1.f, 1.f, 3.f, 1.f}));
    // relu ran through its decomposition on sim; observers hear only relu.
    EXPECT_EQ(reg.r.ops, (std::vector<std::string>{"relu", "add"}));
    EXPECT_EQ(reg.r.constants, 1);
    {
      ObserversPaused paused;
      EXPECT_FALSE(observing());
      run_eager(relu_plus_one(), sim, {&x});
    }
    EXPECT_EQ(reg.r.ops.size(), 2u);
  }
  EXPECT_FALSE(observing());
}

TEST(Observer, RegistrationIsPerThread) {
  Registered reg;
  bool other = true;
  std::thread([&] { other = observing(); }).join();
  EXPECT_FALSE(other);
  EXPECT_TRUE(observing());
}

}  // namespace
}  // namespace spora
