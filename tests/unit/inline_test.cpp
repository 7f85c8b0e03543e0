// The inline pass: before/after IR of constant ifs, whiles false on entry
// and nested sub-graphs, and compiled results unchanged by it.
#include <gtest/gtest.h>

#include "device_test_util.h"
#include "ir/printer.h"
#include "sched/executor.h"

namespace spora {
namespace {

ir::Value bool_const(ir::Graph& g, bool v) { return g.add_constant(SPORA_DTYPE_BOOL, Shape(), {uint8_t{v}}); }
ir::Value f32_const(ir::Graph& g, float v) { return g.add_constant(SPORA_DTYPE_F32, Shape(), f32({v})); }

// then: x * 2; else: x - 1 (both at model.py:20/21).
void branches(ir::Graph& then_g, ir::Graph& else_g, const Shape& s) {
  auto tx = then_g.add_input("x", SPORA_DTYPE_F32, s);
  then_g.set_outputs({then_g.add_op("mul", {tx, f32_const(then_g, 2)}, {}, {"model.py", 20})[0]});
  auto ex = else_g.add_input("x", SPORA_DTYPE_F32, s);
  else_g.set_outputs({else_g.add_op("sub", {ex, f32_const(else_g, 1)}, {}, {"model.py", 21})[0]});
}

TEST(Inline, ConstantIfBecomesTheTakenBranch) {
  ir::Graph then_g("then"), else_g("else");
  branches(then_g, else_g, S({3}));
  ir::Graph g("main");
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({3}));
  auto r = g.add_if(bool_const(g, false), then_g, else_g, {x}, {"model.py", 5});
  g.set_outputs({g.add_op("exp", {r[0]}, {})[0]});
  EXPECT_EQ(ir::to_text(g),
            "graph @main {\n"
            "  %0 = input \"x\" : f32[3]\n"
            "  %1 = constant 0x00 : bool[]\n"
            "  %2 = if(%1, %0) : f32[3]  # model.py:5\n"
            "    graph @then {\n"
            "      %0 = input \"x\" : f32[3]\n"
            "      %1 = constant 0x00000040 : f32[]\n"
            "      %2 = mul(%0, %1) : f32[3]  # model.py:20\n"
            "      return %2\n"
            "    }\n"
            "    graph @else {\n"
            "      %0 = input \"x\" : f32[3]\n"
            "      %1 = constant 0x0000803f : f32[]\n"
            "      %2 = sub(%0, %1) : f32[3]  # model.py:21\n"
            "      return %2\n"
            "    }\n"
            "  %3 = exp(%2) : f32[3]\n"
            "  return %3\n"
            "}\n");
  EXPECT_TRUE(run("inline", g));
  // The else branch's nodes, with their own source lines; the condition is
  // left for dce.
  EXPECT_EQ(ir::to_text(g),
            "graph @main {\n"
            "  %0 = input \"x\" : f32[3]\n"
            "  %1 = constant 0x00 : bool[]\n"
            "  %2 = constant 0x0000803f : f32[]\n"
            "  %3 = sub(%0, %2) : f32[3]  # model.py:21\n"
            "  %4 = exp(%3) : f32[3]\n"
            "  return %4\n"
            "}\n");
  EXPECT_FALSE(run("inline", g));
}

TEST(Inline, ConditionComputedFromConstantsCounts) {
  test_context().devices();  // the cpu device evaluates less(1, 2)
  ir::Graph then_g("then"), else_g("else");
  branches(then_g, else_g, S({2}));
  ir::Graph g("main");
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({2}));
  auto c = g.add_op("less", {f32_const(g, 1), f32_const(g, 2)}, {})[0];
  g.set_outputs({g.add_if(c, then_g, else_g, {x}, {"model.py", 5})[0]});
  EXPECT_TRUE(run("inline", g));
  EXPECT_EQ(count_ops(g, "mul"), 1u);
  EXPECT_EQ(count_ops(g, "sub"), 0u);
  for (const auto& n : g.nodes()) EXPECT_NE(n.kind, ir::NodeKind::kIf);
}

