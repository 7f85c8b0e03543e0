// The pipeline split (parallel/pipeline_split.h): a 4-layer MLP with a skip
// connection from layer 0 to the loss, cut into 2 and 3 stages. Running the
// stages' forward graphs one after another (each fed what the previous one
// sent) gives the whole graph's loss bit for bit, and their backward graphs
// chained from the last stage give the whole graph's gradients; the skip
// value is relayed through the stage between. Also: the stage assignment
// rules and their errors.
#include <gtest/gtest.h>

#include <cstring>

#include "autodiff/grad.h"
#include "device_test_util.h"
#include "parallel/pipeline_split.h"
#include "sched/executor.h"
#include "support/error.h"

namespace spora {
namespace {

constexpr int64_t kB = 8, kD = 16;

struct Net {
  ir::Graph g{"mlp"};
  std::vector<parallel::StageMark> marks;
  std::vector<int32_t> weights;
  // layer l: h = relu(h @ w_l); the loss reads layer 0's output again (a
  // value crossing two stages when layers 0 and 3 are stages apart).
  explicit Net(std::vector<int32_t> stage_of_layer) {
    ir::Value h = g.add_input("x", SPORA_DTYPE_F32, S({kB, kD}));
    const ir::Value t = g.add_input("target", SPORA_DTYPE_F32, S({kB, kD}));
    ir::Value skip;
    for (size_t l = 0; l < stage_of_layer.size(); ++l) {
      const ir::Value w = g.add_weight("w" + std::to_string(l), SPORA_DTYPE_F32, S({kD, kD}));
      weights.push_back(w.node);
      const int64_t first = static_cast<int64_t>(g.nodes().size());
      h = g.add_op("relu", {g.add_op("matmul", {h, w}, {})[0]}, {})[0];
      if (l == 0) skip = h;
      marks.push_back({first, static_cast<int64_t>(g.nodes().size()), stage_of_layer[l]});
    }
    // Unmarked: runs in the stage of what it reads (the last).
    const ir::Value d = g.add_op("sub", {g.add_op("add", {h, skip}, {})[0], t}, {})[0];
    g.set_outputs({g.add_op("sum", {g.add_op("mul", {d, d}, {})[0]}, {})[0]});
  }
};

std::vector<float> values(const Shape& s, unsigned seed, float scale) {
  std::vector<float> v = normal_values(s, seed);
  for (float& x : v) x *= scale;
  return v;
}

// Whole-graph loss and gradients of the weights, then each stage chained.
void check_stages(const std::vector<int32_t>& layout, int32_t stages, bool unmarked = false) {
  Net net(layout);
  if (unmarked) net.marks.clear();
  Device* cpu = device("cpu");
  std::map<std::string, Tensor> data, weights;
  data.emplace("x", f32_tensor(cpu, S({kB, kD}), values(S({kB, kD}), 1, 1.0f)));
  data.emplace("target", f32_tensor(cpu, S({kB, kD}), values(S({kB, kD}), 2, 1.0f)));
  for (size_t l = 0; l < layout.size(); ++l)
    weights.emplace("w" + std::to_string(l), f32_tensor(cpu, S({kD, kD}), values(S({kD, kD}), 10 + static_cast<unsigned>(l), 0.3f)));

  const ir::Graph whole = autodiff::value_and_grad(net.g, net.weights, 0);
  std::vector<Tensor> params = {data.at("x"), data.at("target")};
  for (size_t l = 0; l < layout.size(); ++l) params.push_back(weights.at("w" + std::to_string(l)));
  sched::Executable we(whole, cpu);
  const std::vector<Tensor> want = we.run(ptrs(params));  // loss, then one gradient per weight

  std::vector<parallel::PipelineStage> st;
  for (int32_t k = 0; k < stages; ++k) st.push_back(parallel::pipeline_stage(net.g, stages, k, net.marks));
  auto bind = [&](const parallel::PipelineStage& s, const std::vector<Tensor>& recv) {
    std::vector<Tensor> p;
    for (int32_t i : s.data_inputs) p.push_back(data.at(i == 0 ? "x" : "target"));
    p.insert(p.end(), recv.begin(), recv.end());
    return p;
  };
  auto with_weights = [&](const parallel::PipelineStage& s, std::vector<Tensor> p) {
    for (const std::string& w : s.weights) p.push_back(weights.at(w));
    return p;
  };
  // Forward, stage by stage; each stage's inputs kept for its backward.
  std::vector<std::vector<Tensor>> inputs(static_cast<size_t>(stages));
  std::vector<Tensor> sent;
  for (int32_t k = 0; k < stages; ++k) {
    const parallel::PipelineStage& s = st[static_cast<size_t>(k)];
    ASSERT_EQ(s.recv.size(), sent.size()) << "stage " << k;
    inputs[static_cast<size_t>(k)] = bind(s, sent);
    sched::Executable fe(s.forward, cpu);
    sent = fe.run(ptrs(with_weights(s, inputs[static_cast<size_t>(k)])));
  }
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(read(sent[0]), read(want[0])) << "loss";
  // Backward, last stage first; gradients of the weights by name.
  std::map<std::string, std::vector<float>> grads;
  std::vector<Tensor> cot;  // cotangents of what the stage sent
  for (int32_t k = stages - 1; k >= 0; --k) {
    const parallel::PipelineStage& s = st[static_cast<size_t>(k)];
    std::vector<Tensor> p = inputs[static_cast<size_t>(k)];
    p.insert(p.end(), cot.begin(), cot.end());
    sched::Executable be(s.backward, cpu);
    std::vector<Tensor> out = be.run(ptrs(with_weights(s, p)));
    size_t o = k == stages - 1 ? 1 : 0;  // the last stage returns the loss first
    if (k == stages - 1) EXPECT_EQ(read(out[0]), read(want[0]));
    cot.assign(out.begin() + static_cast<std::ptrdiff_t>(o),
               out.begin() + static_cast<std::ptrdiff_t>(o + s.recv.size()));
    o += s.recv.size();
    for (const std::string& w : s.weights) grads[w] = read(out[o++]);
    EXPECT_EQ(o, out.size());
  }
  for (size_t l = 0; l < layout.size(); ++l) {
    const std::vector<float> g = grads.at("w" + std::to_string(l));
    const std::vector<float> r = read(want[1 + l]);
    ASSERT_EQ(g.size(), r.size());
    for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], r[i], 1e-5f * (1 + std::abs(r[i]))) << "w" << l << "[" << i << "]";
  }
}

