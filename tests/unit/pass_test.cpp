// Before/after IR tests of each pass, and the pass manager's pipeline.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>

#include "ir/printer.h"
#include "ir_test_util.h"
#include "ir/verifier.h"
#include "passes/evaluator.h"
#include "passes/instrument.h"
#include "passes/pass.h"
#include "passes/target.h"
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
                                      "constant_folding", "recompute", "allreduce_fusion", "epilogue_fusion",
                                      "conv_pool_fusion", "conv_pool_grad_fusion", "blocked_handoff"}));
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


// ---- the pass manager ----

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

std::vector<std::string> names_of(const std::vector<passes::Pass>& seq) {
  std::vector<std::string> out;
  for (const auto& p : seq) out.push_back(p.name);
  return out;
}

passes::Pass pass_named(const char* name) {
  const passes::Pass* p = passes::find_pass(name);
  EXPECT_NE(p, nullptr) << name;
  return *p;
}

TEST(PassManager, PipelineIsTheDeclaredOrderFilteredByLevel) {
  // O2 runs the whole declared list, in its order; O1 the level-1 passes.
  EXPECT_EQ(names_of(passes::pipeline(2)), passes::pipeline_order());
  std::vector<std::string> l1;
  for (const std::string& n : passes::pipeline_order())
    if (pass_named(n.c_str()).level <= 1) l1.push_back(n);
  EXPECT_EQ(names_of(passes::pipeline(1)), l1);
  // A pass only asked for by name is in no level.
  EXPECT_EQ(pass_named("mixed_precision").level, passes::kOnRequest);
  // Every pass's needs come before it in the pipeline (pipeline() checks).
  for (const auto& p : passes::pipeline(2))
    for (const std::string& need : p.needs) {
      const auto order = passes::pipeline_order();
      EXPECT_LT(std::find(order.begin(), order.end(), need), std::find(order.begin(), order.end(), p.name));
    }
}

TEST(PassManager, ASequenceMissingANeedIsRefusedBeforeRunning) {
  ir::Graph g;
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({2}));
  g.add_op("exp", {x}, {});  // dead: dce would drop it
  g.set_outputs({x});
  const std::string before = ir::to_text(g);
  passes::PassContext ctx;
  EXPECT_EQ(error_of([&] {
              passes::run_sequence(g, {pass_named("dce"), pass_named("constant_folding")}, ctx);
            }),
            "[passes] constant_folding needs shape_inference to run before it; put shape_inference earlier in "
            "the sequence");
  EXPECT_EQ(ir::to_text(g), before);  // nothing ran, dce included
  const auto stats =
      passes::run_sequence(g, {pass_named("shape_inference"), pass_named("dce"), pass_named("constant_folding")}, ctx);
  ASSERT_EQ(stats.size(), 3u);
  EXPECT_TRUE(stats[1].changed);
  // By name, one pass runs alone: the caller vouches for its needs.
  EXPECT_FALSE(passes::run_pass(g, "constant_folding", ctx).changed);
}

// Records every hook call as "<tag>.<before|after> <pass>".
class Recorder : public passes::Instrument {
 public:
  Recorder(std::string tag, std::vector<std::string>* log) : tag_(std::move(tag)), log_(log) {}
  void before_pass(const ir::Graph&, const passes::Pass& p) override { log_->push_back(tag_ + ".before " + p.name); }
  void after_pass(const ir::Graph&, const passes::Pass& p, const passes::PassStats& s) override {
    log_->push_back(tag_ + ".after " + s.name + (s.changed ? " changed" : ""));
    EXPECT_EQ(s.name, p.name);
  }

 private:
  std::string tag_;
  std::vector<std::string>* log_;
};

TEST(PassManager, InstrumentsAreCalledInOrderAroundEveryPass) {
  ir::Graph g;
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({2}));
  g.add_op("exp", {x}, {});
  g.set_outputs({g.add_op("neg", {x}, {})[0]});
  std::vector<std::string> log;
  passes::PassContext ctx;
  ctx.instruments = {std::make_shared<Recorder>("a", &log), std::make_shared<Recorder>("b", &log)};
  passes::run_sequence(g, {pass_named("dce"), pass_named("cse")}, ctx);
  EXPECT_EQ(log, (std::vector<std::string>{"a.before dce", "b.before dce", "a.after dce changed", "b.after dce changed",
                                           "a.before cse", "b.before cse", "a.after cse", "b.after cse"}));
  // optimize and run_pass go through the same hooks.
  log.clear();
  passes::run_pass(g, "dce", ctx);
  EXPECT_EQ(log, (std::vector<std::string>{"a.before dce", "b.before dce", "a.after dce", "b.after dce"}));
  log.clear();
  passes::optimize(g, 1, ctx);
  EXPECT_EQ(log.size(), 4 * passes::pipeline(1).size());
  EXPECT_EQ(log.front(), "a.before shape_inference");
}

