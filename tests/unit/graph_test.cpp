// Graph IR: building, printing, verification, JSON round trip, memory
// planning and execution on every device against eager mode.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ir/printer.h"
#include "ir_test_util.h"
#include "ir/serialize.h"
#include "ir/verifier.h"
#include "runtime/context.h"
#include "runtime/device.h"
#include "runtime/eager.h"
#include "sched/executor.h"
#include "sched/memory_plan.h"
#include "support/error.h"

namespace spora {
namespace {

// y = softmax(relu(x @ w1^T + b1) @ w2^T + b2), a two-layer MLP.
ir::Graph mlp(int64_t batch, int64_t in, int64_t hidden, int64_t out) {
  ir::Graph g("mlp");
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({batch, in}));
  auto w1 = g.add_weight("w1", SPORA_DTYPE_F32, S({hidden, in}));
  auto b1 = g.add_weight("b1", SPORA_DTYPE_F32, S({hidden}));
  auto w2 = g.add_weight("w2", SPORA_DTYPE_F32, S({out, hidden}));
  auto b2 = g.add_weight("b2", SPORA_DTYPE_F32, S({out}));
  auto h = g.add_op("linear", {x, w1, b1}, {}, {"model.py", 10})[0];
  auto a = g.add_op("relu", {h}, {}, {"model.py", 11})[0];
  auto l = g.add_op("linear", {a, w2, b2}, {}, {"model.py", 12})[0];
  auto y = g.add_op("softmax", {l}, {}, {"model.py", 13})[0];
  g.set_outputs({y, h});
  return g;
}

TEST(Graph, PrintsTypesOpsAndLocations) {
  const std::string text = ir::to_text(mlp(4, 8, 16, 3));
  EXPECT_NE(text.find("%5 = linear(%0, %1, %2) : f32[4,16]  # model.py:10"), std::string::npos) << text;
  EXPECT_NE(text.find("return %8, %5"), std::string::npos) << text;
  EXPECT_NE(ir::to_dot(mlp(1, 2, 3, 4)).find("digraph"), std::string::npos);
}

TEST(Graph, BuildErrorsNameTheOpAndTheSourceLine) {
  ir::Graph g;
  auto a = g.add_input("a", SPORA_DTYPE_F32, S({2, 3}));
  auto b = g.add_input("b", SPORA_DTYPE_F32, S({4, 5}));
  try {
    g.add_op("matmul", {a, b}, {}, {"model.py", 17});
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[matmul] shapes (2,3) and (4,5) do not contract (3 vs 4) (model.py:17)");
  }
  EXPECT_THROW(g.add_input("a", SPORA_DTYPE_F32, S({1})), Error);  // duplicate name
  EXPECT_THROW(g.set_outputs({{7, 0}}), Error);
}

TEST(Graph, JsonRoundTripIsLossless) {
  ir::Graph g = mlp(4, 8, 16, 3);
  std::vector<uint8_t> bytes(4 * 3);
  const float vals[3] = {1.5f, NAN, -INFINITY};
  std::memcpy(bytes.data(), vals, sizeof vals);
  auto c = g.add_constant(SPORA_DTYPE_F32, S({3}), bytes, {"model.py", 20});
  Attrs at;
  at.set("axes", AttrValue::of_ints({0}));
  at.set("keepdims", AttrValue::of_bool(true));
  g.add_op("sum", {c}, at, {"model.py", 21});
  const std::string j1 = ir::to_json(g);
  const ir::Graph back = ir::from_json(j1);
  EXPECT_EQ(ir::to_json(back), j1);
  EXPECT_EQ(ir::to_text(back), ir::to_text(g));
}

TEST(Graph, HostileJsonIsRejectedWithAReason) {
  EXPECT_THROW(ir::from_json("{not json"), Error);
  EXPECT_THROW(ir::from_json("{\"format\": \"other\"}"), Error);
  const std::string good = ir::to_json(mlp(2, 3, 4, 5));
  // A node that reads a later node, an unknown op, a shape lie.
  for (auto [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"\"inputs\":[[0,0],[1,0],[2,0]]", "\"inputs\":[[9,0],[1,0],[2,0]]"},
           {"\"op\":\"relu\"", "\"op\":\"frobnicate\""},
           {"\"shape\":[2,4]", "\"shape\":[2,5]"}}) {
    std::string bad = good;
    const auto pos = bad.find(from);
    ASSERT_NE(pos, std::string::npos) << from;
    bad.replace(pos, from.size(), to);
    try {
      ir::from_json(bad);
      FAIL() << "accepted: " << to;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::kInvalidArgument);
      const std::string msg = e.what();
      EXPECT_TRUE(msg.rfind("[graph", 0) == 0 || msg.rfind("[verify]", 0) == 0) << msg;
    }
  }
}

