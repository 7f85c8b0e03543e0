// Before/after IR tests of the mixed_precision pass
// (core/src/passes/mixed_precision.cpp).
#include <gtest/gtest.h>

#include <cstring>

#include "autodiff/grad.h"
#include "ir_test_util.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pass.h"
#include "support/error.h"

namespace spora {
namespace {

// No cast reads a cast (cast(cast(x))).
void expect_no_cast_chains(const ir::Graph& g) {
  for (const auto& n : g.nodes()) {
    if (n.kind != ir::NodeKind::kApply || n.op->name != "cast") continue;
    const auto& in = g.node(n.inputs[0].node);
    EXPECT_FALSE(in.kind == ir::NodeKind::kApply && in.op->name == "cast") << ir::to_text(g);
  }
}

// It changes numerics, so no opt level runs it: only run_pass by name.
TEST(MixedPrecision, RunsOnlyWhenAskedByName) {
  for (int level = 0; level <= 2; ++level)
    for (const auto& p : passes::pipeline(level)) EXPECT_NE(std::string(p.name), "mixed_precision");
  ir::Graph g;
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({128, 256}));
  auto w = g.add_weight("w", SPORA_DTYPE_F32, S({256, 256}));
  g.set_outputs({g.add_op("matmul", {x, w}, {})[0]});
  ir::Graph at2 = g;
  passes::optimize(at2, 2);
  EXPECT_EQ(ir::to_text(at2).find("bf16"), std::string::npos) << ir::to_text(at2);
  EXPECT_TRUE(passes::run_pass(g, "mixed_precision").changed);
  EXPECT_NE(ir::to_text(g).find("bf16"), std::string::npos) << ir::to_text(g);
  EXPECT_THROW(passes::run_pass(g, "no_such_pass"), Error);
}

TEST(MixedPrecision, LinearInBf16NormsAndLossesInF32) {
  // 2*128*256*256 flops over 525 KB of f32 operands: 32 flops/byte.
  ir::Graph g;
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({128, 256}));
  auto w = g.add_weight("w", SPORA_DTYPE_F32, S({256, 256}));
  auto b = g.add_weight("b", SPORA_DTYPE_F32, S({256}));
  Attrs ax;
  ax.set("axis", AttrValue::of_int(-1));
  auto h = g.add_op("linear", {x, w, b}, {})[0];
  auto p = g.add_op("softmax", {h}, ax)[0];
  g.set_outputs({g.add_op("sum", {p}, {})[0]});
  EXPECT_TRUE(run("mixed_precision", g));
  EXPECT_EQ(ir::to_text(g),
            "graph @main {\n  %0 = input \"x\" : f32[128,256]\n  %1 = weight \"w\" : f32[256,256]\n"
            "  %2 = weight \"b\" : f32[256]\n"
            "  %3 = cast(%0) {dtype=\"bf16\"} : bf16[128,256]\n"
            "  %4 = cast(%1) {dtype=\"bf16\"} : bf16[256,256]\n"
            "  %5 = cast(%2) {dtype=\"bf16\"} : bf16[256]\n"
            "  %6 = linear(%3, %4, %5) : bf16[128,256]\n"
            "  %7 = cast(%6) {dtype=\"f32\"} : f32[128,256]\n"
            "  %8 = softmax(%7) {axis=1} : f32[128,256]\n"
            "  %9 = sum(%8) {axes=[0, 1], keepdims=false} : f32[]\n"
            "  return %9\n}\n");
  EXPECT_FALSE(run("mixed_precision", g));  // nothing f32 left to convert
}

TEST(MixedPrecision, MemoryBoundProductsStayF32) {
  // A classifier head (256 -> 10) and a 1-channel conv: few flops per byte.
  ir::Graph g;
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({128, 256}));
  auto w = g.add_weight("w", SPORA_DTYPE_F32, S({10, 256}));
  auto b = g.add_weight("b", SPORA_DTYPE_F32, S({10}));
  auto img = g.add_input("img", SPORA_DTYPE_F32, S({64, 1, 28, 28}));
  auto k = g.add_weight("k", SPORA_DTYPE_F32, S({6, 1, 5, 5}));
  Attrs pad;
  pad.set("padding", AttrValue::of_ints({2, 2}));
  g.set_outputs({g.add_op("linear", {x, w, b}, {})[0], g.add_op("conv2d", {img, k}, pad)[0]});
  const std::string before = ir::to_text(g);
  EXPECT_FALSE(run("mixed_precision", g));
  EXPECT_EQ(ir::to_text(g), before);
}