// A deliberately broken pass: it retypes a constant so that its bytes no
// longer fit, which only the verifier notices.
bool break_constant(ir::Graph& g, const passes::PassContext&) {
  for (size_t id = 0; id < g.nodes().size(); ++id)
    if (g.nodes()[id].kind == ir::NodeKind::kConstant) {
      g.mutable_node(static_cast<int32_t>(id)).outputs[0].shape = S({5});
      return true;
    }
  return false;
}

TEST(PassManager, VerifyEachCatchesABrokenPassInAnyBuild) {
  const passes::Pass broken{"break_constant", passes::kOnRequest, break_constant, {}};
  auto graph = [] {
    ir::Graph g;
    auto x = g.add_input("x", SPORA_DTYPE_F32, S({2}));
    g.set_outputs({g.add_op("add", {x, g.add_constant(SPORA_DTYPE_F32, S({2}), f32({1, 2}))}, {})[0]});
    return g;
  };
  std::vector<std::string> log;
  passes::PassContext ctx;
  ctx.instruments = {passes::verify_each_instrument(), std::make_shared<Recorder>("r", &log)};
  ir::Graph g = graph();
  const std::string err = error_of([&] { passes::run_sequence(g, {broken, pass_named("dce")}, ctx); });
  EXPECT_EQ(err.rfind("[pass break_constant] left an invalid graph: [verify] graph 'main' node %1 (constant): holds "
                      "8 bytes, its type needs 20",
                      0),
            0u)
      << err;
  // The sequence stopped there: neither the instrument after it nor dce ran.
  EXPECT_EQ(log, (std::vector<std::string>{"r.before break_constant"}));
#ifdef NDEBUG
  // Without verify-each a release build lets the broken graph through.
  ctx.instruments.clear();
  ir::Graph g2 = graph();
  EXPECT_NO_THROW(passes::run_sequence(g2, {broken}, ctx));
#endif
}

TEST(PassManager, VerifyEachIsSwitchedBySporaVerifyEach) {
  const char* old = std::getenv("SPORA_VERIFY_EACH");
  const std::string saved = old ? old : "";
  setenv("SPORA_VERIFY_EACH", "1", 1);
  EXPECT_TRUE(passes::verify_each_from_env());
  setenv("SPORA_VERIFY_EACH", "0", 1);
  EXPECT_FALSE(passes::verify_each_from_env());
  unsetenv("SPORA_VERIFY_EACH");
#ifdef NDEBUG
  EXPECT_FALSE(passes::verify_each_from_env());
#else
  EXPECT_TRUE(passes::verify_each_from_env());
#endif
  if (old) setenv("SPORA_VERIFY_EACH", saved.c_str(), 1);
}

TEST(PassManager, DumpInstrumentWritesTheIrBeforeAndAfter) {
  const std::string dir = ::testing::TempDir() + "/spora_dump_ir_test";
  std::filesystem::remove_all(dir);
  ir::Graph g;
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({2}));
  g.add_op("exp", {x}, {});
  g.set_outputs({x});
  passes::PassContext ctx;
  ctx.instruments = {passes::dump_ir_instrument(dir)};
  passes::run_pass(g, "dce", ctx);
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::string name = e.path().filename().string();
    const size_t dot = name.find('.'), seq_end = name.find('.', dot + 1);
    files.push_back(name.substr(0, dot) + name.substr(seq_end));  // the sequence number left out
  }
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"main.dce.after.dot", "main.dce.after.json", "main.dce.after.txt",
                                             "main.dce.before.dot", "main.dce.before.json", "main.dce.before.txt"}));
  std::filesystem::remove_all(dir);
}

// An evaluator that answers every op with bytes of 0x11, and counts calls.
class FakeEvaluator : public passes::Evaluator {
 public:
  bool ready = true;
  mutable int calls = 0;
  bool available() const override { return ready; }
  std::optional<std::vector<passes::HostValue>> evaluate(const OpDef& op, const std::vector<passes::HostValue>& in,
                                                         const Attrs&, size_t num_outputs,
                                                         std::string* why) const override {
    ++calls;
    if (op.name == "log") {
      *why = "refused";
      return std::nullopt;
    }
    std::vector<passes::HostValue> out;
    for (size_t o = 0; o < num_outputs; ++o)
      out.push_back({in[0].meta, std::make_shared<std::vector<uint8_t>>(in[0].bytes->size(), 0x11)});
    return out;
  }
};

