// The stages of building an execution plan (sched/plan_build.h), each run
// up to the one under test and checked on its own: lifetimes and aliasing
// (views resolve to their root, which lives as long as its last view's
// reader; outputs leave the arena; in-place reuse), and the host steps of
// cpu-placed ops (which values are copied in and out, once, and where).
// This binary's sim lacks softmax (placement_test.cpp), so softmax runs on
// cpu there.
#include <gtest/gtest.h>

#include "device_test_util.h"
#include "runtime/interpreter.h"
#include "sched/executor.h"
#include "sched/plan_build.h"

namespace spora {
namespace {

using sched::ExecutionPlan;
using sched::PlanBuild;
using sched::Slot;
using sched::Step;

Attrs shape_attr(std::initializer_list<int64_t> s) {
  Attrs a;
  a.set("shape", AttrValue::of_ints(s));
  return a;
}

// Stages 1-3 on `device`.
PlanBuild through_lifetimes(const ir::Graph& g, Device* device) {
  PlanBuild b;
  sched::place(b, g, device);
  sched::plan_kernels(b);
  sched::plan_lifetimes_and_aliases(b);
  return b;
}

// a = exp(x); v1 = reshape(a); v2 = reshape(v1) (a's shape); n = neg(a view of x);
// u = tanh(v2); y = sigmoid(u) + n
struct Chain {
  ir::Graph g{"chain"};
  ir::Value x, a, v1, v2, n, u, y;
  Chain() {
    x = g.add_input("x", SPORA_DTYPE_F32, S({2, 3}));
    a = g.add_op("exp", {x}, {})[0];
    v1 = g.add_op("reshape", {a}, shape_attr({3, 2}))[0];
    v2 = g.add_op("reshape", {v1}, shape_attr({2, 3}))[0];
    n = g.add_op("neg", {g.add_op("reshape", {x}, shape_attr({2, 3}))[0]}, {})[0];
    u = g.add_op("tanh", {v2}, {})[0];
    y = g.add_op("add", {g.add_op("sigmoid", {u}, {})[0], n}, {})[0];
    g.set_outputs({y});
  }
};

TEST(PlanBuild, ViewsResolveToTheirRootWhichLivesUntilTheLastViewIsRead) {
  Chain c;
  PlanBuild b = through_lifetimes(c.g, device("cpu"));
  const ExecutionPlan& p = *b.plan;
  // Node ids are kept by placement here (cpu runs everything).
  ASSERT_EQ(p.graph.nodes().size(), c.g.nodes().size());
  EXPECT_EQ(p.slot(c.v1).kind, Slot::kAlias);
  EXPECT_EQ(p.slot(c.v2).kind, Slot::kAlias);
  EXPECT_EQ(p.slot(c.v2).alias, c.a) << "a view of a view points at the root, not at the view";
  EXPECT_EQ(p.root(c.v2), c.a);
  // exp's buffer is read through v2 by tanh: it lives until tanh.
  EXPECT_EQ(b.last_use_of(c.a), c.u.node);
  EXPECT_EQ(b.last_use_of(c.x), c.n.node) << "x is read through a view by neg";
  EXPECT_EQ(p.slot(c.a).kind, Slot::kArena);
  EXPECT_EQ(p.slot(c.y).kind, Slot::kOutput);
  EXPECT_EQ(p.slot(c.y).index, 0);
  EXPECT_EQ(p.slot(c.x).kind, Slot::kParam);
}

TEST(PlanBuild, AViewThatIsAnOutputTakesItsRootOutOfTheArena) {
  ir::Graph g("view_out");
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({2, 3}));
  auto a = g.add_op("exp", {x}, {})[0];
  auto v = g.add_op("reshape", {a}, shape_attr({6}))[0];
  g.set_outputs({v});
  PlanBuild b = through_lifetimes(g, device("cpu"));
  EXPECT_EQ(b.plan->slot(a).kind, Slot::kOutput);
  EXPECT_EQ(b.plan->slot(v).kind, Slot::kAlias);
  EXPECT_EQ(b.output_pos.at(std::make_pair(v.node, v.index)), 0);
}

TEST(PlanBuild, AnElementwiseOpReusesTheBufferOfAnInputItReadsLast) {
  Chain c;
  PlanBuild b = through_lifetimes(c.g, device("cpu"));
  sched::plan_device_arena(b);
  const ExecutionPlan& p = *b.plan;
  // tanh is the last reader of exp's buffer (through the views, back to
  // its shape): it writes over it. neg's input is a view of the param x,
  // not an arena buffer: neg gets its own.
  ASSERT_EQ(p.slot(c.u).kind, Slot::kArena);
  EXPECT_EQ(p.slot(c.u).offset, p.slot(c.a).offset);
  EXPECT_NE(p.slot(c.n).offset, p.slot(c.a).offset);
  EXPECT_TRUE(p.arena != nullptr);
  EXPECT_EQ(p.host_ops, 0u);
}

// e = exp(x) on sim; s1 = softmax(e), s2 = softmax(s1), s3 = softmax(e) on
// cpu; y = tanh(s2) + s3 on sim.
struct HostChain {
  ir::Graph g{"host_chain"};
  ir::Value x, e, s1, s2, s3, y;
  HostChain() {
    Attrs axis;
    axis.set("axis", AttrValue::of_int(1));
    x = g.add_input("x", SPORA_DTYPE_F32, S({2, 3}));
    e = g.add_op("exp", {x}, {})[0];
    s1 = g.add_op("softmax", {e}, axis)[0];
    s2 = g.add_op("softmax", {s1}, axis)[0];
    s3 = g.add_op("softmax", {e}, axis)[0];
    y = g.add_op("add", {g.add_op("tanh", {s2}, {})[0], s3}, {})[0];
    g.set_outputs({y});
  }
};

const Step& step_of(const ExecutionPlan& p, int32_t node) {
  for (const auto& s : p.steps)
    if (s->node == node) return *s;
  throw std::runtime_error("no step for node " + std::to_string(node));
}

TEST(PlanBuild, HostStepsCopyEachDeviceValueInOnceAndBackOnlyWhatTheDeviceReads) {
  Device* sim = device("sim");
  HostChain c;
  PlanBuild b = through_lifetimes(c.g, sim);
  const ExecutionPlan& p = *b.plan;
  ASSERT_EQ(p.graph.nodes().size(), c.g.nodes().size());
  ASSERT_EQ(p.host_ops, 3u);
  // s1 is read only by s2 on cpu: no device memory.
  EXPECT_EQ(p.slot(c.s1).kind, Slot::kHostOnly);
  EXPECT_EQ(p.slot(c.s2).kind, Slot::kArena);
  EXPECT_EQ(b.host_first[static_cast<size_t>(c.e.node)][0], c.s1.node);
  EXPECT_EQ(b.host_last[static_cast<size_t>(c.e.node)][0], c.s3.node);

  sched::plan_device_arena(b);
  sched::plan_host_steps(b);
  const uint64_t bytes = 6 * sizeof(float);
  const Step& s1 = step_of(p, c.s1.node);
  const Step& s2 = step_of(p, c.s2.node);
  const Step& s3 = step_of(p, c.s3.node);
  for (const Step* s : {&s1, &s2, &s3}) {
    EXPECT_EQ(s->kind, Step::kHostKernel);
    EXPECT_EQ(s->host, p.host);
    EXPECT_EQ(s->owner, &p);
  }
  // e is copied in by its first cpu reader only; s3 reads the same copy.
  ASSERT_EQ(s1.copy_in.size(), 1u);
  EXPECT_EQ(s1.copy_in[0].value, c.e);
  EXPECT_EQ(s1.copy_in[0].bytes, bytes);
  EXPECT_TRUE(s3.copy_in.empty());
  EXPECT_EQ(s3.host_in[0], s1.host_in[0]);
  const uintptr_t base = reinterpret_cast<uintptr_t>(p.host_arena->ptr());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(s1.host_in[0]), base + s1.copy_in[0].host_offset);
  // s1 stays on cpu; s2 and s3 go back to the device (tanh, add read them).
  EXPECT_TRUE(s1.copy_out.empty());
  EXPECT_TRUE(s2.copy_in.empty());
  EXPECT_EQ(s2.host_in[0], s1.host_out[0]);
  ASSERT_EQ(s2.copy_out.size(), 1u);
  EXPECT_EQ(s2.copy_out[0].value, c.s2);
  ASSERT_EQ(s3.copy_out.size(), 1u);
  EXPECT_EQ(p.host_copies, 3u);
  // Async cpu steps exactly when the device has pinned memory (the host
  // arena is then pinned: see plan_arenas.cpp).
  EXPECT_EQ(p.host_steps_async, sim->has_pinned());
  EXPECT_GE(p.host_arena_bytes, 3 * bytes);
}

