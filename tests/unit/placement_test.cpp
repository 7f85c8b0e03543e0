// Placement by capability: this binary disables ops on sim that have no
// decomposition (conv2d, softmax, normal), so a plan compiled for sim must
// run them on cpu with copies in and out.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "device_test_util.h"
#include "runtime/interpreter.h"
#include "sched/executor.h"
#include "sched/placement.h"
#include "support/error.h"

namespace spora {
namespace {

// The sim plugin reads these when it loads, which is after main starts:
// every test of this binary sees a sim device without these kernels (relu
// has a decomposition, the others none) and a second sim device.
[[maybe_unused]] const bool kSimConfigured = [] {
  setenv("SPORA_SIM_DISABLE_OPS", "conv2d,softmax,normal,relu", 1);
  setenv("SPORA_SIM_DEVICES", "2", 1);
  return true;
}();

bool disabled_on_sim(const std::string& op) {
  const char* env = std::getenv("SPORA_SIM_DISABLE_OPS");
  return env && ("," + std::string(env) + ",").find("," + op + ",") != std::string::npos;
}

// The premise of every test here: sim really lacks the kernels.
TEST(Placement, SimLacksTheDisabledOps) {
  for (const char* op : {"conv2d", "softmax", "normal"}) ASSERT_TRUE(disabled_on_sim(op)) << op;
  const OpDef* softmax = OpRegistry::get().find("softmax");
  TensorMeta in{SPORA_DTYPE_F32, S({2, 3})};
  OpCall call;
  infer_call(*softmax, &in, 1, {}, call);
  try {
    device("sim")->kernel(*softmax, call);
    FAIL() << "sim planned a softmax kernel";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kUnimplemented);
  }
}

// y = tanh(softmax(conv2d(x, w))) + normal(seed 5): conv2d, softmax and
// normal run on cpu; conv2d's output only feeds softmax, so it never leaves
// cpu.
ir::Graph placed_graph() {
  ir::Graph g("placed");
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({2, 3, 6, 6}));
  auto w = g.add_weight("w", SPORA_DTYPE_F32, S({4, 3, 3, 3}));
  Attrs pad;
  pad.set("padding", AttrValue::of_ints({1, 1}));
  auto c = g.add_op("conv2d", {x, w}, pad, {"model.py", 3})[0];
  Attrs axis;
  axis.set("axis", AttrValue::of_int(1));
  auto s = g.add_op("softmax", {c}, axis, {"model.py", 4})[0];
  auto t = g.add_op("tanh", {s}, {}, {"model.py", 5})[0];
  Attrs rnd;
  rnd.set("shape", AttrValue::of_ints({2, 4, 6, 6}));
  rnd.set("seed", AttrValue::of_int(5));
  auto n = g.add_op("normal", {}, rnd, {"model.py", 6})[0];
  auto y = g.add_op("add", {t, n}, {}, {"model.py", 7})[0];
  g.set_outputs({y, s});
  return g;
}

std::vector<Tensor> placed_params(Device* d) {
  return {f32_tensor(d, S({2, 3, 6, 6}), normal_values(S({2, 3, 6, 6}), 1)),
          f32_tensor(d, S({4, 3, 3, 3}), normal_values(S({4, 3, 3, 3}), 2))};
}

TEST(Placement, OpsWithoutKernelOrDecompositionRunOnCpuWithCopies) {
  Device* sim = device("sim");
  sched::Executable exe(placed_graph(), sim);
  // Which node runs where, as the plan's IR records it.
  std::set<std::string> on_cpu;
  for (const ir::Node& n : exe.graph().nodes()) {
    if (n.kind != ir::NodeKind::kApply) continue;
    if (n.device == "cpu:0") on_cpu.insert(n.op->name);
    else EXPECT_EQ(n.device, "sim:0") << n.op->name;
  }
  EXPECT_EQ(on_cpu, (std::set<std::string>{"conv2d", "softmax", "normal"}));
  EXPECT_EQ(exe.host_ops(), 3u);
  // In: x and w. Out: softmax (tanh and the output read it) and normal.
  // conv2d's output stays on cpu.
  EXPECT_EQ(exe.host_copies(), 4u);
  EXPECT_GT(exe.host_planned_bytes(), 0u);

  const std::vector<Tensor> params = placed_params(sim);
  const std::vector<Tensor> got = exe.run(ptrs(params));
  // Eager dispatch runs the same kernels on the same devices (its fallback
  // sends each op to cpu on its own): the numbers are identical.
  const std::vector<Tensor> eager = run_eager(placed_graph(), sim, ptrs(params));
  ASSERT_EQ(got.size(), 2u);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].device(), sim);
    EXPECT_EQ(read(got[i]), read(eager[i])) << "output " << i;
  }
  // And the whole graph on cpu agrees to rounding.
  Device* cpu = device("cpu");
  const std::vector<Tensor> cpu_params = placed_params(cpu);
  const std::vector<Tensor> want = sched::Executable(placed_graph(), cpu).run(ptrs(cpu_params));
  for (size_t i = 0; i < got.size(); ++i) {
    const auto a = read(got[i]), b = read(want[i]);
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k) ASSERT_NEAR(a[k], b[k], 1e-5f * (1 + std::fabs(b[k]))) << i << "/" << k;
  }
}