TEST(MemoryPlan, ReusesBuffersWhoseReadersAreDone) {
  // A chain a -> b -> c -> d of 1 KiB buffers needs two slots, not four.
  std::vector<sched::BufferRequest> r = {{1024, 0, 1}, {1024, 1, 2}, {1024, 2, 3}, {1024, 3, 4}};
  const auto plan = sched::plan_memory(r);
  EXPECT_EQ(plan.naive_bytes, 4096u);
  EXPECT_EQ(plan.arena_bytes, 2048u);
  for (size_t i = 1; i < r.size(); ++i) EXPECT_NE(plan.offsets[i], plan.offsets[i - 1]);
  // Buffers alive at the same time never overlap.
  std::vector<sched::BufferRequest> r2 = {{100, 0, 5}, {5000, 1, 2}, {300, 2, 5}, {5000, 3, 4}, {10, 4, 5}};
  const auto p2 = sched::plan_memory(r2);
  for (size_t i = 0; i < r2.size(); ++i)
    for (size_t j = i + 1; j < r2.size(); ++j) {
      const bool overlap_time = r2[i].first <= r2[j].last && r2[j].first <= r2[i].last;
      const bool overlap_space = p2.offsets[i] < p2.offsets[j] + r2[j].bytes && p2.offsets[j] < p2.offsets[i] + r2[i].bytes;
      EXPECT_FALSE(overlap_time && overlap_space) << i << " and " << j;
    }
}

TEST(MemoryPlan, InPlaceTakesOverTheInputBuffer) {
  // b = f(a) in place at step 1, c = g(b) in place at step 2: one buffer.
  std::vector<sched::BufferRequest> r = {{4096, 0, 1}, {4096, 1, 2, 0}, {4096, 2, 3, 1}};
  const auto plan = sched::plan_memory(r);
  EXPECT_EQ(plan.offsets[0], plan.offsets[1]);
  EXPECT_EQ(plan.offsets[1], plan.offsets[2]);
  EXPECT_EQ(plan.arena_bytes, 4096u);
  // Not when the input is still read later.
  std::vector<sched::BufferRequest> r2 = {{4096, 0, 2}, {4096, 1, 2, 0}};
  const auto p2 = sched::plan_memory(r2);
  EXPECT_NE(p2.offsets[0], p2.offsets[1]);
}

// Random lifetimes and sizes (in-place requests among them): every buffer
// lies inside the arena, and buffers alive at the same time never overlap
// unless one took the other over in place.
TEST(MemoryPlan, RandomRequestsStayInTheArenaAndNeverOverlap) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<sched::BufferRequest> r;
    const int n = 2 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      sched::BufferRequest q;
      q.bytes = 1 + rng() % 100000;
      q.first = static_cast<int32_t>(rng() % 30);
      q.last = q.first + static_cast<int32_t>(rng() % 12);
      if (i > 0 && rng() % 4 == 0) {
        const int32_t src = static_cast<int32_t>(rng() % static_cast<uint32_t>(i));
        if (r[static_cast<size_t>(src)].first <= q.first && r[static_cast<size_t>(src)].last >= q.first) {
          r[static_cast<size_t>(src)].last = q.first;  // its last read is this op: in place allowed
          q.reuse = src;
        }
      }
      r.push_back(q);
    }
    const auto plan = sched::plan_memory(r);
    // In-place chains (a taken over by b, b by c, ...) share one buffer.
    std::vector<size_t> chain(r.size());
    for (size_t i = 0; i < r.size(); ++i) {
      chain[i] = i;
      const int32_t src = r[i].reuse;
      if (src >= 0 && plan.offsets[i] == plan.offsets[static_cast<size_t>(src)] &&
          r[static_cast<size_t>(src)].last == r[i].first)
        chain[i] = chain[static_cast<size_t>(src)];
    }
    for (size_t i = 0; i < r.size(); ++i) {
      EXPECT_LE(plan.offsets[i] + r[i].bytes, plan.arena_bytes);
      for (size_t j = i + 1; j < r.size(); ++j) {
        const bool in_place = chain[i] == chain[j];
        const bool overlap_time = r[i].first <= r[j].last && r[j].first <= r[i].last;
        const bool overlap_space =
            plan.offsets[i] < plan.offsets[j] + r[j].bytes && plan.offsets[j] < plan.offsets[i] + r[i].bytes;
        if (!in_place) EXPECT_FALSE(overlap_time && overlap_space) << "trial " << trial << ": " << i << " and " << j;
      }
    }
  }
}