TEST(Inline, RuntimeConditionsStay) {
  ir::Graph then_g("then"), else_g("else");
  branches(then_g, else_g, S({2}));
  ir::Graph g("main");
  auto c = g.add_input("c", SPORA_DTYPE_BOOL, Shape());
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({2}));
  g.set_outputs({g.add_if(c, then_g, else_g, {x})[0]});
  const std::string before = ir::to_text(g);
  EXPECT_FALSE(run("inline", g));
  EXPECT_EQ(ir::to_text(g), before);
}

// while (i < limit) { i += 1; x *= 2 } from i = start.
ir::Graph counting_loop(double start, bool start_is_input) {
  ir::Graph cond("cond"), body("body");
  auto ci = cond.add_input("i", SPORA_DTYPE_F32, Shape());
  cond.add_input("x", SPORA_DTYPE_F32, S({2}));
  cond.set_outputs({cond.add_op("less", {ci, f32_const(cond, 3)}, {})[0]});
  auto bi = body.add_input("i", SPORA_DTYPE_F32, Shape());
  auto bx = body.add_input("x", SPORA_DTYPE_F32, S({2}));
  body.set_outputs({body.add_op("add", {bi, f32_const(body, 1)}, {})[0],
                    body.add_op("mul", {bx, f32_const(body, 2)}, {})[0]});
  ir::Graph g("main");
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({2}));
  auto i = start_is_input ? g.add_input("i", SPORA_DTYPE_F32, Shape()) : f32_const(g, static_cast<float>(start));
  auto r = g.add_while(cond, body, {i, x}, {"model.py", 9});
  g.set_outputs({g.add_op("neg", {r[1]}, {})[0], r[0]});
  return g;
}

TEST(Inline, WhileFalseOnEntryBecomesItsInputs) {
  test_context().devices();
  ir::Graph g = counting_loop(5, false);  // 5 < 3 is false: the body never runs
  EXPECT_TRUE(run("inline", g));
  EXPECT_EQ(ir::to_text(g),
            "graph @main {\n"
            "  %0 = input \"x\" : f32[2]\n"
            "  %1 = constant 0x0000a040 : f32[]\n"
            "  %2 = neg(%0) : f32[2]\n"
            "  return %2, %1\n"
            "}\n");
  // True on entry, or unknown until run time: the loop stays.
  ir::Graph runs = counting_loop(0, false), unknown = counting_loop(0, true);
  EXPECT_FALSE(run("inline", runs));
  EXPECT_FALSE(run("inline", unknown));
}