TEST(PassManager, ConstantFoldingGoesThroughTheContextsEvaluator) {
  auto graph = [] {
    ir::Graph g;
    auto x = g.add_input("x", SPORA_DTYPE_F32, S({2}));
    auto c = g.add_constant(SPORA_DTYPE_F32, S({2}), f32({0, 1}));
    auto e = g.add_op("exp", {c}, {})[0];
    auto l = g.add_op("log", {c}, {})[0];
    g.set_outputs({g.add_op("add", {x, e}, {})[0], l});
    return g;
  };
  FakeEvaluator fake;
  passes::PassContext ctx;
  ctx.evaluator = &fake;
  ir::Graph g = graph();
  EXPECT_TRUE(passes::run_pass(g, "constant_folding", ctx).changed);
  EXPECT_EQ(fake.calls, 2);
  EXPECT_EQ(count_ops(g, "exp"), 0u);
  EXPECT_EQ(count_ops(g, "log"), 1u);  // refused: left for run time
  const auto& folded = g.node(g.node(g.outputs()[0].node).inputs[1].node);
  ASSERT_EQ(folded.kind, ir::NodeKind::kConstant);
  EXPECT_EQ(*folded.data, std::vector<uint8_t>(8, 0x11));
  // An evaluator that is not available folds nothing and is not called.
  fake.ready = false;
  fake.calls = 0;
  ir::Graph h = graph();
  EXPECT_FALSE(passes::run_pass(h, "constant_folding", ctx).changed);
  EXPECT_EQ(fake.calls, 0);
  // The runtime registered the process's default evaluator.
  EXPECT_NE(passes::default_evaluator(), nullptr);
}

// A target with nothing it runs better alone, or with mul.
class TestTarget : public passes::Target {
 public:
  explicit TestTarget(std::string alone) : alone_(std::move(alone)) {}
  bool runs_faster_alone(const OpDef& op, const Attrs&) const override { return op.name == alone_; }

 private:
  std::string alone_;
};

TEST(PassManager, ElementwiseFusionAsksTheTargetNotADevice) {
  auto graph = [] {
    ir::Graph g;
    auto x = g.add_input("x", SPORA_DTYPE_F32, S({7}));
    g.set_outputs({g.add_op("mul", {g.add_op("gelu", {x}, {})[0], x}, {})[0]});
    return g;
  };
  // The host target (the runtime's) keeps gelu's exact form alone.
  ir::Graph g = graph();
  EXPECT_FALSE(passes::run_pass(g, "elementwise_fusion").changed);
  // A target without that preference fuses it...
  const TestTarget none(""), no_mul("mul");
  passes::PassContext ctx;
  ctx.target = &none;
  EXPECT_TRUE(passes::run_pass(g, "elementwise_fusion", ctx).changed);
  EXPECT_EQ(count_ops(g, "fused_elementwise"), 1u);
  // ...and one that runs mul better alone leaves the pair unfused.
  ir::Graph h = graph();
  ctx.target = &no_mul;
  EXPECT_FALSE(passes::run_pass(h, "elementwise_fusion", ctx).changed);
}

TEST(PassManager, OptimizeBeforeAndAfter) {
  // The declared order at work: cse merges the two exps before folding
  // evaluates the survivor; dce runs before folding, so the constant the
  // fold replaced stays (one fold per run: add(e, e) waits for the next
  // optimize); O2 then fuses what is left.
  Context rt;
  rt.add_plugin_path(SPORA_TEST_PLUGIN_DIR);
  rt.devices();  // the cpu plugin the host evaluator runs on
  ir::Graph g;
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({2}));
  auto c = g.add_constant(SPORA_DTYPE_F32, S({2}), f32({0, 0}));
  auto s = g.add_op("add", {g.add_op("exp", {c}, {})[0], g.add_op("exp", {c}, {})[0]}, {})[0];
  g.add_op("neg", {x}, {});  // dead
  g.set_outputs({g.add_op("mul", {g.add_op("sigmoid", {x}, {})[0], s}, {})[0]});
  ir::Graph o1 = g;
  passes::optimize(o1, 1);
  EXPECT_EQ(ir::to_text(o1),
            "graph @main {\n  %0 = input \"x\" : f32[2]\n  %1 = constant 0x0000000000000000 : f32[2]\n"
            "  %2 = constant 0x0000803f0000803f : f32[2]\n  %3 = add(%2, %2) : f32[2]\n"
            "  %4 = sigmoid(%0) : f32[2]\n  %5 = mul(%4, %3) : f32[2]\n  return %5\n}\n");
  ir::Graph o2 = g;
  passes::optimize(o2, 2);
  EXPECT_EQ(ir::to_text(o2),
            "graph @main {\n  %0 = input \"x\" : f32[2]\n  %1 = constant 0x0000803f0000803f : f32[2]\n"
            "  %2 = fused_elementwise(%1, %0) {program=\"in0 in0 add; in1 sigmoid; t1 t0 mul\"} : f32[2]\n"
            "  return %2\n}\n");
}

}  // namespace
}  // namespace spora