// A small long-lived buffer born after a large short-lived one: the step
// order puts it above the large one's hole, which the next large buffer
// then cannot use; whole-lifetime packing puts the large ones together.
TEST(MemoryPlan, PacksByWholeLifetimesWhenStepOrderFragments) {
  std::vector<sched::BufferRequest> r = {{1 << 20, 0, 1}, {1024, 1, 9}, {2 << 20, 2, 3}, {1 << 20, 4, 5}};
  const auto plan = sched::plan_memory(r);
  EXPECT_EQ(plan.arena_bytes, (2u << 20) + 1024u) << "the 2 MiB buffer reuses the first 1 MiB and more";
}

class GraphRun : public ::testing::TestWithParam<std::string> {};

TEST_P(GraphRun, MatchesEagerAndPlansLessThanNaive) {
  static Context* ctx = [] {
    auto* c = new Context;
    c->add_plugin_path(SPORA_TEST_PLUGIN_DIR);  // no libspora.so here to find plugins beside
    return c;
  }();
  Device* dev = ctx->find_device(GetParam());
  const int64_t B = 8, I = 32, H = 64, O = 10;
  ir::Graph g = mlp(B, I, H, O);
  sched::Executable exe(g, dev);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  auto rand_tensor = [&](Shape s) {
    std::vector<float> v(static_cast<size_t>(s.numel()));
    for (auto& x : v) x = nd(rng);
    return tensor_from_host(dev, SPORA_DTYPE_F32, s, v.data(), v.size() * 4);
  };
  Tensor x = rand_tensor(S({B, I})), w1 = rand_tensor(S({H, I})), b1 = rand_tensor(S({H})), w2 = rand_tensor(S({O, H})),
         b2 = rand_tensor(S({O}));
  auto outs = exe.run({&x, &w1, &b1, &w2, &b2});
  ASSERT_EQ(outs.size(), 2u);
  // Eager reference.
  auto call = [&](const char* op, std::vector<const Tensor*> in) {
    Tensor out;
    eager_call(*OpRegistry::get().find(op), nullptr, in.data(), static_cast<int>(in.size()), Attrs(), &out, 1);
    return out;
  };
  Tensor h = call("linear", {&x, &w1, &b1});
  Tensor a = call("relu", {&h});
  Tensor l = call("linear", {&a, &w2, &b2});
  Tensor y = call("softmax", {&l});
  for (auto [got, want] : {std::pair<Tensor*, Tensor*>{&outs[0], &y}, {&outs[1], &h}}) {
    std::vector<float> gv(static_cast<size_t>(got->shape.numel())), wv(gv.size());
    tensor_read(*got, gv.data(), gv.size() * 4);
    tensor_read(*want, wv.data(), wv.size() * 4);
    EXPECT_EQ(gv, wv);
  }
  EXPECT_GT(exe.naive_bytes(), 0u);
  EXPECT_LT(exe.planned_bytes(), exe.naive_bytes());
  // Running again reuses the plan and gives the same numbers.
  auto again = exe.run({&x, &w1, &b1, &w2, &b2});
  std::vector<float> v1(static_cast<size_t>(B * O)), v2(v1.size());
  tensor_read(outs[0], v1.data(), v1.size() * 4);
  tensor_read(again[0], v2.data(), v2.size() * 4);
  EXPECT_EQ(v1, v2);
  // Wrong bindings are errors naming the graph and the input.
  try {
    exe.run({&w1, &w1, &b1, &w2, &b2});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input 'x' must be f32 (8,32)"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, GraphRun, ::testing::Values("cpu", "sim"));

}  // namespace
}  // namespace spora
