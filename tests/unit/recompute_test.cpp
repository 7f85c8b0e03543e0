// The recompute pass (passes/recompute.h): a chain of MLP blocks, each
// marked as one recomputed region, differentiated with value_and_grad, then
// rewritten. The rewritten step computes bit-identical loss and gradients
// on cpu, its copies sit just before their first backward readers, and the
// memory plan's peak drops by about the internal activations of every block
// but one. Also: one-op marks, dropout's mask drawn again identically,
// region outputs kept, CSE leaving the copies alone, the pipeline running
// the pass, and mark_recompute's rules and errors.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "autodiff/grad.h"
#include "device_test_util.h"
#include "ir/printer.h"
#include "passes/recompute.h"
#include "sched/executor.h"

namespace spora {
namespace {

constexpr int64_t kB = 32, kD = 64, kH = 4 * kD;

Attrs ints_attr(const char* name, std::vector<int64_t> v) {
  Attrs a;
  a.set(name, AttrValue::of_ints(std::move(v)));
  return a;
}

// x -> blocks of (h + matmul(gelu(matmul(h, w1)), w2)) -> loss = sum(h * h).
// `mark`: each block's op nodes marked as region 2 + k. With `dropout`, the
// gelu's output goes through dropout (seeded) first.
struct Blocks {
  ir::Graph g{"blocks"};
  std::vector<int32_t> wrt;
  int32_t first_block_node = 0;
  Blocks(int n, bool mark, bool dropout = false) {
    auto h = g.add_input("x", SPORA_DTYPE_F32, S({kB, kD}));
    for (int k = 0; k < n; ++k) {
      auto w1 = g.add_weight("w1_" + std::to_string(k), SPORA_DTYPE_F32, S({kD, kH}));
      auto w2 = g.add_weight("w2_" + std::to_string(k), SPORA_DTYPE_F32, S({kH, kD}));
      wrt.push_back(w1.node);
      wrt.push_back(w2.node);
      const auto first = static_cast<int32_t>(g.nodes().size());
      if (k == 0) first_block_node = first;
      auto a = g.add_op("matmul", {h, w1}, {})[0];
      auto act = g.add_op("gelu", {a}, {})[0];
      if (dropout) {
        Attrs d;
        d.set("p", AttrValue::of_float(0.25));
        d.set("seed", AttrValue::of_int(1234 + k));
        act = g.add_op("dropout", {act}, d)[0];
      }
      h = g.add_op("add", {h, g.add_op("matmul", {act, w2}, {})[0]}, {})[0];
      if (mark) passes::mark_recompute(g, first, static_cast<int32_t>(g.nodes().size()), 2 + k);
    }
    g.set_outputs({g.add_op("sum", {g.add_op("mul", {h, h}, {})[0]}, {})[0]});
    wrt.insert(wrt.begin(), 0);  // and x
  }
  ir::Graph step() const { return autodiff::value_and_grad(g, wrt, 0); }
};

struct RunResult {
  std::vector<std::vector<float>> outputs;
  uint64_t planned = 0;
};

// Inputs and weights bound in creation order (value_and_grad keeps them),
// filled with the same seeded values for every graph built alike.
std::vector<Tensor> params_for(const ir::Graph& step, Device* cpu) {
  std::vector<Tensor> params;
  unsigned seed = 1;
  for (const ir::Node& n : step.nodes())
    if (n.kind == ir::NodeKind::kInput || n.kind == ir::NodeKind::kWeight) {
      std::vector<float> v = normal_values(n.outputs[0].shape, seed++);
      if (n.kind == ir::NodeKind::kWeight)
        for (float& x : v) x *= 0.1f;
      params.push_back(f32_tensor(cpu, n.outputs[0].shape, v));
    }
  return params;
}

RunResult run_on_cpu(const ir::Graph& step) {
  Device* cpu = device("cpu");
  const std::vector<Tensor> params = params_for(step, cpu);
  sched::Executable exe(step, cpu);
  RunResult r;
  r.planned = exe.planned_bytes();
  for (const Tensor& t : exe.run(ptrs(params))) r.outputs.push_back(read(t));
  return r;
}

void expect_bit_identical(const RunResult& a, const RunResult& b) {
  ASSERT_EQ(a.outputs.size(), b.outputs.size());
  for (size_t i = 0; i < a.outputs.size(); ++i) {
    ASSERT_EQ(a.outputs[i].size(), b.outputs[i].size());
    EXPECT_EQ(std::memcmp(a.outputs[i].data(), b.outputs[i].data(), a.outputs[i].size() * sizeof(float)), 0)
        << "output " << i << " differs";
  }
}

size_t count_copies(const ir::Graph& g) {
  size_t n = 0;
  for (const auto& node : g.nodes())
    if (node.kind == ir::NodeKind::kApply)
      if (const AttrValue* a = node.attrs.find(kRecomputeAttr)) n += a->i == 0;
  return n;
}

TEST(Recompute, BlocksGiveTheSameGradientsWithALowerPlannedPeak) {
  constexpr int kBlocks = 6;
  const Blocks plain(kBlocks, false), marked(kBlocks, true);
  const ir::Graph base_step = plain.step();
  ir::Graph step = marked.step();
  const passes::RecomputeStats st = passes::recompute(step);
  ASSERT_NO_THROW(ir::verify(step)) << ir::to_text(step);
  // Per block the first matmul's output and the gelu's (read by gelu's and
  // the second matmul's gradients); the block's output is a kept region
  // output, the second matmul's is read by no backward node.
  EXPECT_EQ(st.copies, 2 * kBlocks);
  EXPECT_EQ(st.dropped, 2 * kBlocks);
  EXPECT_EQ(st.dropped_bytes, static_cast<uint64_t>(2 * kBlocks * kB * kH * 4));
  EXPECT_EQ(count_copies(step), static_cast<size_t>(2 * kBlocks));

  // Each copy comes just before the node that first reads it, with only
  // other copies in between.
  const auto& nodes = step.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const AttrValue* a = nodes[i].kind == ir::NodeKind::kApply ? nodes[i].attrs.find(kRecomputeAttr) : nullptr;
    if (!a || a->i != 0) continue;
    size_t j = i + 1;
    while (j < nodes.size() && nodes[j].attrs.find(kRecomputeAttr) && nodes[j].attrs.find(kRecomputeAttr)->i == 0)
      ++j;
    bool read_by_copies_or_next = false;
    for (size_t k = i + 1; k <= j && k < nodes.size(); ++k)
      for (const ir::Value& v : nodes[k].inputs)
        read_by_copies_or_next = read_by_copies_or_next || v.node == static_cast<int32_t>(i);
    EXPECT_TRUE(read_by_copies_or_next) << "copy %" << i << " is not read right after it:\n" << ir::to_text(step);
  }

