// Before/after IR tests of the epilogue_fusion pass and the fused ops'
// inference (core/src/passes/epilogue_fusion.cpp, core/src/ops/epilogue.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "autodiff/grad.h"
#include "ir_test_util.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pass.h"
#include "support/error.h"

namespace spora {
namespace {

Attrs with(const char* name, AttrValue v) {
  Attrs a;
  a.set(name, std::move(v));
  return a;
}

TEST(EpilogueFusion, RunsAtLevelOneBeforeElementwiseFusion) {
  bool at_one = false;
  for (const auto& p : passes::pipeline(1)) at_one = at_one || std::string(p.name) == "epilogue_fusion";
  EXPECT_TRUE(at_one);
  std::vector<std::string> l2;
  for (const auto& p : passes::pipeline(2)) l2.push_back(p.name);
  const auto ep = std::find(l2.begin(), l2.end(), "epilogue_fusion");
  const auto ew = std::find(l2.begin(), l2.end(), "elementwise_fusion");
  ASSERT_NE(ew, l2.end());
  EXPECT_LT(ep, ew);
}

TEST(EpilogueFusion, LinearRelu) {
  ir::Graph g;
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({4, 6}));
  auto w = g.add_weight("w", SPORA_DTYPE_F32, S({5, 6}));
  auto b = g.add_weight("b", SPORA_DTYPE_F32, S({5}));
  auto h = g.add_op("linear", {x, w, b}, {}, {"model.py", 7})[0];
  g.set_outputs({g.add_op("relu", {h}, {})[0]});
  EXPECT_TRUE(run("epilogue_fusion", g));
  EXPECT_EQ(ir::to_text(g),
            "graph @main {\n  %0 = input \"x\" : f32[4,6]\n  %1 = weight \"w\" : f32[5,6]\n"
            "  %2 = weight \"b\" : f32[5]\n"
            "  %3 = linear_act(%0, %1, %2) {activation=\"relu\"} : f32[4,5]  # model.py:7\n"
            "  return %3\n}\n");  // the layer's line
  EXPECT_FALSE(run("epilogue_fusion", g));
}

TEST(EpilogueFusion, ConvBiasResidualReluInResNetOrder) {
  ir::Graph g;
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({2, 4, 8, 8}));
  auto w = g.add_weight("w", SPORA_DTYPE_F32, S({4, 4, 3, 3}));
  auto b = g.add_weight("b", SPORA_DTYPE_F32, S({4}));
  auto c = g.add_op("conv2d_bias", {x, w, b}, with("padding", AttrValue::of_ints({1, 1})))[0];
  // shortcut + conv (operands in either order)
  auto s = g.add_op("add", {x, c}, {})[0];
  g.set_outputs({g.add_op("relu", {s}, {})[0]});
  EXPECT_TRUE(run("epilogue_fusion", g));
  EXPECT_EQ(ir::to_text(g),
            "graph @main {\n  %0 = input \"x\" : f32[2,4,8,8]\n  %1 = weight \"w\" : f32[4,4,3,3]\n"
            "  %2 = weight \"b\" : f32[4]\n"
            "  %3 = conv2d_add_act(%0, %1, %2, %0) {activation=\"relu\", dilation=[1, 1], groups=1, "
            "pad_mode=\"explicit\", padding=[1, 1, 1, 1], stride=[1, 1]} : f32[2,4,8,8]\n  return %3\n}\n");
}

