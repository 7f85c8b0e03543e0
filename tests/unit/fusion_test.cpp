// fused_elementwise and the elementwise_fusion pass: before/after IR of the
// pass, the op's program validation, its decomposition and gradient, and
// fused graphs against unfused ones on every device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "autodiff/grad.h"
#include "ir_test_util.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "ops/decompose.h"
#include "ops/fused.h"
#include "passes/pass.h"
#include "runtime/context.h"
#include "runtime/device.h"
#include "sched/executor.h"
#include "support/error.h"

namespace spora {
namespace {

constexpr DType F32 = SPORA_DTYPE_F32;

ir::Value scalar(ir::Graph& g, float v) {
  std::vector<uint8_t> b(4);
  std::memcpy(b.data(), &v, 4);
  return g.add_constant(F32, S({}), b);
}

bool fuse(ir::Graph& g) {
  for (const auto& p : passes::pipeline(2))
    if (std::string(p.name) == "elementwise_fusion") {
      const bool changed = p.run(g, passes::PassContext::defaults());
      ir::verify(g);
      return changed;
    }
  ADD_FAILURE() << "no elementwise_fusion pass";
  return false;
}

const ir::Node* first_op(const ir::Graph& g, const std::string& op) {
  for (const auto& node : g.nodes())
    if (node.kind == ir::NodeKind::kApply && node.op->name == op) return &node;
  return nullptr;
}

std::string program(const ir::Node* n) { return n ? n->attrs.find("program")->s : "<none>"; }

Attrs prog_attrs(const std::string& p) {
  Attrs a;
  a.set("program", AttrValue::of_string(p));
  return a;
}

TEST(Fusion, PipelineRunsItAtLevelTwoAfterConstantFolding) {
  std::vector<std::string> l1, l2;
  for (const auto& p : passes::pipeline(1)) l1.push_back(p.name);
  for (const auto& p : passes::pipeline(2)) l2.push_back(p.name);
  EXPECT_EQ(std::find(l1.begin(), l1.end(), "elementwise_fusion"), l1.end());
  auto cf = std::find(l2.begin(), l2.end(), "constant_folding"), ef = std::find(l2.begin(), l2.end(), "elementwise_fusion");
  ASSERT_NE(ef, l2.end());
  EXPECT_LT(cf, ef);
}

TEST(Fusion, ChainBecomesOneNode) {
  // sigmoid(x) * x + 1
  ir::Graph g;
  auto x = g.add_input("x", F32, S({4, 8}));
  auto s = g.add_op("sigmoid", {x}, {}, {"model.py", 1})[0];
  auto m = g.add_op("mul", {s, x}, {}, {"model.py", 2})[0];
  auto y = g.add_op("add", {m, scalar(g, 1.0f)}, {}, {"model.py", 3})[0];
  g.set_outputs({y});
  EXPECT_TRUE(fuse(g));
  EXPECT_EQ(ir::to_text(g),
            "graph @main {\n  %0 = input \"x\" : f32[4,8]\n"
            "  %1 = fused_elementwise(%0) {program=\"in0 sigmoid; t0 in0 mul; t1 c:1 add\"} : f32[4,8]  # model.py:3\n"
            "  return %1\n}\n");
  EXPECT_FALSE(fuse(g));  // a single node: nothing more to fuse
}

TEST(Fusion, ReluBackwardKeepsBoolInside) {
  // where(x > 0, dy, 0): the bool mask never leaves the kernel.
  ir::Graph g;
  auto x = g.add_input("x", F32, S({3, 5}));
  auto dy = g.add_input("dy", F32, S({3, 5}));
  auto zero = scalar(g, 0.0f);
  auto mask = g.add_op("greater", {x, zero}, {})[0];
  g.set_outputs({g.add_op("where", {mask, dy, zero}, {})[0]});
  EXPECT_TRUE(fuse(g));
  EXPECT_EQ(count_ops(g, "fused_elementwise"), 1u);
  EXPECT_EQ(g.nodes().size(), 3u);  // x, dy, the fused node: the constant is a literal now
  EXPECT_EQ(program(first_op(g, "fused_elementwise")), "in0 c:0 greater; t0 in1 c:0 where");
}

TEST(Fusion, StopsAtValuesReadElsewhereAndAtGraphOutputs) {
  ir::Graph g;
  auto x = g.add_input("x", F32, S({6}));
  auto e = g.add_op("exp", {x}, {})[0];             // read by two groups
  auto a = g.add_op("neg", {g.add_op("mul", {e, e}, {})[0]}, {})[0];
  auto o = g.add_op("abs", {x}, {})[0];             // a graph output
  auto b = g.add_op("add", {g.add_op("sqrt", {e}, {})[0], o}, {})[0];
  g.set_outputs({a, b, o});
  EXPECT_TRUE(fuse(g));
  // exp and abs stay; {mul, neg} and {sqrt, add} fuse.
  EXPECT_EQ(count_ops(g, "exp"), 1u);
  EXPECT_EQ(count_ops(g, "abs"), 1u);
  EXPECT_EQ(count_ops(g, "fused_elementwise"), 2u);
  std::vector<std::string> progs;
  for (const auto& n : g.nodes())
    if (n.kind == ir::NodeKind::kApply && n.op->name == "fused_elementwise") progs.push_back(program(&n));
  EXPECT_EQ(progs, (std::vector<std::string>{"in0 in0 mul; t0 neg", "in0 sqrt; t0 in1 add"}));
}

TEST(Fusion, DagWithSharedIntermediateFuses) {
  // e = exp(x) is read twice, both times inside the group.
  ir::Graph g;
  auto x = g.add_input("x", F32, S({2, 3}));
  auto e = g.add_op("exp", {x}, {})[0];
  auto s = g.add_op("sin", {x}, {})[0];
  auto c = g.add_op("add", {e, s}, {})[0];
  g.set_outputs({g.add_op("mul", {c, e}, {})[0]});
  EXPECT_TRUE(fuse(g));
  EXPECT_EQ(g.nodes().size(), 2u);
  EXPECT_EQ(program(first_op(g, "fused_elementwise")), "in0 exp; in0 sin; t0 t1 add; t2 t0 mul");
}

TEST(Fusion, StopsAtOtherOpsShapesAndDtypes) {
  ir::Graph g;
  auto a = g.add_input("a", F32, S({4, 8}));
  auto w = g.add_input("w", F32, S({8, 8}));
  auto bias = g.add_input("bias", F32, S({8}));
  auto row = g.add_input("row", F32, S({1, 8}));
  auto mm = g.add_op("matmul", {a, w}, {})[0];
  // exp(row) has shape (1,8): fusing it would recompute it for every row.
  auto r = g.add_op("exp", {row}, {})[0];
  auto h = g.add_op("relu", {g.add_op("add", {mm, bias}, {})[0]}, {})[0];
  auto y = g.add_op("mul", {h, r}, {})[0];
  Attrs to64;
  to64.set("dtype", AttrValue::of_string("f64"));
  auto z = g.add_op("cast", {y}, to64)[0];
  auto zz = g.add_op("square", {g.add_op("neg", {z}, {})[0]}, {})[0];
  g.set_outputs({zz});
  EXPECT_TRUE(fuse(g));
  EXPECT_EQ(count_ops(g, "matmul"), 1u);
  EXPECT_EQ(count_ops(g, "exp"), 1u);
  EXPECT_EQ(count_ops(g, "cast"), 1u);
  ASSERT_EQ(count_ops(g, "fused_elementwise"), 2u);
  std::vector<std::string> progs;
  for (const auto& n : g.nodes())
    if (n.kind == ir::NodeKind::kApply && n.op->name == "fused_elementwise") {
      progs.push_back(program(&n));
      if (progs.size() == 1) {
        // inputs: matmul's result, bias (broadcast), exp(row)
        ASSERT_EQ(n.inputs.size(), 3u);
        EXPECT_EQ(g.node(n.inputs[0].node).op->name, "matmul");
        EXPECT_EQ(g.node(n.inputs[2].node).op->name, "exp");
      } else {
        EXPECT_EQ(n.outputs[0].dtype, SPORA_DTYPE_F64);
      }
    }
  EXPECT_EQ(progs, (std::vector<std::string>{"in0 in1 add; t0 relu; t1 in2 mul", "in0 neg; t0 square"}));
}

TEST(Fusion, IntegerOpsAreLeftAlone) {
  ir::Graph g;
  auto x = g.add_input("x", SPORA_DTYPE_I32, S({5}));
  g.set_outputs({g.add_op("neg", {g.add_op("abs", {x}, {})[0]}, {})[0]});
  EXPECT_FALSE(fuse(g));
}

TEST(Fusion, KeepsAttributesAndNonDefaultsOnly) {
  ir::Graph g;
  auto x = g.add_input("x", F32, S({7}));
  Attrs lr, cl, ge;
  lr.set("alpha", AttrValue::of_float(0.25));
  cl.set("max", AttrValue::of_float(6));
  ge.set("approximate", AttrValue::of_string("tanh"));
  auto a = g.add_op("leaky_relu", {x}, lr)[0];
  auto b = g.add_op("clip", {a}, cl)[0];
  g.set_outputs({g.add_op("gelu", {b}, ge)[0]});
  EXPECT_TRUE(fuse(g));
  EXPECT_EQ(program(first_op(g, "fused_elementwise")),
            "in0 leaky_relu alpha=0.25; t0 clip max=6; t1 gelu approximate=tanh");
}

TEST(Fusion, ExactGeluStaysUnfused) {
  // The cpu runs gelu's erf form with oneDNN's vectorised erf; a fused
  // block would call scalar erfc.
  ir::Graph g;
  auto x = g.add_input("x", F32, S({7}));
  g.set_outputs({g.add_op("mul", {g.add_op("gelu", {x}, {})[0], x}, {})[0]});
  EXPECT_FALSE(fuse(g));
}

TEST(Fusion, AtMostSixteenInputs) {
  ir::Graph g;
  ir::Value acc = g.add_input("x0", F32, S({3}));
  for (int i = 1; i < 24; ++i) acc = g.add_op("add", {acc, g.add_input("x" + std::to_string(i), F32, S({3}))}, {})[0];
  g.set_outputs({acc});
  EXPECT_TRUE(fuse(g));
  size_t fused = 0;
  for (const auto& n : g.nodes())
    if (n.kind == ir::NodeKind::kApply) {
      EXPECT_LE(n.inputs.size(), 16u);
      fused += n.op->name == "fused_elementwise";
    }
  EXPECT_EQ(fused, 2u);  // 15 adds read 16 inputs; the other 8 adds read the rest
  EXPECT_EQ(count_ops(g, "add"), 0u);
}

TEST(Fusion, RankCarriedByAOneElementConstant) {
  // x (4) + c (1,1) has shape (1,4): as a rank-0 literal the constant would
  // lose the leading dim, so it stays an input.
  ir::Graph g;
  auto x = g.add_input("x", F32, S({4}));
  std::vector<uint8_t> one(4);
  const float v = 2.0f;
  std::memcpy(one.data(), &v, 4);
  auto c = g.add_constant(F32, S({1, 1}), one);
  auto a = g.add_op("add", {x, c}, {})[0];
  g.set_outputs({g.add_op("mul", {a, a}, {})[0]});
  EXPECT_TRUE(fuse(g));
  const ir::Node* f = first_op(g, "fused_elementwise");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->outputs[0].shape, S({1, 4}));
  EXPECT_EQ(f->inputs.size(), 2u);
  EXPECT_EQ(program(f), "in0 in1 add; t0 t0 mul");
}

TEST(Fusion, OptimizeAtLevelTwoFusesAndCleansUp) {
  ir::Graph g;
  auto x = g.add_input("x", F32, S({16}));
  auto y = g.add_op("mul", {g.add_op("tanh", {x}, {})[0], scalar(g, 0.5f)}, {})[0];
  g.add_op("exp", {y}, {});  // dead
  g.set_outputs({y});
  passes::optimize(g, 2);
  ir::verify(g);
  EXPECT_EQ(g.nodes().size(), 2u) << ir::to_text(g);
  EXPECT_EQ(program(first_op(g, "fused_elementwise")), "in0 tanh; t0 c:0.5 mul");
}

// ---- the op -----------------------------------------------------------------

std::string infer_error(const std::vector<TensorMeta>& in, const std::string& prog) {
  OpCall call;
  try {
    infer_call(*OpRegistry::get().find("fused_elementwise"), in.data(), static_cast<int>(in.size()), prog_attrs(prog),
               call);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(FusedOp, InferenceValidatesTheProgram) {
  const TensorMeta x{F32, S({2, 3})}, row{F32, S({3})}, mask{SPORA_DTYPE_BOOL, S({2, 3})},
      i32{SPORA_DTYPE_I32, S({2, 3})}, f64{SPORA_DTYPE_F64, S({3})};
  EXPECT_EQ(infer_error({x}, "in0 foo"), "[fused_elementwise] instruction 0 ('in0 foo'): unknown op 'foo' (operands are inK, tK and c:NUM)");
  EXPECT_EQ(infer_error({x}, "in0 in1 add"),
            "[fused_elementwise] instruction 0 ('in0 in1 add'): operand in1 does not exist (the op has 1 input)");
  EXPECT_EQ(infer_error({x}, "in0 exp; t1 neg"),
            "[fused_elementwise] instruction 1 ('t1 neg'): operand t1 is not the result of an earlier instruction "
            "(t0..t0 exist here)");
  EXPECT_NE(infer_error({x}, "in0 matmul").find("'matmul' is not an elementwise op a program may use"),
            std::string::npos);
  EXPECT_EQ(infer_error({x}, "in0 c:1 add sub"),
            "[fused_elementwise] instruction 0 ('in0 c:1 add sub'): 'sub' after the op is not an attribute "
            "(name=value); operands come first");
  EXPECT_EQ(infer_error({x}, "in0 add"), "[fused_elementwise] instruction 0 ('in0 add'): add takes 2 operand(s), got 1");
  EXPECT_EQ(infer_error({x}, "in0 c:zz mul"),
            "[fused_elementwise] instruction 0 ('in0 c:zz mul'): constant 'c:zz' is not a number");
  // dtype rules come from the component op's own inference
  EXPECT_EQ(infer_error({x, mask}, "in0 in1 add"),
            "[fused_elementwise] instruction 0 ('in0 in1 add'): [add] input 'y' has dtype bool, which the op does not "
            "support (supported: f32, f64, f16, bf16, i32, i64, u8)");
  EXPECT_EQ(infer_error({x}, "in0 c:0 where"),
            "[fused_elementwise] instruction 0 ('in0 c:0 where'): where takes 3 operand(s), got 2");
  EXPECT_EQ(infer_error({x}, "in0 leaky_relu alpha=nan"),
            "[fused_elementwise] instruction 0 ('in0 leaky_relu alpha=nan'): [leaky_relu] alpha must be finite, got nan");
  EXPECT_EQ(infer_error({x}, "in0 gelu approximate=fast"),
            "[fused_elementwise] instruction 0 ('in0 gelu approximate=fast'): [gelu] approximate must be \"none\" or "
            "\"tanh\", got \"fast\"");
  EXPECT_EQ(infer_error({x}, "in0 relu beta=2"),
            "[fused_elementwise] instruction 0 ('in0 relu beta=2'): [relu] unknown attribute 'beta' (the op takes: none)");
  EXPECT_EQ(infer_error({x}, "in0 c:0 greater"),
            "[fused_elementwise] the program's result (instruction 0) is bool; it must be the float dtype f32");
  EXPECT_EQ(infer_error({x, row}, "in0 exp"), "[fused_elementwise] input 1 is not used by the program");
  EXPECT_EQ(infer_error({x}, "in0 exp; in0 neg"),
            "[fused_elementwise] the result of instruction 0 ('in0 exp') is not used");
  EXPECT_EQ(infer_error({i32}, "in0 neg"),
            "[fused_elementwise] input 0 has dtype i32; inputs are float (f32, f64, f16, bf16) or bool");
  EXPECT_EQ(infer_error({x, f64}, "in0 in1 add"),
            "[fused_elementwise] float inputs have different dtypes (f32 and f64); cast one first");
  EXPECT_EQ(infer_error({mask}, "in0 logical_not"),
            "[fused_elementwise] needs at least one float input (it gives the output's dtype)");
  EXPECT_EQ(infer_error({x, TensorMeta{F32, S({4})}}, "in0 in1 add"),
            "[fused_elementwise] shapes (2,3) and (4,) do not broadcast");
  EXPECT_EQ(infer_error({x}, ""), "[fused_elementwise] the program is empty");
  EXPECT_EQ(infer_error({x}, "in0 exp;; t0 neg"), "[fused_elementwise] instruction 1 is empty");
  EXPECT_EQ(infer_error({x, mask}, "in1 in0 c:0 where bogus=1"),
            "[fused_elementwise] instruction 0 ('in1 in0 c:0 where bogus=1'): [where] unknown attribute 'bogus' (the "
            "op takes: none)");
}

TEST(FusedOp, InferenceBroadcastsAndCanonicalises) {
  const TensorMeta x{F32, S({2, 3})}, row{F32, S({3})}, mask{SPORA_DTYPE_BOOL, S({2, 1})};
  const TensorMeta in[3] = {x, row, mask};
  OpCall call;
  infer_call(*OpRegistry::get().find("fused_elementwise"), in, 3,
             prog_attrs("  in0   in1 add ;t0 c:0.50 maximum; in2 t1 c:-0 where; t2 leaky_relu alpha=0.01;"), call);
  EXPECT_EQ(call.out[0].dtype, F32);
  EXPECT_EQ(call.out[0].shape, S({2, 3}));
  EXPECT_EQ(call.in[1].shape, S({1, 3}));  // padded to the output's rank
  EXPECT_EQ(call.attrs.find("program")->s, "in0 in1 add; t0 c:0.5 maximum; in2 t1 c:-0 where; t2 leaky_relu");
}

TEST(FusedOp, DecompositionRebuildsTheComponentOps) {
  ir::Graph g;
  auto x = g.add_input("x", F32, S({4}));
  auto y = g.add_input("y", F32, S({2, 4}));
  ir::Builder b(g, {"model.py", 9});
  const auto out = find_decomposition("fused_elementwise")(b, {x, y}, prog_attrs("in0 sigmoid; t0 in1 mul; t1 c:1 add"));
  g.set_outputs(out);
  EXPECT_EQ(count_ops(g, "sigmoid"), 1u);
  EXPECT_EQ(count_ops(g, "mul"), 1u);
  EXPECT_EQ(count_ops(g, "add"), 1u);
  EXPECT_EQ(g.meta(out[0]).shape, S({2, 4}));
  EXPECT_EQ(g.node(out[0].node).loc.str(), "model.py:9");
}

TEST(FusedOp, GradientIsTheDecompositionsWithoutTheSeed) {
  ir::Graph g;
  auto x = g.add_input("x", F32, S({3, 4}));
  auto bias = g.add_input("bias", F32, S({4}));
  auto f = g.add_op("fused_elementwise", {x, bias}, prog_attrs("in0 in1 add; t0 tanh"))[0];
  g.set_outputs({g.add_op("sum", {f}, {})[0]});
  const ir::Graph gg = autodiff::value_and_grad(g, {x.node, bias.node}, 0);
  ir::verify(gg);
  // tanh's rule reads its output: the fused node's, not a recomputed one.
  EXPECT_EQ(count_ops(gg, "tanh"), 0u);
  EXPECT_EQ(count_ops(gg, "fused_elementwise"), 1u);
  // bias's gradient is summed over the broadcast rows.
  EXPECT_EQ(gg.meta(gg.outputs()[2]).shape, S({4}));
  EXPECT_EQ(gg.meta(gg.outputs()[1]).shape, S({3, 4}));
  // No multiply by value_and_grad's seed of 1s inside the vjp: one mul for
  // tanh's 1 - y^2 and one for dy times it.
  EXPECT_EQ(count_ops(gg, "mul"), 2u) << ir::to_text(gg);
}

TEST(FusedOp, NoGradientThroughPiecewiseConstantOps) {
  // floor passes no gradient: x gets the outer transform's zeros, not a
  // constant built inside the vjp.
  ir::Graph g;
  auto x = g.add_input("x", F32, S({5}));
  auto y = g.add_input("y", F32, S({5}));
  auto f = g.add_op("fused_elementwise", {x, y}, prog_attrs("in0 floor; t0 in1 mul"))[0];
  g.set_outputs({g.add_op("sum", {f}, {})[0]});
  const ir::Graph gg = autodiff::value_and_grad(g, {x.node, y.node}, 0);
  ir::verify(gg);
  EXPECT_EQ(gg.node(gg.outputs()[1].node).kind, ir::NodeKind::kConstant);
  size_t dense = 0;  // constants as large as x: only the outer zeros
  for (const auto& n : gg.nodes()) dense += n.kind == ir::NodeKind::kConstant && n.outputs[0].shape.numel() == 5;
  EXPECT_EQ(dense, 1u) << ir::to_text(gg);
  EXPECT_EQ(count_ops(gg, "floor"), 1u);  // y's gradient recomputes floor(x)
}

// ---- fused vs unfused on every device ----------------------------------------

Context& ctx() {
  static Context* c = [] {
    auto* c = new Context;
    c->add_plugin_path(SPORA_TEST_PLUGIN_DIR);
    return c;
  }();
  return *c;
}

std::vector<float> run(const ir::Graph& g, Device* dev, const std::vector<std::vector<float>>& ins) {
  sched::Executable exe(g, dev);
  std::vector<Tensor> ts;
  std::vector<const Tensor*> ptrs;
  const auto params = g.inputs();
  for (size_t i = 0; i < ins.size(); ++i) {
    const TensorMeta& m = g.node(params[i]).outputs[0];
    ts.push_back(tensor_from_host(dev, m.dtype, m.shape, ins[i].data(), ins[i].size() * 4));
  }
  for (const Tensor& t : ts) ptrs.push_back(&t);
  auto outs = exe.run(ptrs);
  std::vector<float> v(static_cast<size_t>(outs[0].shape.numel()));
  tensor_read(outs[0], v.data(), v.size() * 4);
  return v;
}

class FusedRun : public ::testing::TestWithParam<std::string> {};

TEST_P(FusedRun, MatchesUnfused) {
  Device* dev = ctx().find_device(GetParam());
  // Big enough for several blocks and (on cpu) threads; rows broadcast a bias.
  const int64_t R = 300, C = 257;
  ir::Graph g;
  auto x = g.add_input("x", F32, S({R, C}));
  auto bias = g.add_input("bias", F32, S({C}));
  auto dy = g.add_input("dy", F32, S({R, C}));
  auto h = g.add_op("add", {x, bias}, {})[0];
  auto mask = g.add_op("greater", {h, scalar(g, 0.0f)}, {})[0];
  auto exact = g.add_op("where", {mask, g.add_op("mul", {dy, h}, {})[0], g.add_op("maximum", {dy, scalar(g, -0.5f)}, {})[0]}, {})[0];
  auto smooth = g.add_op("mul", {g.add_op("sigmoid", {h}, {})[0], h}, {})[0];
  g.set_outputs({exact, smooth});
  ir::Graph only_exact = g, only_smooth = g;
  only_exact.set_outputs({exact});
  only_smooth.set_outputs({smooth});
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0, 3);
  std::vector<std::vector<float>> ins(3);
  for (auto [i, n] : {std::pair<int, int64_t>{0, R * C}, {1, C}, {2, R * C}}) {
    ins[static_cast<size_t>(i)].resize(static_cast<size_t>(n));
    for (auto& v : ins[static_cast<size_t>(i)]) v = nd(rng);
  }
  for (ir::Graph* u : {&only_exact, &only_smooth}) {
    ir::Graph f = *u;
    passes::optimize(f, 2);
    ASSERT_EQ(count_ops(f, "fused_elementwise"), 1u) << ir::to_text(f);
    const auto want = run(*u, dev, ins), got = run(f, dev, ins);
    ASSERT_EQ(want.size(), got.size());
    if (u == &only_exact) {
      EXPECT_EQ(want, got);  // add, mul, maximum, compare and select: the same bits
    } else {
      for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-6f * (1 + std::fabs(want[i]))) << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, FusedRun, ::testing::Values("cpu", "sim"));

}  // namespace
}  // namespace spora