TEST(PipelineSplit, TwoStagesChainToTheWholeGraph) { check_stages({0, 0, 1, 1}, 2); }

TEST(PipelineSplit, ThreeStagesRelayTheSkipValueThroughTheMiddle) {
  check_stages({0, 1, 1, 2}, 3);
  Net net({0, 1, 1, 2});
  const parallel::PipelineStage mid = parallel::pipeline_stage(net.g, 3, 1, net.marks);
  // Stage 1 receives layer 0's output (once: the same value feeds its
  // matmul and is relayed) and sends layer 2's output and the relayed skip.
  EXPECT_EQ(mid.recv.size(), 1u);
  EXPECT_EQ(mid.send.size(), 2u);
  EXPECT_TRUE(mid.data_inputs.empty());
  EXPECT_EQ(mid.weights, (std::vector<std::string>{"w1", "w2"}));
  const parallel::PipelineStage last = parallel::pipeline_stage(net.g, 3, 2, net.marks);
  EXPECT_EQ(last.data_inputs, (std::vector<int32_t>{1}));  // the target only
  EXPECT_EQ(last.recv.size(), 2u);
}

// No marks: the cost model cuts the graph into contiguous runs; the loss's
// elementwise ops weigh about as much as a layer at these sizes, so two
// stages take layers 0-2 and layer 3 + the loss.
TEST(PipelineSplit, WithoutMarksTheCostModelBalancesTheStages) {
  check_stages({0, 0, 0, 0}, 2, true);
  Net net({0, 0, 0, 0});
  const parallel::PipelineStage a = parallel::pipeline_stage(net.g, 2, 0, {});
  const parallel::PipelineStage b = parallel::pipeline_stage(net.g, 2, 1, {});
  EXPECT_EQ(a.weights, (std::vector<std::string>{"w0", "w1", "w2"}));
  EXPECT_EQ(b.weights, (std::vector<std::string>{"w3"}));
  // The cut sits after a layer's relu (not inside one, where the matmul's
  // output and the skip would cross as well as ... the same two values):
  // the activation and the skip cross.
  EXPECT_EQ(a.send.size(), 2u);
  const std::vector<parallel::StageMark> m = parallel::balanced_marks(net.g, 4);
  ASSERT_EQ(m.size(), 4u);
  for (size_t j = 1; j < m.size(); ++j) EXPECT_EQ(m[j].first, m[j - 1].end);
  check_stages({0, 0, 0, 0}, 4, true);
}

TEST(PipelineSplit, StageRulesAndErrors) {
  Net net({0, 0, 1, 1});
  const std::vector<int32_t> s = parallel::assign_stages(net.g, 2, net.marks);
  // The loss's ops are unmarked and follow the last layer: stage 1.
  EXPECT_EQ(s[static_cast<size_t>(net.g.outputs()[0].node)], 1);
  // A stage that reads a later stage's value.
  Net back({1, 0});
  try {
    parallel::assign_stages(back.g, 2, back.marks);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("stages must follow the data flow"), std::string::npos) << e.what();
  }
  // An empty stage, a stage past pipeline_stages.
  try {
    parallel::assign_stages(net.g, 3, net.marks);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pipeline stage 2 of 3 has no ops"), std::string::npos) << e.what();
  }
  Net far({0, 3});
  EXPECT_THROW(parallel::assign_stages(far.g, 2, far.marks), Error);
  // A weight read in two stages.
  ir::Graph g{"tied"};
  const ir::Value x = g.add_input("x", SPORA_DTYPE_F32, S({kB, kD}));
  const ir::Value w = g.add_weight("w", SPORA_DTYPE_F32, S({kD, kD}));
  const ir::Value a = g.add_op("matmul", {x, w}, {})[0];
  const ir::Value b = g.add_op("matmul", {a, w}, {})[0];
  g.set_outputs({g.add_op("sum", {b}, {})[0]});
  std::vector<parallel::StageMark> m = {{a.node, a.node + 1, 0}, {b.node, b.node + 1, 1}};
  try {
    parallel::assign_stages(g, 2, m);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Parameter 'w' is read in pipeline stages 0 and 1"), std::string::npos)
        << e.what();
  }
  // Only a scalar loss can be pipelined.
  ir::Graph two{"two"};
  const ir::Value y = two.add_input("y", SPORA_DTYPE_F32, S({2}));
  two.set_outputs({y, y});
  EXPECT_THROW(parallel::pipeline_stage(two, 1, 0, {}), Error);
}

}  // namespace
}  // namespace spora