TEST(EpilogueFusion, ResidualWithoutActivationAndGeluForms) {
  ir::Graph g;
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({2, 3, 6}));
  auto r = g.add_input("r", SPORA_DTYPE_F32, S({2, 3, 5}));
  auto w = g.add_weight("w", SPORA_DTYPE_F32, S({5, 6}));
  auto b = g.add_weight("b", SPORA_DTYPE_F32, S({5}));
  auto y1 = g.add_op("add", {g.add_op("linear", {x, w, b}, {})[0], r}, {})[0];
  auto y2 = g.add_op("gelu", {g.add_op("linear", {x, w, b}, {})[0]},
                     with("approximate", AttrValue::of_string("tanh")))[0];
  auto y3 = g.add_op("gelu", {g.add_op("linear", {x, w, b}, {})[0]}, {})[0];
  g.set_outputs({y1, y2, y3, g.add_op("neg", {y1}, {})[0]});  // y1 has two readers: fine, it is the fused output
  EXPECT_TRUE(run("epilogue_fusion", g));
  EXPECT_EQ(count_ops(g, "linear"), 0u);
  EXPECT_EQ(count_ops(g, "add"), 0u);
  EXPECT_EQ(count_ops(g, "gelu"), 0u);
  const auto& n1 = g.node(g.outputs()[0].node);
  EXPECT_EQ(n1.op->name, "linear_add_act");
  EXPECT_EQ(n1.attrs.find("activation")->s, "none");
  EXPECT_EQ(n1.outputs[0].shape, S({2, 3, 5}));
  EXPECT_EQ(g.node(g.outputs()[1].node).attrs.find("activation")->s, "gelu_tanh");
  EXPECT_EQ(g.node(g.outputs()[2].node).attrs.find("activation")->s, "gelu");
}

TEST(EpilogueFusion, LeavesSharedIntermediatesAndBroadcastingAdds) {
  ir::Graph g;
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({4, 6}));
  auto w = g.add_weight("w", SPORA_DTYPE_F32, S({5, 6}));
  auto b = g.add_weight("b", SPORA_DTYPE_F32, S({5}));
  auto row = g.add_input("row", SPORA_DTYPE_F32, S({5}));
  // pre-activation is also an output: the fused op would not produce it.
  auto h = g.add_op("linear", {x, w, b}, {})[0];
  auto a = g.add_op("relu", {h}, {})[0];
  // the add broadcasts a row: stays (the fused residual must match exactly).
  auto h2 = g.add_op("linear", {x, w, b}, {})[0];
  auto s = g.add_op("add", {h2, row}, {})[0];
  // two readers of the pre-activation besides a relu.
  auto h3 = g.add_op("linear", {x, w, b}, {})[0];
  auto t = g.add_op("sigmoid", {h3}, {})[0];
  auto e = g.add_op("exp", {h3}, {})[0];
  g.set_outputs({h, a, s, t, e});
  const std::string before = ir::to_text(g);
  EXPECT_FALSE(run("epilogue_fusion", g));
  EXPECT_EQ(ir::to_text(g), before);
}

TEST(EpilogueFusion, TwoLinearsIntoOneAddFuseOnce) {
  ir::Graph g;
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({4, 6}));
  auto w = g.add_weight("w", SPORA_DTYPE_F32, S({5, 6}));
  auto b = g.add_weight("b", SPORA_DTYPE_F32, S({5}));
  auto p = g.add_op("linear", {x, w, b}, {})[0];
  auto q = g.add_op("linear", {x, w, b}, {})[0];
  g.set_outputs({g.add_op("tanh", {g.add_op("add", {p, q}, {})[0]}, {})[0]});
  EXPECT_TRUE(run("epilogue_fusion", g));
  EXPECT_EQ(count_ops(g, "linear"), 1u);
  EXPECT_EQ(count_ops(g, "linear_add_act"), 1u);
  EXPECT_EQ(count_ops(g, "tanh"), 0u);
}