TEST(Placement, PlacedRunsDoNotWaitForTheDevice) {
  // The copies are asynchronous and the cpu kernels run from host callbacks
  // in stream order: a run queues everything and returns.
  Device* sim = device("sim");
  sched::Executable exe(placed_graph(), sim);
  const std::vector<Tensor> params = placed_params(sim);
  const auto first = read(exe.run(ptrs(params))[0]);
  const uint64_t before = sim->host_waits();
  std::vector<Tensor> again = exe.run(ptrs(params));
  EXPECT_EQ(sim->host_waits(), before);
  EXPECT_EQ(read(again[0]), first);
}

TEST(Placement, WhileBodyWithCpuOpsRunsEveryIteration) {
  // x <- 0.5 * x + softmax(x), five times: a nested plan with a cpu step,
  // its buffers ping-ponging between iterations.
  ir::Graph cond("cond"), body("body");
  cond.add_input("x", SPORA_DTYPE_F32, S({2, 5}));
  auto ci = cond.add_input("i", SPORA_DTYPE_I64, Shape());
  std::vector<uint8_t> five(8), one(8), half(4);
  const int64_t f = 5, o = 1;
  const float h = 0.5f;
  std::memcpy(five.data(), &f, 8);
  std::memcpy(one.data(), &o, 8);
  std::memcpy(half.data(), &h, 4);
  cond.set_outputs({cond.add_op("less", {ci, cond.add_constant(SPORA_DTYPE_I64, Shape(), five)}, {})[0]});
  auto bx = body.add_input("x", SPORA_DTYPE_F32, S({2, 5}));
  auto bi = body.add_input("i", SPORA_DTYPE_I64, Shape());
  auto sm = body.add_op("softmax", {bx}, {}, {"model.py", 12})[0];
  auto scaled = body.add_op("mul", {bx, body.add_constant(SPORA_DTYPE_F32, Shape(), half)}, {})[0];
  body.set_outputs({body.add_op("add", {scaled, sm}, {})[0],
                    body.add_op("add", {bi, body.add_constant(SPORA_DTYPE_I64, Shape(), one)}, {})[0]});
  ir::Graph g("loop");
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({2, 5}));
  auto zero = g.add_constant(SPORA_DTYPE_I64, Shape(), std::vector<uint8_t>(8, 0));
  g.set_outputs({g.add_while(cond, body, {x, zero}, {"model.py", 10})[0]});

  Device* sim = device("sim");
  const std::vector<float> xv = normal_values(S({2, 5}), 3);
  const Tensor xt = f32_tensor(sim, S({2, 5}), xv);
  sched::Executable exe(g, sim);
  const auto got = read(exe.run({&xt})[0]);
  // The loop by hand, in double.
  std::vector<double> ref(xv.begin(), xv.end());
  for (int it = 0; it < 5; ++it)
    for (int r = 0; r < 2; ++r) {
      double m = -1e300, sum = 0;
      for (int c = 0; c < 5; ++c) m = std::max(m, ref[r * 5 + c]);
      for (int c = 0; c < 5; ++c) sum += std::exp(ref[r * 5 + c] - m);
      std::vector<double> next(5);
      for (int c = 0; c < 5; ++c) next[c] = 0.5 * ref[r * 5 + c] + std::exp(ref[r * 5 + c] - m) / sum;
      for (int c = 0; c < 5; ++c) ref[r * 5 + c] = next[c];
    }
  for (size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], ref[k], 1e-5) << k;
  EXPECT_EQ(got, read(run_eager(g, sim, {&xt})[0]));
}