TEST(PlanBuild, EveryStageInOrderRunsLikeEager) {
  Device* sim = device("sim");
  HostChain c;
  sched::Executable exe(c.g, sim);
  const Tensor x = f32_tensor(sim, S({2, 3}), {0.1f, -0.2f, 0.3f, 1.f, 2.f, -3.f});
  EXPECT_EQ(read(exe.run({&x})[0]), read(run_eager(c.g, sim, {&x})[0]));
}

// Output donation (ExecutionPlan::output_may_take, Executable::run's
// `donate`): an output may overwrite a param only when no later step reads
// the param, or only the in-place op writing the output does.
TEST(PlanBuild, AnOutputMayTakeAParamNothingReadsAfterItsWriter) {
  ir::Graph g("donate");
  auto w = g.add_weight("w", SPORA_DTYPE_F32, S({2, 3}));
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({2, 3}));
  auto y = g.add_op("add", {w, x}, {})[0];   // w is read again below: y may not take w
  auto z = g.add_op("mul", {w, y}, {})[0];   // w's last reader, in place: z may take w
  auto e = g.add_op("exp", {y}, {})[0];      // never reads w or x: may take either
  g.set_outputs({y, z, e});
  Device* sim = device("sim");
  sched::Executable exe(g, sim);
  const auto& may = exe.plan().output_may_take;
  const int32_t pw = 0, px = 1;  // binding order: creation order
  ASSERT_EQ(may.size(), 3u);
  EXPECT_EQ(may[0], std::vector<int32_t>{px}) << "add reads x in place, w is read later by mul";
  EXPECT_EQ(may[1], (std::vector<int32_t>{pw, px}));
  EXPECT_EQ(may[2], (std::vector<int32_t>{pw, px}));

  const std::vector<float> wv{1, 2, 3, 4, 5, 6}, xv{0.5f, -1, 2, 0, 1, -2};
  std::vector<float> yv(6), zv(6);
  for (size_t i = 0; i < 6; ++i) yv[i] = wv[i] + xv[i], zv[i] = wv[i] * yv[i];
  {
    // z overwrites w (its only holder is the binding); y cannot, so it is
    // fresh even when asked; e asks for w too, already taken: fresh.
    Tensor wt = f32_tensor(sim, S({2, 3}), wv);
    const Tensor xt = f32_tensor(sim, S({2, 3}), xv);
    const spora_devptr_t wmem = wt.data();
    const std::vector<Tensor> out = exe.run({&wt, &xt}, {pw, pw, pw});
    EXPECT_NE(out[0].data(), wmem);
    EXPECT_EQ(out[1].data(), wmem) << "z is written into w's memory";
    EXPECT_NE(out[2].data(), wmem);
    EXPECT_EQ(read<float>(out[0]), yv);
    EXPECT_EQ(read<float>(out[1]), zv);
    EXPECT_EQ(read<float>(wt), zv) << "w's old value is gone";
  }
  {
    // Another tensor holding w's buffer keeps its value: no donation.
    Tensor wt = f32_tensor(sim, S({2, 3}), wv);
    const Tensor held = wt;
    const Tensor xt = f32_tensor(sim, S({2, 3}), xv);
    const std::vector<Tensor> out = exe.run({&wt, &xt}, {-1, pw, -1});
    EXPECT_NE(out[1].data(), wt.data());
    EXPECT_EQ(read<float>(out[1]), zv);
    EXPECT_EQ(read<float>(held), wv);
  }
}

}  // namespace
}  // namespace spora