// relu's gradient reads its input (greater(pre, 0)); the pass points that at
// the relu's output so that training graphs fuse too.
TEST(EpilogueFusion, TrainingGraphReluMaskReadsTheFusedOutput) {
  ir::Graph g;
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({4, 6}));
  auto w = g.add_weight("w", SPORA_DTYPE_F32, S({5, 6}));
  auto b = g.add_weight("b", SPORA_DTYPE_F32, S({5}));
  auto y = g.add_op("relu", {g.add_op("linear", {x, w, b}, {})[0]}, {})[0];
  g.set_outputs({g.add_op("sum", {g.add_op("mul", {y, y}, {})[0]}, {})[0]});
  ir::Graph gg = autodiff::value_and_grad(g, {w.node, b.node}, 0);
  ASSERT_EQ(count_ops(gg, "greater"), 1u);
  EXPECT_TRUE(run("epilogue_fusion", gg));
  EXPECT_EQ(count_ops(gg, "linear"), 0u);
  EXPECT_EQ(count_ops(gg, "relu"), 0u);
  int32_t fused = -1;
  for (size_t i = 0; i < gg.nodes().size(); ++i) {
    const auto& n = gg.nodes()[i];
    if (n.kind != ir::NodeKind::kApply) continue;
    if (n.op->name == "linear_act") fused = static_cast<int32_t>(i);
    if (n.op->name == "greater") EXPECT_EQ(n.inputs[0].node, fused);
  }
  EXPECT_GE(fused, 0);
}

TEST(EpilogueFusion, GeluInTrainingStaysUnfused) {
  // gelu's gradient needs the pre-activation itself.
  ir::Graph g;
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({4, 6}));
  auto w = g.add_weight("w", SPORA_DTYPE_F32, S({5, 6}));
  auto b = g.add_weight("b", SPORA_DTYPE_F32, S({5}));
  auto y = g.add_op("gelu", {g.add_op("linear", {x, w, b}, {})[0]}, {})[0];
  g.set_outputs({g.add_op("sum", {y}, {})[0]});
  ir::Graph gg = autodiff::value_and_grad(g, {w.node}, 0);
  run("epilogue_fusion", gg);
  EXPECT_EQ(count_ops(gg, "linear_act"), 0u);
}

TEST(EpilogueOps, InferenceChecksActivationAndResidual) {
  ir::Graph g;
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({2, 3, 6}));
  auto w = g.add_weight("w", SPORA_DTYPE_F32, S({5, 6}));
  auto b = g.add_weight("b", SPORA_DTYPE_F32, S({5}));
  auto r = g.add_input("r", SPORA_DTYPE_F32, S({2, 3, 5}));
  auto bad_r = g.add_input("bad", SPORA_DTYPE_F32, S({5}));
  auto y = g.add_op("linear_add_act", {x, w, b, r}, with("activation", AttrValue::of_string("relu")))[0];
  EXPECT_EQ(g.meta(y).shape, S({2, 3, 5}));
  try {
    g.add_op("linear_act", {x, w, b}, with("activation", AttrValue::of_string("swish")));
    ADD_FAILURE() << "accepted an unknown activation";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[linear_act] activation must be"), std::string::npos) << e.what();
  }
  try {
    g.add_op("linear_add_act", {x, w, b, bad_r}, {});
    ADD_FAILURE() << "accepted a broadcasting residual";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("residual has shape (5,)"), std::string::npos) << e.what();
  }
  // The base op's checks name the fused op.
  auto wbad = g.add_weight("wbad", SPORA_DTYPE_F32, S({5, 7}));
  try {
    g.add_op("linear_act", {x, wbad, b}, {});
    ADD_FAILURE() << "accepted mismatched features";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[linear_act]"), std::string::npos) << e.what();
  }
  auto cx = g.add_input("cx", SPORA_DTYPE_F32, S({1, 3, 7, 7}));
  auto cw = g.add_weight("cw", SPORA_DTYPE_F32, S({4, 3, 3, 3}));
  auto cb = g.add_weight("cb", SPORA_DTYPE_F32, S({4}));
  Attrs a = with("pad_mode", AttrValue::of_string("same"));
  a.set("activation", AttrValue::of_string("sigmoid"));
  auto cy = g.add_op("conv2d_act", {cx, cw, cb}, a)[0];
  EXPECT_EQ(g.meta(cy).shape, S({1, 4, 7, 7}));
  EXPECT_EQ(g.node(cy.node).attrs.find("pad_mode")->s, "explicit");  // canonical, like conv2d_bias
}

}  // namespace
}  // namespace spora