  const RunResult base = run_on_cpu(base_step), rec = run_on_cpu(step);
  expect_bit_identical(base, rec);
  const uint64_t block_acts = 2 * kB * kH * 4;  // a and gelu(a) of one block
  std::printf("[recompute] %d MLP blocks (batch %lld, width %lld, hidden %lld): planned peak %llu bytes without "
              "recompute, %llu with (%d ops computed again, %llu activation bytes no longer kept)\n",
              kBlocks, static_cast<long long>(kB), static_cast<long long>(kD), static_cast<long long>(kH),
              static_cast<unsigned long long>(base.planned), static_cast<unsigned long long>(rec.planned), st.copies,
              static_cast<unsigned long long>(st.dropped_bytes));
  // Without recompute the backward pass starts with every block's internal
  // activations alive; with it, only one block's at a time.
  EXPECT_LE(rec.planned + (kBlocks - 2) * block_acts, base.planned);
}

TEST(Recompute, UnmarkedGraphsAndSecondRunsChangeNothing) {
  ir::Graph step = Blocks(3, false).step();
  const std::string before = ir::to_text(step);
  EXPECT_EQ(passes::recompute(step).copies, 0);
  EXPECT_EQ(ir::to_text(step), before);
  ir::Graph marked = Blocks(3, true).step();
  EXPECT_GT(passes::recompute(marked).copies, 0);
  const std::string once = ir::to_text(marked);
  EXPECT_EQ(passes::recompute(marked).copies, 0) << "the originals have no backward reader left";
  EXPECT_EQ(ir::to_text(marked), once);
}

TEST(Recompute, CseLeavesTheCopiesAndThePipelineRunsThePass) {
  ir::Graph step = Blocks(3, true).step();
  passes::recompute(step);
  const size_t copies = count_copies(step);
  ASSERT_EQ(copies, 6u);
  run("cse", step);
  EXPECT_EQ(count_copies(step), copies) << "copies carry recompute = 0, the originals their region";
  ir::Graph opt = Blocks(3, true).step();
  passes::optimize(opt, 1);
  EXPECT_EQ(count_copies(opt), copies);
  ir::Graph by_name = Blocks(3, true).step();
  EXPECT_TRUE(run("recompute", by_name));
}

TEST(Recompute, DropoutIsDrawnAgainWithTheSameMask) {
  const Blocks plain(3, false, true), marked(3, true, true);
  ir::Graph step = marked.step();
  const passes::RecomputeStats st = passes::recompute(step);
  EXPECT_EQ(st.copies, 3 * 3) << "matmul, gelu and dropout per block:\n" << ir::to_text(step);
  size_t dropouts = 0;
  for (const auto& n : step.nodes()) dropouts += n.kind == ir::NodeKind::kApply && n.op->name == "dropout";
  EXPECT_EQ(dropouts, 6u) << "each dropout once in forward and once again, same seed and offset";
  expect_bit_identical(run_on_cpu(plain.step()), run_on_cpu(step));
}

TEST(Recompute, OneMarkedOpIsComputedAgainEvenWhenTheForwardReadsItOutside) {
  // y = sum(gelu(x * w)^2) with only gelu marked (Primitive.recompute()):
  // mul reads it outside any region, and mul's gradient reads it again, so
  // it is computed again from x * w (unmarked, kept).
  auto build = [](bool mark) {
    ir::Graph g;
    auto x = g.add_input("x", SPORA_DTYPE_F32, S({8, 16}));
    auto w = g.add_weight("w", SPORA_DTYPE_F32, S({8, 16}));
    Attrs m;
    if (mark) m.set(kRecomputeAttr, AttrValue::of_bool(true));
    auto act = g.add_op("gelu", {g.add_op("mul", {x, w}, {})[0]}, m)[0];
    g.set_outputs({g.add_op("sum", {g.add_op("mul", {act, act}, {})[0]}, {})[0]});
    return autodiff::value_and_grad(g, {x.node, w.node}, 0);
  };
  ir::Graph step = build(true);
  const passes::RecomputeStats st = passes::recompute(step);
  EXPECT_EQ(st.copies, 1) << ir::to_text(step);
  ir::verify(step);
  expect_bit_identical(run_on_cpu(build(false)), run_on_cpu(step));

  // A chain of one-op marks is copied back to its unmarked inputs.
  ir::Graph g;
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({8, 16}));
  Attrs m;
  m.set(kRecomputeAttr, AttrValue::of_int(1));
  auto e = g.add_op("exp", {g.add_op("sin", {x}, m)[0]}, m)[0];
  g.set_outputs({g.add_op("sum", {g.add_op("tanh", {e}, {})[0]}, {})[0]});
  ir::Graph chain = autodiff::value_and_grad(g, {x.node}, 0);
  EXPECT_EQ(passes::recompute(chain).copies, 2) << "exp (its gradient reads it) and sin, its input:\n"
                                                 << ir::to_text(chain);
  ir::verify(chain);
  expect_bit_identical(run_on_cpu(autodiff::value_and_grad(g, {x.node}, 0)), run_on_cpu(chain));
}

