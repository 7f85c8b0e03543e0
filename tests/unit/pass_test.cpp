// Before/after IR tests of each pass, and the pass manager's pipeline.
#include <gtest/gtest.h>

#include <cstring>

#include "ir/printer.h"
#include "ir_test_util.h"
#include "ir/verifier.h"
#include "passes/pass.h"
#include "runtime/context.h"
#include "runtime/device.h"
#include "support/error.h"

namespace spora {
namespace {

TEST(Passes, PipelineHasLevelsAndOrder) {
  EXPECT_TRUE(passes::pipeline(0).empty());
  std::vector<std::string> names;
  for (const auto& p : passes::pipeline(1)) names.push_back(p.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"shape_inference", "inline", "dce", "cse", "algebraic_simplify",
                                      "constant_folding", "epilogue_fusion"}));
  ir::Graph g;
  EXPECT_THROW(passes::optimize(g, 7), Error);
}

TEST(Passes, DceDropsUnusedNodesButKeepsInputs) {
  ir::Graph g;
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({2}));
  auto unused_in = g.add_input("unused", SPORA_DTYPE_F32, S({2}));
  auto dead = g.add_op("exp", {x}, {})[0];
  g.add_op("neg", {dead}, {});
  auto y = g.add_op("relu", {x}, {})[0];
  g.set_outputs({y});
  EXPECT_TRUE(run("dce", g));
  EXPECT_EQ(ir::to_text(g),
            "graph @main {\n  %0 = input \"x\" : f32[2]\n  %1 = input \"unused\" : f32[2]\n"
            "  %2 = relu(%0) : f32[2]\n  return %2\n}\n");
  EXPECT_FALSE(run("dce", g));
  (void)unused_in;
}

TEST(Passes, CseMergesIdenticalOpsAndConstants) {
  ir::Graph g;
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({2}));
  auto c1 = g.add_constant(SPORA_DTYPE_F32, S({2}), f32({1, 2}));
  auto c2 = g.add_constant(SPORA_DTYPE_F32, S({2}), f32({1, 2}));
  auto a = g.add_op("add", {x, c1}, {})[0];
  auto b = g.add_op("add", {x, c2}, {})[0];
  auto y = g.add_op("mul", {a, b}, {})[0];
  g.set_outputs({y});
  EXPECT_TRUE(run("cse", g));
  EXPECT_EQ(count_ops(g, "add"), 1u);
  const auto& mul = g.node(g.outputs()[0].node);
  EXPECT_EQ(mul.inputs[0], mul.inputs[1]);
}

// Equal attributes set in another order are the same attributes: CSE
// merges the two nodes, and the kernel cache hands out one kernel for them.
TEST(Passes, CseMergesOpsWhoseAttrsWereSetInAnotherOrder) {
  ir::Graph g;
  auto a = g.add_input("a", SPORA_DTYPE_F32, S({3, 2}));
  auto b = g.add_input("b", SPORA_DTYPE_F32, S({4, 3}));
  Attrs ab, ba;
  ab.set("transpose_a", AttrValue::of_bool(true));
  ab.set("transpose_b", AttrValue::of_bool(true));
  ba.set("transpose_b", AttrValue::of_bool(true));
  ba.set("transpose_a", AttrValue::of_bool(true));
  EXPECT_TRUE(ab == ba);
  EXPECT_EQ(ab.hash(), ba.hash());
  auto m1 = g.add_op("matmul", {a, b}, ab)[0];
  auto m2 = g.add_op("matmul", {a, b}, ba)[0];
  g.set_outputs({g.add_op("add", {m1, m2}, {})[0]});
  EXPECT_TRUE(run("cse", g));
  EXPECT_EQ(count_ops(g, "matmul"), 1u);
  const auto& add = g.node(g.outputs()[0].node);
  EXPECT_EQ(add.inputs[0], add.inputs[1]);
  // A value that differs still keeps them apart.
  Attrs other = ba;
  other.set("transpose_a", AttrValue::of_bool(false));
  EXPECT_FALSE(other == ab);

  Context ctx;
  ctx.add_plugin_path(SPORA_TEST_PLUGIN_DIR);
  Device* cpu = ctx.find_device("cpu");
  ASSERT_NE(cpu, nullptr);
  const OpDef* mm = OpRegistry::get().find("matmul");
  TensorMeta in[2] = {{SPORA_DTYPE_F32, S({3, 2})}, {SPORA_DTYPE_F32, S({4, 3})}};
  OpCall c1, c2;
  infer_call(*mm, in, 2, ab, c1);
  infer_call(*mm, in, 2, ba, c2);
  EXPECT_EQ(cpu->kernel(*mm, c1).get(), cpu->kernel(*mm, c2).get());
}

TEST(Passes, AlgebraicSimplifyRemovesIdentities) {
  ir::Graph g;
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({2, 3}));
  auto one = g.add_constant(SPORA_DTYPE_F32, S({}), f32({1}));
  auto zero = g.add_constant(SPORA_DTYPE_F32, S({3}), f32({0, 0, 0}));
  auto a = g.add_op("mul", {x, one}, {})[0];
  auto b = g.add_op("add", {zero, a}, {})[0];
  auto c = g.add_op("neg", {g.add_op("neg", {b}, {})[0]}, {})[0];
  Attrs t1, t2;
  t1.set("perm", AttrValue::of_ints({1, 0}));
  auto d = g.add_op("transpose", {g.add_op("transpose", {c}, t1)[0]}, t1)[0];
  g.set_outputs({d});
  EXPECT_TRUE(run("algebraic_simplify", g));
  run("dce", g);
  // Everything folds away to a merged identity transpose... which the next
  // round removes too.
  run("algebraic_simplify", g);
  run("dce", g);
  EXPECT_EQ(ir::to_text(g), "graph @main {\n  %0 = input \"x\" : f32[2,3]\n  return %0\n}\n");
}

TEST(Passes, AlgebraicSimplifyKeepsBroadcastingIdentities) {
  // x (3,) * ones (2,3) broadcasts: the result is (2,3), so it must stay.
  ir::Graph g;
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({3}));
  auto ones = g.add_constant(SPORA_DTYPE_F32, S({2, 3}), f32({1, 1, 1, 1, 1, 1}));
  g.set_outputs({g.add_op("mul", {x, ones}, {})[0]});
  EXPECT_FALSE(run("algebraic_simplify", g));
}

TEST(Passes, ConstantFoldingEvaluatesOnTheHost) {
  Context ctx;
  ctx.add_plugin_path(SPORA_TEST_PLUGIN_DIR);
  ctx.devices();  // loads the cpu plugin the pass evaluates on
  ir::Graph g;
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({2}));
  auto c = g.add_constant(SPORA_DTYPE_F32, S({2}), f32({0, 1}));
  auto e = g.add_op("exp", {c}, {}, {"model.py", 3})[0];
  g.set_outputs({g.add_op("add", {x, e}, {})[0]});
  EXPECT_TRUE(run("constant_folding", g));
  run("dce", g);
  EXPECT_EQ(count_ops(g, "exp"), 0u);
  const auto& add = g.node(g.outputs()[0].node);
  const auto& folded = g.node(add.inputs[1].node);
  ASSERT_EQ(folded.kind, ir::NodeKind::kConstant);
  float v[2];
  std::memcpy(v, folded.data->data(), 8);
  EXPECT_FLOAT_EQ(v[0], 1.0f);
  EXPECT_FLOAT_EQ(v[1], std::exp(1.0f));
  EXPECT_EQ(folded.loc.str(), "model.py:3");  // keeps the source location
}

}  // namespace
}  // namespace spora
