// The shape_inference pass: before/after IR when an input's shape changes,
// control flow, and errors that name the op and the source line.
#include <gtest/gtest.h>

#include "ir/printer.h"
#include "ir_test_util.h"
#include "passes/shape_inference.h"
#include "support/error.h"

namespace spora {
namespace {

void set_input_shape(ir::Graph& g, int32_t node, const Shape& s) { g.mutable_node(node).outputs[0].shape = s; }

TEST(ShapeInference, RetypesEveryNodeFromTheInputs) {
  ir::Graph g("net");
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({4, 8}));
  auto w = g.add_weight("w", SPORA_DTYPE_F32, S({8, 3}));
  auto h = g.add_op("matmul", {x, w}, {}, {"model.py", 2})[0];
  Attrs ax;
  ax.set("axes", AttrValue::of_ints({1}));
  auto s = g.add_op("sum", {h}, ax, {"model.py", 3})[0];
  Attrs flat;
  flat.set("shape", AttrValue::of_ints({-1}));
  auto f = g.add_op("reshape", {h}, flat, {"model.py", 4})[0];
  g.set_outputs({s, f});
  EXPECT_FALSE(run("shape_inference", g));  // types are current: nothing to do

  set_input_shape(g, x.node, S({2, 8}));
  EXPECT_EQ(ir::to_text(g),
            "graph @net {\n"
            "  %0 = input \"x\" : f32[2,8]\n"
            "  %1 = weight \"w\" : f32[8,3]\n"
            "  %2 = matmul(%0, %1) {transpose_a=false, transpose_b=false} : f32[4,3]  # model.py:2\n"
            "  %3 = sum(%2) {axes=[1], keepdims=false} : f32[4]  # model.py:3\n"
            "  %4 = reshape(%2) {shape=[-1]} : f32[12]  # model.py:4\n"
            "  return %3, %4\n"
            "}\n");
  EXPECT_TRUE(run("shape_inference", g));
  EXPECT_EQ(ir::to_text(g),
            "graph @net {\n"
            "  %0 = input \"x\" : f32[2,8]\n"
            "  %1 = weight \"w\" : f32[8,3]\n"
            "  %2 = matmul(%0, %1) {transpose_a=false, transpose_b=false} : f32[2,3]  # model.py:2\n"
            "  %3 = sum(%2) {axes=[1], keepdims=false} : f32[2]  # model.py:3\n"
            "  %4 = reshape(%2) {shape=[-1]} : f32[6]  # model.py:4\n"
            "  return %3, %4\n"
            "}\n");
  EXPECT_FALSE(run("shape_inference", g));
}

// if (c) then x * 2 else `other(x)`, over x f32[4].
ir::Graph if_graph(bool else_is_fixed) {
  ir::Graph then_g("then"), else_g("else");
  auto tx = then_g.add_input("x", SPORA_DTYPE_F32, S({4}));
  then_g.set_outputs({then_g.add_op("mul", {tx, tx}, {})[0]});
  auto ex = else_g.add_input("x", SPORA_DTYPE_F32, S({4}));
  if (else_is_fixed) {
    // Adds a constant of the built shape: only fits 4 elements.
    auto c = else_g.add_constant(SPORA_DTYPE_F32, S({4}), f32({1, 2, 3, 4}));
    else_g.set_outputs({else_g.add_op("add", {ex, c}, {})[0]});
  } else {
    else_g.set_outputs({else_g.add_op("neg", {ex}, {})[0]});
  }
  ir::Graph g("cf");
  auto c = g.add_input("c", SPORA_DTYPE_BOOL, Shape());
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({4}));
  auto r = g.add_if(c, then_g, else_g, {x}, {"model.py", 8});
  g.set_outputs({g.add_op("exp", {r[0]}, {})[0]});
  return g;
}

TEST(ShapeInference, RetypesControlFlowSubGraphs) {
  ir::Graph g = if_graph(false);
  const ir::Graph built = g;
  set_input_shape(g, 1, S({6}));
  EXPECT_TRUE(run("shape_inference", g));
  EXPECT_EQ(ir::to_text(g),
            "graph @cf {\n"
            "  %0 = input \"c\" : bool[]\n"
            "  %1 = input \"x\" : f32[6]\n"
            "  %2 = if(%0, %1) : f32[6]  # model.py:8\n"
            "    graph @then {\n"
            "      %0 = input \"x\" : f32[6]\n"
            "      %1 = mul(%0, %0) : f32[6]\n"
            "      return %1\n"
            "    }\n"
            "    graph @else {\n"
            "      %0 = input \"x\" : f32[6]\n"
            "      %1 = neg(%0) : f32[6]\n"
            "      return %1\n"
            "    }\n"
            "  %3 = exp(%2) : f32[6]\n"
            "  return %3\n"
            "}\n");
  // The sub-graphs were copied, not edited where the built graph shares them.
  EXPECT_EQ(built.node(2).subgraphs[0]->node(0).outputs[0].shape, S({4}));
}

TEST(ShapeInference, ErrorsNameTheOpAndTheSourceLine) {
  ir::Graph g("net");
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({4, 8}));
  auto w = g.add_weight("w", SPORA_DTYPE_F32, S({8, 3}));
  g.set_outputs({g.add_op("matmul", {x, w}, {}, {"model.py", 2})[0]});
  set_input_shape(g, x.node, S({4, 9}));
  try {
    passes::infer_shapes(g);
    FAIL() << "matmul accepted 9 features for 8";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("[matmul]", 0), 0u) << m;
    EXPECT_EQ(m.substr(m.size() - 12), "(model.py:2)") << m;
  }
  // Branches that no longer agree: the if's own line.
  ir::Graph cf = if_graph(true);
  set_input_shape(cf, 1, S({6}));
  try {
    passes::infer_shapes(cf);
    FAIL() << "the else branch added a (4,) constant to a (6,) value";
  } catch (const Error& e) {
    const std::string m = e.what();
    // The failing node inside the else graph has no line of its own.
    EXPECT_EQ(m.rfind("[add]", 0), 0u) << m;
    EXPECT_NE(m.find("(model.py:8)"), std::string::npos) << m;
  }
}

TEST(ShapeInference, LoopCarriedTypesMustNotChange) {
  // The body adds a (3,) constant: retyping the loop to (5,) breaks it.
  ir::Graph cond("cond"), body("body");
  auto cx = cond.add_input("x", SPORA_DTYPE_F32, S({3}));
  cond.set_outputs({cond.add_op("less", {cond.add_op("sum", {cx}, {})[0],
                                         cond.add_constant(SPORA_DTYPE_F32, Shape(), f32({10}))},
                                {})[0]});
  auto bx = body.add_input("x", SPORA_DTYPE_F32, S({3}));
  body.set_outputs({body.add_op("add", {bx, body.add_constant(SPORA_DTYPE_F32, S({3}), f32({1, 1, 1}))}, {},
                                {"body.py", 4})[0]});
  ir::Graph g("loop");
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({3}));
  g.set_outputs({g.add_while(cond, body, {x}, {"model.py", 5})[0]});
  set_input_shape(g, x.node, S({1}));
  // (1,) + (3,) broadcasts to (3,): the carried value would change type.
  try {
    passes::infer_shapes(g);
    FAIL() << "a loop-carried value changed type";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "[while] loop-carried value 0 is f32 (1,) but the body returns f32 (3,) for it (model.py:5)");
  }
  set_input_shape(g, x.node, S({5}));
  try {
    passes::infer_shapes(g);
    FAIL() << "(5,) + (3,)";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(body.py:4)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace spora