TEST(Recompute, RegionOutputsAndGraphOutputsAreKept) {
  // A region (mark 2): e = exp(x), s = sin(e), u = s * s; then tanh(u)
  // outside. Backward reads e (exp's and sin's gradients) and s (mul's).
  // u leaves the region: kept. s is copied too unless the forward pass
  // reads it outside the region or it is a graph output.
  auto build = [](int variant) {
    ir::Graph g;
    auto x = g.add_input("x", SPORA_DTYPE_F32, S({4, 4}));
    auto e = g.add_op("exp", {x}, {})[0];
    auto s = g.add_op("sin", {e}, {})[0];
    auto u = g.add_op("mul", {s, s}, {})[0];
    passes::mark_recompute(g, e.node, u.node + 1, 2);
    auto t = g.add_op("tanh", {u}, {})[0];
    if (variant == 1) t = g.add_op("add", {t, s}, {})[0];  // s read outside
    auto loss = g.add_op("sum", {t}, {})[0];
    if (variant == 2) g.set_outputs({loss, s});
    else g.set_outputs({loss});
    return autodiff::value_and_grad(g, {x.node}, 0);
  };
  const int expected[] = {2, 1, 1};
  for (int variant = 0; variant < 3; ++variant) {
    ir::Graph step = build(variant);
    EXPECT_EQ(passes::recompute(step).copies, expected[variant]) << "variant " << variant << ":\n"
                                                                  << ir::to_text(step);
    ir::verify(step);
    expect_bit_identical(run_on_cpu(build(variant)), run_on_cpu(step));
  }
}