TEST(MixedPrecision, ChainedLayersPassBf16StraightThrough) {
  ir::Graph g;
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({128, 256}));
  auto w1 = g.add_weight("w1", SPORA_DTYPE_F32, S({256, 256}));
  auto b1 = g.add_weight("b1", SPORA_DTYPE_F32, S({256}));
  Attrs relu;
  relu.set("activation", AttrValue::of_string("relu"));
  auto h1 = g.add_op("linear_act", {x, w1, b1}, relu)[0];
  auto h2 = g.add_op("linear_act", {h1, w1, b1}, relu)[0];  // same weights: cast once
  auto h3 = g.add_op("linear_add_act", {h2, w1, b1, h1}, relu)[0];
  g.set_outputs({h3});
  EXPECT_TRUE(run("mixed_precision", g));
  expect_no_cast_chains(g);
  // x, w1, b1 in; one f32 result out; the intermediate f32 copies are dropped.
  EXPECT_EQ(count_ops(g, "cast"), 4u) << ir::to_text(g);
  const auto& last = g.node(g.outputs()[0].node);
  EXPECT_EQ(last.op->name, "cast");
  const auto& fused = g.node(last.inputs[0].node);
  EXPECT_EQ(fused.op->name, "linear_add_act");
  EXPECT_EQ(fused.outputs[0].dtype, SPORA_DTYPE_BF16);
  EXPECT_EQ(g.node(fused.inputs[3].node).op->name, "linear_act");  // the bf16 residual itself
}

TEST(MixedPrecision, ReusesTheUsersBf16ValuesAndConvertsConstants) {
  ir::Graph g;
  auto xb = g.add_input("xb", SPORA_DTYPE_BF16, S({128, 256}));
  Attrs to32;
  to32.set("dtype", AttrValue::of_string("f32"));
  auto x = g.add_op("cast", {xb}, to32)[0];
  std::vector<uint8_t> ones(256 * 256 * 4);
  const float one = 1.0f;
  for (size_t i = 0; i < 256 * 256; ++i) std::memcpy(ones.data() + 4 * i, &one, 4);
  auto c = g.add_constant(SPORA_DTYPE_F32, S({256, 256}), ones);
  auto y = g.add_op("matmul", {x, c}, {})[0];
  g.set_outputs({y, g.add_op("exp", {x}, {})[0]});
  EXPECT_TRUE(run("mixed_precision", g));
  const auto& back = g.node(g.outputs()[0].node);
  const auto& mm = g.node(back.inputs[0].node);
  ASSERT_EQ(mm.op->name, "matmul");
  EXPECT_EQ(mm.inputs[0].node, xb.node);  // not cast(cast(xb))
  const auto& k = g.node(mm.inputs[1].node);
  ASSERT_EQ(k.kind, ir::NodeKind::kConstant);
  EXPECT_EQ(k.outputs[0].dtype, SPORA_DTYPE_BF16);
  uint16_t h;
  std::memcpy(&h, k.data->data(), 2);
  EXPECT_EQ(h, 0x3f80);  // 1.0 in bf16
  EXPECT_EQ(count_ops(g, "cast"), 2u);  // the user's (exp reads it) and the result's
}

TEST(MixedPrecision, LeavesOtherDtypesAndOps) {
  ir::Graph g;
  auto x = g.add_input("x", SPORA_DTYPE_F64, S({4, 6}));
  auto w = g.add_weight("w", SPORA_DTYPE_F64, S({5, 6}));
  auto b = g.add_weight("b", SPORA_DTYPE_F64, S({5}));
  auto y = g.add_input("y", SPORA_DTYPE_F32, S({4, 6}));
  g.set_outputs({g.add_op("linear", {x, w, b}, {})[0], g.add_op("relu", {y}, {})[0]});
  const std::string before = ir::to_text(g);
  EXPECT_FALSE(run("mixed_precision", g));
  EXPECT_EQ(ir::to_text(g), before);
}