TEST(Inline, NestedSubGraphsAreInlined) {
  // outer: if (c: runtime) then { if (true) then {x*2} else {x-1} } else {-x}
  ir::Graph inner_then("inner_then"), inner_else("inner_else");
  branches(inner_then, inner_else, S({2}));
  ir::Graph then_g("then"), else_g("else");
  auto tx = then_g.add_input("x", SPORA_DTYPE_F32, S({2}));
  then_g.set_outputs({then_g.add_if(bool_const(then_g, true), inner_then, inner_else, {tx}, {"model.py", 31})[0]});
  auto ex = else_g.add_input("x", SPORA_DTYPE_F32, S({2}));
  else_g.set_outputs({else_g.add_op("neg", {ex}, {})[0]});
  ir::Graph g("main");
  auto c = g.add_input("c", SPORA_DTYPE_BOOL, Shape());
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({2}));
  g.set_outputs({g.add_if(c, then_g, else_g, {x}, {"model.py", 30})[0]});
  EXPECT_TRUE(run("inline", g));
  const ir::Graph& outer_then = *g.node(2).subgraphs[0];
  EXPECT_EQ(ir::to_text(outer_then),
            "graph @then {\n"
            "  %0 = input \"x\" : f32[2]\n"
            "  %1 = constant 0x01 : bool[]\n"
            "  %2 = constant 0x00000040 : f32[]\n"
            "  %3 = mul(%0, %2) : f32[2]  # model.py:20\n"
            "  return %3\n"
            "}\n");

  // A constant if whose branch holds an if on that branch's input: once
  // spliced, the inner condition is the outer constant, and goes too.
  ir::Graph pass_then("pass_then"), pass_else("pass_else");
  auto pc = pass_then.add_input("c", SPORA_DTYPE_BOOL, Shape());
  auto px = pass_then.add_input("x", SPORA_DTYPE_F32, S({2}));
  pass_then.set_outputs({pass_then.add_if(pc, inner_then, inner_else, {px}, {"model.py", 41})[0]});
  pass_else.add_input("c", SPORA_DTYPE_BOOL, Shape());
  pass_else.set_outputs({pass_else.add_input("x", SPORA_DTYPE_F32, S({2}))});
  ir::Graph h("main");
  auto hx = h.add_input("x", SPORA_DTYPE_F32, S({2}));
  auto k = bool_const(h, false);
  h.set_outputs({h.add_if(bool_const(h, true), pass_then, pass_else, {k, hx}, {"model.py", 40})[0]});
  EXPECT_TRUE(run("inline", h));
  EXPECT_EQ(count_ops(h, "sub"), 1u);
  EXPECT_EQ(count_ops(h, "mul"), 0u);
  for (const auto& n : h.nodes()) EXPECT_NE(n.kind, ir::NodeKind::kIf);
}

TEST(Inline, CompiledResultsAreUnchanged) {
  // Constant if, a while false on entry, a loop that runs and one on a
  // runtime condition, optimised at O1 (inline included) or not at all.
  test_context().devices();  // the cpu device evaluates the loop's condition
  auto build = [] {
    ir::Graph then_g("then"), else_g("else");
    branches(then_g, else_g, S({2}));
    ir::Graph g = counting_loop(5, false);
    auto x = ir::Value{0, 0};
    auto y = g.add_if(bool_const(g, true), then_g, else_g, {x}, {"model.py", 50})[0];
    ir::Graph loop = counting_loop(0, true);
    auto i = g.add_input("i", SPORA_DTYPE_F32, Shape());
    std::vector<ir::Value> outs = g.outputs();
    const ir::Node* w = nullptr;
    for (const auto& n : loop.nodes())
      if (n.kind == ir::NodeKind::kWhile) w = &n;
    auto r = g.add_while(*w->subgraphs[0], *w->subgraphs[1], {i, y}, {"model.py", 51});
    outs.push_back(r[1]);
    g.set_outputs(outs);
    return g;
  };
  ir::Graph plain = build(), optimised = build();
  passes::optimize(optimised, 1);
  for (const auto& n : optimised.nodes())
    if (n.kind == ir::NodeKind::kIf) ADD_FAILURE() << "a constant if survived O1";
  size_t whiles = 0;
  for (const auto& n : optimised.nodes()) whiles += n.kind == ir::NodeKind::kWhile;
  EXPECT_EQ(whiles, 1u);  // only the loop on the runtime input
  for (const char* name : {"cpu", "sim"}) {
    Device* d = device(name);
    const Tensor x = f32_tensor(d, S({2}), {1.5f, -2.f}), i = f32_tensor(d, Shape(), {1.f});
    const auto a = sched::Executable(plain, d).run({&x, &i});
    const auto b = sched::Executable(optimised, d).run({&x, &i});
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k) EXPECT_EQ(read(a[k]), read(b[k])) << name << " output " << k;
    // x*2 doubled twice more by the runtime loop (i = 1, 2).
    EXPECT_EQ(read(b[2]), (std::vector<float>{12.f, -16.f}));
    EXPECT_EQ(read(b[0]), (std::vector<float>{-1.5f, 2.f}));
  }
}

}  // namespace
}  // namespace spora