TEST(Recompute, TheRootOfAKeptViewIsKept) {
  // A region whose output is a reshape (a view) of an inner exp, read by
  // a backward node (mul's gradient): the view stays alive into the
  // backward pass and holds exp's memory, so exp is not computed again;
  // sin(exp) inside the region still is.
  auto build = [](bool view_out) {
    ir::Graph g;
    auto x = g.add_input("x", SPORA_DTYPE_F32, S({4, 4}));
    auto e = g.add_op("exp", {x}, {})[0];
    auto s = g.add_op("sin", {e}, {})[0];
    auto m = g.add_op("mul", {s, e}, {})[0];
    auto out = view_out ? g.add_op("reshape", {e}, ints_attr("shape", {16}))[0] : g.add_op("neg", {e}, {})[0];
    passes::mark_recompute(g, e.node, out.node + 1, 2);
    auto t = g.add_op("add", {g.add_op("sum", {g.add_op("tanh", {m}, {})[0]}, {})[0],
                              g.add_op("sum", {g.add_op("mul", {out, out}, {})[0]}, {})[0]}, {})[0];
    g.set_outputs({t});
    return autodiff::value_and_grad(g, {x.node}, 0);
  };
  ir::Graph viewed = build(true), plain = build(false);
  // Without the view: m leaves the region (kept); exp (read by the
  // gradients of exp, sin and mul) and sin (mul's) are copied; neg's
  // output leaves the region. With the view: exp stays, only sin is copied.
  EXPECT_EQ(passes::recompute(plain).copies, 2) << ir::to_text(plain);
  EXPECT_EQ(passes::recompute(viewed).copies, 1) << ir::to_text(viewed);
  ir::verify(viewed);
  expect_bit_identical(run_on_cpu(build(true)), run_on_cpu(viewed));
}

TEST(Recompute, MarkingRules) {
  ir::Graph g;
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({4}));
  Attrs one;
  one.set(kRecomputeAttr, AttrValue::of_bool(true));
  auto a = g.add_op("exp", {x}, one)[0];
  auto b = g.add_op("sin", {a}, {})[0];
  EXPECT_EQ(g.node(a.node).attrs.find(kRecomputeAttr)->i, 1) << "a bool mark is kept as 1";
  EXPECT_EQ(passes::mark_recompute(g, 0, static_cast<int32_t>(g.nodes().size()), 5), 1)
      << "only sin: inputs carry no mark and exp's own mark wins";
  EXPECT_EQ(g.node(a.node).attrs.find(kRecomputeAttr)->i, 1);
  EXPECT_EQ(g.node(b.node).attrs.find(kRecomputeAttr)->i, 5);
  EXPECT_THROW(passes::mark_recompute(g, 0, 99, 2), Error);
  EXPECT_THROW(passes::mark_recompute(g, 0, 1, -1), Error);
  passes::RecomputeOptions bad;
  bad.forward_outputs = 0;
  EXPECT_THROW(passes::recompute(g, bad), Error);
  Attrs wrong;
  wrong.set(kRecomputeAttr, AttrValue::of_string("yes"));
  EXPECT_THROW(g.add_op("exp", {x}, wrong), Error);
}

}  // namespace
}  // namespace spora