TEST(Placement, CpuOpsReadAndWriteViewsOfInputsAndOutputs) {
  // softmax (cpu) reads a reshape of the graph input and its output leaves
  // through another reshape; exp (sim) reads the input directly. A cpu op
  // of graph inputs only, and a graph output that is the cpu op's own.
  ir::Graph g("views");
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({2, 6}));
  Attrs to3, to2;
  to3.set("shape", AttrValue::of_ints({4, 3}));
  to2.set("shape", AttrValue::of_ints({-1}));
  auto v = g.add_op("reshape", {x}, to3, {})[0];
  auto s = g.add_op("softmax", {v}, {}, {"model.py", 2})[0];
  auto flat = g.add_op("reshape", {s}, to2, {})[0];
  auto e = g.add_op("exp", {x}, {})[0];
  auto direct = g.add_op("softmax", {e}, {}, {"model.py", 3})[0];
  g.set_outputs({flat, direct, x});
  Device* sim = device("sim");
  const std::vector<float> xv = normal_values(S({2, 6}), 4);
  const Tensor xt = f32_tensor(sim, S({2, 6}), xv);
  sched::Executable exe(g, sim);
  EXPECT_EQ(exe.host_ops(), 2u);
  EXPECT_EQ(exe.host_copies(), 4u);  // x in, e in; both softmaxes out
  const std::vector<Tensor> got = exe.run({&xt});
  const std::vector<Tensor> eager = run_eager(g, sim, {&xt});
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].shape, S({12}));
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(read(got[i]), read(eager[i])) << "output " << i;
  EXPECT_EQ(read(got[2]), xv);
  // Rows of 3 sum to one.
  const auto sm = read(got[0]);
  for (int r = 0; r < 4; ++r) EXPECT_NEAR(sm[r * 3] + sm[r * 3 + 1] + sm[r * 3 + 2], 1.f, 1e-6f) << r;
}

ir::Graph softmax_graph() {
  ir::Graph g("g");
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({2, 3}));
  g.set_outputs({g.add_op("softmax", {x}, {}, {"model.py", 7})[0]});
  return g;
}

TEST(Placement, FallbackDeviceLackingTheOpTooIsAnErrorNamingOpAndLine) {
  // The fallback device is sim:1, which lacks softmax as well.
  Device* sim0 = device("sim:0");
  Device* sim1 = device("sim:1");
  try {
    sched::place(softmax_graph(), sim0, sim1);
    FAIL() << "placed softmax";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kUnimplemented);
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("[softmax]", 0), 0u) << msg;
    EXPECT_NE(msg.find("it has no decomposition, and cpu lacks it too"), std::string::npos) << msg;
    EXPECT_NE(msg.find("(model.py:7)"), std::string::npos) << msg;
  }
  // Nothing else to fall back to.
  try {
    sched::place(softmax_graph(), sim0, sim0);
    FAIL() << "placed softmax";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kUnimplemented);
    EXPECT_NE(std::string(e.what()).find("(model.py:7)"), std::string::npos) << e.what();
  }
}

TEST(Placement, DeviceWithFallbackOffRunsOnlyItsOwnKernels) {
  // As the conformance kit sets it: no decomposition, no cpu.
  Device* sim = device("sim");
  sim->set_fallback(false);
  try {
    sched::Executable exe(softmax_graph(), sim);
    ADD_FAILURE() << "compiled softmax on sim without fallback";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kUnimplemented);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("SPORA_SIM_DISABLE_OPS"), std::string::npos) << msg;
    EXPECT_NE(msg.find("(model.py:7)"), std::string::npos) << msg;
  }
  sim->set_fallback(true);
  EXPECT_EQ(sched::Executable(softmax_graph(), sim).host_ops(), 1u);
}

TEST(Placement, DecompositionIsPreferredOverCpu) {
  // relu has a decomposition (maximum): it stays on the device even when
  // it is disabled; ops sim has stay on sim.
  ASSERT_TRUE(disabled_on_sim("relu"));
  ir::Graph g("g");
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({4}));
  g.set_outputs({g.add_op("exp", {g.add_op("relu", {x}, {})[0]}, {})[0]});
  const sched::Placement p = sched::place(g, device("sim"));
  EXPECT_EQ(p.host, nullptr);
  EXPECT_EQ(count_ops(p.graph, "relu"), 0u);
  EXPECT_EQ(count_ops(p.graph, "maximum"), 1u);
  for (size_t id = 0; id < p.graph.nodes().size(); ++id) {
    EXPECT_FALSE(p.on_host[id]);
    const ir::Node& n = p.graph.nodes()[id];
    if (n.kind == ir::NodeKind::kApply) EXPECT_EQ(n.device, "sim:0") << n.op->name;
  }
}

}  // namespace
}  // namespace spora
