// The header-only C++ layer (spora.hpp) over the C ABI: RAII ownership,
// exceptions carrying the status and message, and the same numbers on every
// device.
#include <gtest/gtest.h>
#include <spora/spora.hpp>

#include <cmath>

namespace {

class HppTest : public ::testing::TestWithParam<std::string> {
 protected:
  static spora::Context& ctx() {
    static spora::Context c;
    return c;
  }
  spora::Device dev() { return ctx().device(GetParam()); }
};

TEST_P(HppTest, ChainedOpsMatchHandComputedValues) {
  auto d = dev();
  auto x = spora::Tensor::from<double>(d, {2, 2}, {1, -2, 3, -4});
  auto w = spora::Tensor::from<double>(d, {2, 2}, {0.5, 1, -1, 2});
  auto y = spora::op("relu", {&x});
  EXPECT_EQ(y.read<double>(), (std::vector<double>{1, 0, 3, 0}));
  auto m = spora::op("matmul", {&x, &w});  // [[1*0.5+(-2)(-1), 1-4], [1.5+4, 3-8]]
  EXPECT_EQ(m.read<double>(), (std::vector<double>{2.5, -3, 5.5, -5}));
  spora::Attrs keep;
  keep.set("axes", std::vector<int64_t>{1}).set("keepdims", true);
  auto s = spora::op("mean", {&m}, &keep);
  EXPECT_EQ(s.shape(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(s.read<double>(), (std::vector<double>{-0.25, 0.25}));
  auto e = spora::op("exp", {&x});
  auto l = spora::op("log", {&e});
  auto back = l.read<double>();
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(back[i], x.read<double>()[i], 1e-12);
}

TEST_P(HppTest, ErrorsBecomeExceptionsWithTheOpName) {
  auto d = dev();
  auto a = spora::Tensor::from<float>(d, {2, 3}, std::vector<float>(6, 1.f));
  auto b = spora::Tensor::from<float>(d, {4, 5}, std::vector<float>(20, 1.f));
  try {
    spora::op("matmul", {&a, &b});
    FAIL() << "expected spora::Error";
  } catch (const spora::Error& e) {
    EXPECT_EQ(e.status(), SPORA_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("[matmul] shapes (2,3) and (4,5) do not contract"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(a.read<double>(), spora::Error);  // wrong element type
  EXPECT_THROW(spora::op("nope", {&a}), spora::Error);
}

TEST_P(HppTest, TensorsMoveBetweenDevicesAndOwnTheirHandles) {
  auto d = dev();
  auto cpu = ctx().device("cpu");
  auto a = spora::Tensor::from<float>(d, {3}, {1, 2, 3});
  spora::Tensor moved = std::move(a);
  EXPECT_FALSE(static_cast<bool>(a));
  auto on_cpu = moved.to(cpu);
  EXPECT_EQ(on_cpu.device().get(), cpu.get());
  EXPECT_EQ(on_cpu.read<float>(), (std::vector<float>{1, 2, 3}));
  auto z = spora::Tensor::zeros(d, SPORA_DTYPE_F32, {2, 0, 3});
  EXPECT_EQ(z.numel(), 0);
  EXPECT_TRUE(z.read<float>().empty());
}

TEST_P(HppTest, ReshapeIsAViewThatKeepsDataAlive) {
  auto d = dev();
  spora::Tensor r;
  {
    auto a = spora::Tensor::from<float>(d, {2, 3}, {1, 2, 3, 4, 5, 6});
    spora::Attrs at;
    at.set("shape", std::vector<int64_t>{3, 2});
    r = spora::op("reshape", {&a}, &at);
  }  // `a` is gone; the view still owns the buffer
  EXPECT_EQ(r.shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(r.read<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  auto t = spora::op("transpose", {&r});
  EXPECT_EQ(t.read<float>(), (std::vector<float>{1, 3, 5, 2, 4, 6}));
}

TEST_P(HppTest, MemoryStatsFollowATensor) {
  auto d = dev();
  d.synchronize();
  const auto before = d.memory_stats();
  {
    auto a = spora::Tensor::zeros(d, SPORA_DTYPE_F64, {1024, 64});  // 512 KiB
    d.synchronize();
    const auto held = d.memory_stats();
    EXPECT_GE(held.allocated, before.allocated + 8 * 1024 * 64);
    EXPECT_GE(held.reserved, held.allocated);
  }
  d.synchronize();
  const auto after = d.memory_stats();
  EXPECT_LE(after.allocated, after.peak_allocated - 8 * 1024 * 64);
  d.reset_peak_memory_stats();
  const auto reset = d.memory_stats();
  EXPECT_EQ(reset.peak_allocated, reset.allocated);
}

INSTANTIATE_TEST_SUITE_P(Devices, HppTest, ::testing::Values("cpu", "sim"));

TEST(Hpp, UnknownDeviceNamesTheBackendAndTheFix) {
  spora::Context ctx;
  try {
    ctx.device("tpu");
    FAIL();
  } catch (const spora::Error& e) {
    EXPECT_EQ(e.status(), SPORA_ERROR_NOT_FOUND);
    EXPECT_NE(std::string(e.what()).find("SPORA_PLUGIN_PATH"), std::string::npos) << e.what();
  }
}

}  // namespace

namespace {

// Recomputation through the C ABI: blocks marked by node range while
// building, differentiated and optimised (opt level 1 runs the recompute
// pass): the same loss and gradients, a lower planned arena, and a JSON
// round trip keeps the marks.
TEST_P(HppTest, RecomputedBlocksGiveTheSameGradientsInLessPlannedMemory) {
  auto d = dev();
  constexpr int64_t kB = 64, kD = 32, kH = 128, kBlocks = 4;
  auto build = [&](bool mark) {
    spora::Graph g("blocks");
    spora_value_t h = g.input("x", SPORA_DTYPE_F32, {kB, kD});
    std::vector<spora_value_t> ws;
    for (int k = 0; k < kBlocks; ++k) {
      ws.push_back(g.weight(("w1_" + std::to_string(k)).c_str(), SPORA_DTYPE_F32, {kD, kH}));
      ws.push_back(g.weight(("w2_" + std::to_string(k)).c_str(), SPORA_DTYPE_F32, {kH, kD}));
      const int64_t first = g.num_nodes();
      const auto a = g.op("gelu", {g.op("matmul", {h, ws[ws.size() - 2]})});
      h = g.op("add", {h, g.op("matmul", {a, ws.back()})});
      if (mark) EXPECT_EQ(g.mark_recompute(first, g.num_nodes(), 2 + k), 4);
    }
    g.set_outputs({g.op("sum", {g.op("mul", {h, h})})});
    spora::Graph gg = g.grad(ws);
    gg.optimize(1);
    return gg;
  };
  std::vector<spora::Tensor> params;
  params.push_back(spora::Tensor::from<float>(d, {kB, kD}, std::vector<float>(kB * kD, 0.5f)));
  for (int k = 0; k < kBlocks; ++k) {
    std::vector<float> w1(kD * kH), w2(kH * kD);
    for (size_t i = 0; i < w1.size(); ++i) w1[i] = 0.01f * static_cast<float>((i * 7 + k) % 13) - 0.06f;
    for (size_t i = 0; i < w2.size(); ++i) w2[i] = 0.01f * static_cast<float>((i * 5 + k) % 11) - 0.05f;
    params.push_back(spora::Tensor::from<float>(d, {kD, kH}, w1));
    params.push_back(spora::Tensor::from<float>(d, {kH, kD}, w2));
  }
  std::vector<const spora::Tensor*> ps;
  for (const auto& t : params) ps.push_back(&t);
  auto plain = build(false).compile(d);
  spora::Graph marked = build(true);
  EXPECT_NE(marked.text().find("recompute=0"), std::string::npos) << "the pass's copies";
  auto rec = marked.compile(d);
  const auto out0 = plain.run(ps, 1 + 2 * kBlocks), out1 = rec.run(ps, 1 + 2 * kBlocks);
  for (size_t i = 0; i < out0.size(); ++i) EXPECT_EQ(out0[i].read<float>(), out1[i].read<float>()) << "output " << i;
  // gelu's input and output, (kB, kH) f32 each, of every block but about one.
  const uint64_t block_acts = 2 * kB * kH * 4;
  EXPECT_LE(rec.memory().first + (kBlocks - 2) * block_acts, plain.memory().first)
      << rec.memory().first << " vs " << plain.memory().first;
  auto again = spora::Graph::from_json(marked.json()).compile(d);
  EXPECT_EQ(again.memory().first, rec.memory().first);
  EXPECT_THROW(marked.mark_recompute(0, marked.num_nodes() + 1, 2), spora::Error);
}

TEST_P(HppTest, GraphModeBuildsDifferentiatesAndRuns) {
  auto d = dev();
  spora::Graph g("quad");
  const auto x = g.input("x", SPORA_DTYPE_F64, {3});
  const auto y = g.op("mul", {x, x}, nullptr, "model.cpp", 7);
  g.set_outputs({g.op("sum", {y})});
  EXPECT_NE(g.text().find("# model.cpp:7"), std::string::npos);
  spora::Graph gg = g.grad({x});  // value_and_grad of sum(x*x)
  gg.optimize(1);
  auto exe = gg.compile(d);
  auto in = spora::Tensor::from<double>(d, {3}, {1, -2, 3});
  auto out = exe.run({&in}, 2);
  EXPECT_EQ(out[0].read<double>(), std::vector<double>{14});
  EXPECT_EQ(out[1].read<double>(), (std::vector<double>{2, -4, 6}));
  // JSON round trip keeps the graph runnable.
  auto again = spora::Graph::from_json(gg.json()).compile(d).run({&in}, 2);
  EXPECT_EQ(again[1].read<double>(), (std::vector<double>{2, -4, 6}));
  try {
    const auto z = g.input("z", SPORA_DTYPE_F64, {4});
    g.op("add", {x, z}, nullptr, "model.cpp", 9);
    FAIL();
  } catch (const spora::Error& e) {
    EXPECT_NE(std::string(e.what()).find("(model.cpp:9)"), std::string::npos) << e.what();
  }
}

}  // namespace
