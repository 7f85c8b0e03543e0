// Compiled runs replayed as one captured graph (sched/plan_capture.h) on the
// sim device, whose capture is as strict as CUDA's (and stricter: a replay
// re-checks that every recorded range is still allocated). Each test checks
// the numbers of every run against the host, and the capture counters.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "device_test_util.h"
#include "sched/executor.h"
#include "sched/plan_capture.h"

namespace spora {
namespace {

// y = tanh(x @ w) + x; the step "w <- w - 0.5 * (x^T y)/n" is below.
ir::Graph forward() {
  ir::Graph g("fwd");
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({4, 4}));
  auto w = g.add_weight("w", SPORA_DTYPE_F32, S({4, 4}));
  auto t = g.add_op("tanh", {g.add_op("matmul", {x, w}, {})[0]}, {})[0];
  g.set_outputs({g.add_op("add", {t, x}, {})[0]});
  return g;
}

std::vector<float> forward_ref(const std::vector<float>& x, const std::vector<float>& w) {
  std::vector<float> y(16);
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) {
      double acc = 0;
      for (int k = 0; k < 4; ++k) acc += double(x[r * 4 + k]) * w[k * 4 + c];
      y[r * 4 + c] = static_cast<float>(std::tanh(acc) + x[r * 4 + c]);
    }
  return y;
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << what << " [" << i << "]";
}

TEST(PlanCapture, LaterRunsReplayOneRecordingWithNewInputsStagedAndResultsKept) {
  Device* sim = device("sim");
  ASSERT_TRUE(sim->has_capture());
  sched::Executable exe(forward(), sim);
  const std::vector<float> wv = normal_values(S({4, 4}), 7);
  const Tensor w = f32_tensor(sim, S({4, 4}), wv);
  std::vector<Tensor> xs, results;  // every x kept: each run binds a new address
  std::vector<std::vector<float>> want;
  for (int step = 0; step < 9; ++step) {
    const std::vector<float> xv = normal_values(S({4, 4}), 100 + step);
    xs.push_back(f32_tensor(sim, S({4, 4}), xv));
    results.push_back(exe.run({&xs.back(), &w})[0]);
    want.push_back(forward_ref(xv, wv));
  }
  // Every result is its own tensor, unchanged by the later replays.
  for (size_t i = 0; i < results.size(); ++i) expect_near(read(results[i]), want[i], "result");
  const sched::CaptureCounts n = sched::capture_counts(exe.plan());
  EXPECT_EQ(n.captures, 5u) << "runs 2-5 bind x where it is; run 6 stages x, and that recording serves runs 7-9";
  EXPECT_EQ(n.replays, 8u);
  EXPECT_FALSE(n.disabled);
}

// A loop over a few fixed batches replays one recording per batch, binding
// each where it is: no staging copy.
TEST(PlanCapture, AFewFixedBatchesEachReplayTheirOwnRecording) {
  Device* sim = device("sim");
  sched::Executable exe(forward(), sim);
  const std::vector<float> wv = normal_values(S({4, 4}), 8);
  const Tensor w = f32_tensor(sim, S({4, 4}), wv);
  std::vector<Tensor> xs;
  std::vector<std::vector<float>> xv;
  for (int b = 0; b < 3; ++b) {
    xv.push_back(normal_values(S({4, 4}), 200 + b));
    xs.push_back(f32_tensor(sim, S({4, 4}), xv.back()));
  }
  for (int step = 0; step < 12; ++step)
    expect_near(read(exe.run({&xs[step % 3], &w})[0]), forward_ref(xv[step % 3], wv), "y");
  const sched::CaptureCounts n = sched::capture_counts(exe.plan());
  EXPECT_EQ(n.captures, 3u) << "run 1 launches; runs 2, 3 and 4 record batches 1, 2 and 0";
  EXPECT_EQ(n.replays, 11u);
}

// A training step: w' = w - 0.25 * w * x (elementwise), donated into w's
// memory, and the loss sum(w') returned fresh.
TEST(PlanCapture, DonatedUpdatesReplayInPlaceStepAfterStep) {
  ir::Graph g("step");
  auto w = g.add_weight("w", SPORA_DTYPE_F32, S({8}));
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({8}));
  auto q = g.add_op("mul", {g.add_op("mul", {w, x}, {})[0], g.add_constant(SPORA_DTYPE_F32, Shape(), [] {
                                std::vector<uint8_t> b(4);
                                const float v = 0.25f;
                                std::memcpy(b.data(), &v, 4);
                                return b;
                              }())},
                    {})[0];
  auto w2 = g.add_op("sub", {w, q}, {})[0];
  Attrs sum;
  sum.set("axes", AttrValue::of_ints({0}));
  sum.set("keepdims", AttrValue::of_bool(false));
  auto loss = g.add_op("sum", {w2}, sum)[0];
  g.set_outputs({w2, loss});
  Device* sim = device("sim");
  sched::Executable exe(g, sim);
  std::vector<float> wv = normal_values(S({8}), 3);
  Tensor wt = f32_tensor(sim, S({8}), wv);
  const spora_devptr_t wmem = wt.data();
  for (int step = 0; step < 5; ++step) {
    const std::vector<float> xv = normal_values(S({8}), 50 + step);
    const Tensor xt = f32_tensor(sim, S({8}), xv);
    std::vector<Tensor> out = exe.run({&wt, &xt}, {0, -1});
    double sum = 0;
    for (size_t i = 0; i < 8; ++i) {
      wv[i] = wv[i] - wv[i] * xv[i] * 0.25f;
      sum += wv[i];
    }
    ASSERT_EQ(out[0].data(), wmem) << "step " << step << ": the update overwrites w";
    wt = out[0];
    expect_near(read(out[0]), wv, "w");
    EXPECT_NEAR(read(out[1])[0], sum, 1e-4) << "step " << step;
  }
  const sched::CaptureCounts n = sched::capture_counts(exe.plan());
  EXPECT_EQ(n.captures, 1u);
  EXPECT_EQ(n.replays, 4u);
}