TEST(MixedPrecision, TrainingGraphSharesWeightCastsBetweenForwardAndBackward) {
  ir::Graph g;
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({128, 256}));
  auto w = g.add_weight("w", SPORA_DTYPE_F32, S({256, 256}));
  auto b = g.add_weight("b", SPORA_DTYPE_F32, S({256}));
  auto w2 = g.add_weight("w2", SPORA_DTYPE_F32, S({128, 256}));
  auto b2 = g.add_weight("b2", SPORA_DTYPE_F32, S({128}));
  auto h = g.add_op("relu", {g.add_op("linear", {x, w, b}, {})[0]}, {})[0];
  auto o = g.add_op("linear", {h, w2, b2}, {})[0];
  g.set_outputs({g.add_op("sum", {g.add_op("mul", {o, o}, {})[0]}, {})[0]});
  ir::Graph gg = autodiff::value_and_grad(g, {w.node, b.node, w2.node, b2.node}, 0);
  run("epilogue_fusion", gg);
  EXPECT_TRUE(run("mixed_precision", gg));
  expect_no_cast_chains(gg);
  // Each weight is cast at most once, however many products read it.
  for (int32_t wid : {w.node, w2.node}) {
    size_t casts = 0;
    for (const auto& n : gg.nodes())
      casts += n.kind == ir::NodeKind::kApply && n.op->name == "cast" && n.inputs[0].node == wid;
    EXPECT_EQ(casts, 1u) << ir::to_text(gg);
  }
  // Every product runs in bf16; the reductions (bias gradients, loss) in f32.
  for (const auto& n : gg.nodes()) {
    if (n.kind != ir::NodeKind::kApply) continue;
    const std::string& op = n.op->name;
    if (op == "matmul" || op == "linear" || op == "linear_act") EXPECT_EQ(n.outputs[0].dtype, SPORA_DTYPE_BF16) << op;
    if (op == "sum") EXPECT_EQ(n.outputs[0].dtype, SPORA_DTYPE_F32);
  }
  for (const auto& v : gg.outputs()) EXPECT_EQ(gg.meta(v).dtype, SPORA_DTYPE_F32);
}

// A product's output read through a reshape by a later product: the bf16
// bytes are reshaped (exact), no f32 copy is cast back to bf16.
TEST(MixedPrecision, LooksThroughReshapesOfItsOwnF32Copies) {
  ir::Graph g;
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({64, 256}));
  auto w = g.add_weight("w", SPORA_DTYPE_F32, S({256, 256}));
  auto h = g.add_op("matmul", {x, w}, {})[0];
  Attrs shape;
  shape.set("shape", AttrValue::of_ints({256, 64}));
  auto r = g.add_op("reshape", {h}, shape)[0];
  auto y = g.add_op("matmul", {r, x}, {})[0];  // [256,64] @ [64,256]
  g.set_outputs({y});
  EXPECT_TRUE(run("mixed_precision", g));
  const auto& second = g.node(g.node(g.outputs()[0].node).inputs[0].node);
  ASSERT_EQ(second.op->name, "matmul") << ir::to_text(g);
  const auto& reshaped = g.node(second.inputs[0].node);
  EXPECT_EQ(reshaped.op->name, "reshape") << ir::to_text(g);
  EXPECT_EQ(reshaped.outputs[0].dtype, SPORA_DTYPE_BF16) << ir::to_text(g);
  EXPECT_EQ(g.node(reshaped.inputs[0].node).op->name, "matmul") << "reshapes the bf16 product itself";
  // x and w cast in, the result cast out; h's f32 copy has no reader left.
  EXPECT_EQ(count_ops(g, "cast"), 3u) << ir::to_text(g);
}

// A large f32 copy read once right away and again much later (as a
// backward pass does) is cast again just before the late reader.
TEST(MixedPrecision, LateReadersOfALargeF32CopyCastItAgain) {
  ir::Graph g;
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({512, 512}));
  auto w = g.add_weight("w", SPORA_DTYPE_F32, S({512, 512}));
  auto h = g.add_op("matmul", {x, w}, {})[0];  // 1 MiB in f32
  auto t = g.add_op("tanh", {h}, {})[0];
  for (int i = 0; i < 20; ++i) t = g.add_op("sin", {t}, {})[0];  // 20 nodes in between
  auto late = g.add_op("mul", {t, h}, {})[0];
  g.set_outputs({late});
  EXPECT_TRUE(run("mixed_precision", g));
  ASSERT_NO_THROW(ir::verify(g)) << ir::to_text(g);
  const auto& mul = g.node(g.outputs()[0].node);
  ASSERT_EQ(mul.op->name, "mul");
  const ir::Value late_copy = mul.inputs[1];
  const auto& cast = g.node(late_copy.node);
  EXPECT_EQ(cast.op->name, "cast");
  EXPECT_EQ(late_copy.node, g.outputs()[0].node - 1) << "made right before its reader:\n" << ir::to_text(g);
  EXPECT_EQ(g.meta(cast.inputs[0]).dtype, SPORA_DTYPE_BF16);
  EXPECT_EQ(count_ops(g, "cast"), 4u) << "x, w, the early copy for tanh, the late one";
}

}  // namespace
}  // namespace spora
