// Asynchronous execution on the sim device, whose streams are worker
// threads: a compiled run queues its launches and returns; the host waits
// for the device only where it must read an if/while condition.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <future>
#include <mutex>

#include "device_test_util.h"
#include "sched/executor.h"

namespace spora {
namespace {

ir::Value f32_scalar(ir::Graph& g, float v) {
  std::vector<uint8_t> b(4);
  std::memcpy(b.data(), &v, 4);
  return g.add_constant(SPORA_DTYPE_F32, Shape(), b);
}

// 120 dependent ops: x <- tanh(x @ w) * 0.5 + x, 40 times.
constexpr int kRounds = 40;
ir::Graph many_ops() {
  ir::Graph g("many");
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({16, 16}));
  auto w = g.add_weight("w", SPORA_DTYPE_F32, S({16, 16}));
  for (int i = 0; i < kRounds; ++i) {
    auto t = g.add_op("tanh", {g.add_op("matmul", {x, w}, {})[0]}, {})[0];
    x = g.add_op("add", {g.add_op("mul", {t, f32_scalar(g, 0.5f)}, {})[0], x}, {})[0];
  }
  g.set_outputs({x});
  return g;
}

// The same computation on the host, in double.
std::vector<double> many_ops_reference(const std::vector<float>& x0, const std::vector<float>& w) {
  std::vector<double> x(x0.begin(), x0.end());
  for (int i = 0; i < kRounds; ++i) {
    std::vector<double> next(x.size());
    for (int r = 0; r < 16; ++r)
      for (int c = 0; c < 16; ++c) {
        double acc = 0;
        for (int k = 0; k < 16; ++k) acc += x[r * 16 + k] * w[k * 16 + c];
        next[r * 16 + c] = std::tanh(acc) * 0.5 + x[r * 16 + c];
      }
    x = next;
  }
  return x;
}

// Holds a device's stream at a host callback until opened.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  static void wait(void* self, const spora_plugin_error_t*) {
    auto* g = static_cast<Gate*>(self);
    std::unique_lock<std::mutex> lock(g->mu);
    g->cv.wait(lock, [&] { return g->open; });
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
    cv.notify_all();
  }
};

TEST(Async, CompiledRunQueuesEveryLaunchWithoutWaiting) {
  Device* sim = device("sim");
  const std::vector<float> xv = normal_values(S({16, 16}), 1), wv = normal_values(S({16, 16}), 2);
  std::vector<float> ws(wv);
  for (float& v : ws) v *= 0.25f;  // keeps tanh away from saturation
  const Tensor x = f32_tensor(sim, S({16, 16}), xv), w = f32_tensor(sim, S({16, 16}), ws);
  sched::Executable exe(many_ops(), sim);
  const auto first = read(exe.run({&x, &w})[0]);
  const std::vector<double> ref = many_ops_reference(xv, ws);
  for (size_t k = 0; k < ref.size(); ++k) ASSERT_NEAR(first[k], ref[k], 1e-4 * (1 + std::fabs(ref[k]))) << k;

  // No call that waits for the device, in 160 launches.
  const uint64_t before = sim->host_waits();
  std::vector<Tensor> out = exe.run({&x, &w});
  EXPECT_EQ(sim->host_waits(), before);
  EXPECT_EQ(read(out[0]), first);

  // With the stream held at a callback, nothing queued behind it can run:
  // a run that waited for the device could not return until released.
  Gate gate;
  sim->host_callback(&Gate::wait, &gate);
  auto run = std::async(std::launch::async, [&] { return exe.run({&x, &w}); });
  // The bound only keeps a broken build from hanging the suite.
  const bool returned_while_held = run.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
  gate.release();
  EXPECT_TRUE(returned_while_held) << "the run waited for the device";
  const std::vector<Tensor> held = run.get();
  EXPECT_EQ(read(held[0]), first);  // and it computed the same once released
}

// x <- x * 2 + 1 (with a few more ops) while sum(x) < 1000.
ir::Graph loop() {
  ir::Graph cond("cond"), body("body");
  auto cx = cond.add_input("x", SPORA_DTYPE_F32, S({8}));
  cond.set_outputs({cond.add_op("less", {cond.add_op("sum", {cx}, {})[0], f32_scalar(cond, 1000.f)}, {})[0]});
  auto bx = body.add_input("x", SPORA_DTYPE_F32, S({8}));
  auto twice = body.add_op("mul", {bx, f32_scalar(body, 2.f)}, {})[0];
  auto shifted = body.add_op("add", {twice, f32_scalar(body, 1.f)}, {})[0];
  auto abs = body.add_op("abs", {shifted}, {})[0];
  body.set_outputs({body.add_op("maximum", {abs, shifted}, {})[0]});
  ir::Graph g("loop");
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({8}));
  auto r = g.add_while(cond, body, {x}, {"model.py", 4});
  g.set_outputs({g.add_op("neg", {r[0]}, {})[0]});
  return g;
}

TEST(Async, OnlyConditionReadsWait) {
  Device* sim = device("sim");
  const Tensor x = f32_tensor(sim, S({8}), std::vector<float>(8, 1.f));
  sched::Executable exe(loop(), sim);
  // 1 -> 3 -> 7 -> 15 -> 31 -> 63 -> 127: sums 8, 24, ..., 504, 1016.
  const auto want = std::vector<float>(8, -127.f);
  EXPECT_EQ(read(exe.run({&x})[0]), want);
  const uint64_t before = sim->host_waits();
  std::vector<Tensor> out = exe.run({&x});
  // Seven evaluations of the condition, each read by the host once.
  EXPECT_EQ(sim->host_waits() - before, 7u);
  EXPECT_EQ(read(out[0]), want);
}

TEST(Async, IfReadsItsConditionOnce) {
  ir::Graph then_g("then"), else_g("else");
  then_g.set_outputs({then_g.add_op("exp", {then_g.add_input("x", SPORA_DTYPE_F32, S({3}))}, {})[0]});
  else_g.set_outputs({else_g.add_op("neg", {else_g.add_input("x", SPORA_DTYPE_F32, S({3}))}, {})[0]});
  ir::Graph g("if");
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({3}));
  auto c = g.add_op("greater", {g.add_op("sum", {x}, {})[0], f32_scalar(g, 0.f)}, {})[0];
  g.set_outputs({g.add_op("abs", {g.add_if(c, then_g, else_g, {x}, {"model.py", 2})[0]}, {})[0]});
  Device* sim = device("sim");
  sched::Executable exe(g, sim);
  const Tensor pos = f32_tensor(sim, S({3}), {0.f, 1.f, 2.f}), neg = f32_tensor(sim, S({3}), {-1.f, -2.f, 0.5f});
  read(exe.run({&pos})[0]);
  const uint64_t before = sim->host_waits();
  std::vector<Tensor> a = exe.run({&pos}), b = exe.run({&neg});
  EXPECT_EQ(sim->host_waits() - before, 2u);
  const auto ra = read(a[0]);
  const float ea[] = {1.f, std::exp(1.f), std::exp(2.f)};
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(ra[i], ea[i], 1e-6f * ea[i]) << i;
  EXPECT_EQ(read(b[0]), (std::vector<float>{1.f, 2.f, 0.5f}));
}

}  // namespace
}  // namespace spora