// Params that take turns moving once the bound recordings are used up: each
// staged recording binds what did not move, so the next move misses again;
// after eight recordings the plan launches kernel by kernel -- correct all
// along.
TEST(PlanCapture, RecordingStopsAfterEightWhenBoundParamsKeepMoving) {
  Device* sim = device("sim");
  sched::Executable exe(forward(), sim);
  std::vector<Tensor> xs, ws;  // kept, so that no address is reused
  // Runs 1-5 (both new each run): noted, then four bound recordings. From
  // run 6 on, x and w move in turn.
  std::vector<int> xi = {0, 1, 2, 3, 4}, wi = {0, 1, 2, 3, 4};
  for (int k = 0; k < 6; ++k) {
    xi.push_back(xi.back() + (k % 2 == 0 ? 1 : 0));
    wi.push_back(wi.back() + (k % 2 == 0 ? 0 : 1));
  }
  for (size_t run = 0; run < xi.size(); ++run) {
    const std::vector<float> xv = normal_values(S({4, 4}), 40 + xi[run]), wv = normal_values(S({4, 4}), 60 + wi[run]);
    if (xs.size() <= static_cast<size_t>(xi[run])) xs.push_back(f32_tensor(sim, S({4, 4}), xv));
    if (ws.size() <= static_cast<size_t>(wi[run])) ws.push_back(f32_tensor(sim, S({4, 4}), wv));
    expect_near(read(exe.run({&xs[xi[run]], &ws[wi[run]]})[0]), forward_ref(xv, wv), "y");
  }
  const sched::CaptureCounts n = sched::capture_counts(exe.plan());
  EXPECT_EQ(n.captures, 8u);
  EXPECT_TRUE(n.disabled);
}

TEST(PlanCapture, OffWithTheEnvironmentVariable) {
  ASSERT_EQ(setenv("SPORA_GRAPH_CAPTURE", "0", 1), 0);
  Device* sim = device("sim");
  sched::Executable exe(forward(), sim);
  const Tensor w = f32_tensor(sim, S({4, 4}), normal_values(S({4, 4}), 2));
  const Tensor x = f32_tensor(sim, S({4, 4}), normal_values(S({4, 4}), 3));
  for (int i = 0; i < 3; ++i) exe.run({&x, &w});
  ASSERT_EQ(unsetenv("SPORA_GRAPH_CAPTURE"), 0);
  EXPECT_EQ(sched::capture_counts(exe.plan()).captures, 0u);
}

// The sim plugin's capture itself, through the device: what CUDA forbids
// while capturing breaks the capture, and a replay of work whose memory was
// freed fails instead of touching it.
TEST(SimCapture, AnAllocationWhileRecordingBreaksTheCapture) {
  Device* sim = device("sim");
  sim->begin_capture();
  EXPECT_THROW(sim->alloc(64), Error);
  try {
    sim->end_capture();
    ADD_FAILURE() << "capture_end succeeded after a refused mem_alloc";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mem_alloc"), std::string::npos) << e.what();
  }
  // The device works normally afterwards.
  const Tensor t = f32_tensor(sim, S({2}), {1, 2});
  EXPECT_EQ(read(t), (std::vector<float>{1, 2}));
}

TEST(SimCapture, AReplayOfFreedMemoryFailsNamingTheRange) {
  Device* sim = device("sim");
  Tensor a = f32_tensor(sim, S({4}), {1, 2, 3, 4});
  Tensor b = f32_tensor(sim, S({4}), {0, 0, 0, 0});
  sim->begin_capture();
  sim->copy_d2d_async(b.data(), a.data(), 16);
  std::shared_ptr<Device::Captured> g = sim->end_capture();
  EXPECT_EQ(read(b), (std::vector<float>{0, 0, 0, 0})) << "recording runs nothing";
  sim->launch_captured(*g);
  EXPECT_EQ(read(b), (std::vector<float>{1, 2, 3, 4}));
  a = Tensor{};  // frees the source
  try {
    sim->launch_captured(*g);
    ADD_FAILURE() << "a replay read freed memory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not inside a live allocation"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace spora
