// The cost model and the strategy search of auto_parallel
// (parallel/cost_model.h, parallel/search.h; docs/parallel.md): formulas
// checked against hand-computed numbers, and searches on small training
// steps whose best plan is known by hand.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "autodiff/grad.h"
#include "ir/graph.h"
#include "ir/op.h"
#include "ir/sharding.h"
#include "parallel/cost_model.h"
#include "parallel/search.h"
#include "parallel/spmd_pass.h"
#include "support/error.h"

namespace spora {
namespace {

using parallel::CostModel;
using parallel::DeviceSpec;
using parallel::Topology;

Shape shp(std::initializer_list<int64_t> d) {
  Shape s;
  for (int64_t v : d) s.push_back(v);
  return s;
}

TensorLayout lay(std::initializer_list<int> dims, uint32_t partial = 0) {
  TensorLayout l;
  l.dims = dims;
  l.partial = partial;
  return l;
}

TensorMeta f32(std::initializer_list<int64_t> d) { return {SPORA_DTYPE_F32, shp(d)}; }

Topology topo(int64_t per_node, double intra_bw, double intra_lat, double inter_bw, double inter_lat) {
  Topology t;
  t.devices_per_node = per_node;
  t.intra = {intra_bw, intra_lat};
  t.inter = {inter_bw, inter_lat};
  return t;
}

TEST(CostModel, AxisLinkIsIntraNodeOnlyWhenTheGroupStaysInOneNode) {
  const Topology t = topo(4, 100e9, 1e-6, 10e9, 1e-5);
  CostModel m({2, 4}, DeviceSpec{}, t);
  EXPECT_EQ(m.axis_link(1).bandwidth, 100e9);  // ranks r..r+3: one node
  EXPECT_EQ(m.axis_link(0).bandwidth, 10e9);   // ranks r, r+4: two nodes
  CostModel m8({8}, DeviceSpec{}, t);
  EXPECT_EQ(m8.axis_link(0).latency, 1e-5);
  CostModel m4({4, 1}, DeviceSpec{}, t);  // axis 0 spans 4 ranks, one node
  EXPECT_EQ(m4.axis_link(0).bandwidth, 100e9);
}

TEST(CostModel, RingCollectivesFollowTheAlphaBetaFormulas) {
  CostModel m({4}, DeviceSpec{}, topo(8, 100e9, 1e-6, 10e9, 1e-5));
  // all_reduce: 2(n-1) alpha + 2 (n-1)/n S/B = 6e-6 + 1.5 * 1e9 / 1e11.
  EXPECT_DOUBLE_EQ(m.all_reduce(0, 1e9), 6e-6 + 0.015);
  // all_gather of a 4e8-byte result: 3e-6 + 0.75 * 4e8 / 1e11.
  EXPECT_DOUBLE_EQ(m.all_gather(0, 4e8), 3e-6 + 0.003);
  EXPECT_DOUBLE_EQ(m.reduce_scatter(0, 4e8), 3e-6 + 0.003);
  EXPECT_DOUBLE_EQ(m.all_to_all(0, 1e8), 3e-6 + 0.00075);
  CostModel one({1}, DeviceSpec{}, Topology{});
  EXPECT_EQ(one.all_reduce(0, 1e9), 0.0);
}

TEST(CostModel, ComputeIsTheRooflineOfTheOpsEstimate) {
  DeviceSpec d;
  d.peak_flops = 1e12;
  d.mem_bandwidth = 1e11;
  CostModel m({4}, d, Topology{});
  EXPECT_DOUBLE_EQ(m.compute_time(Cost{2e12, 1e9}, 4), 0.5);   // flop-bound
  EXPECT_DOUBLE_EQ(m.compute_time(Cost{1e6, 1e11}, 1), 1.0);   // bandwidth-bound
  // matmul (128,256)x(256,64): 2*128*64*256 flops, 4*(128*256+256*64+128*64) bytes.
  const OpDef* mm = OpRegistry::get().find("matmul");
  const double flops = 2.0 * 128 * 64 * 256, bytes = 4.0 * (128 * 256 + 256 * 64 + 128 * 64);
  EXPECT_DOUBLE_EQ(m.op_time(*mm, {f32({128, 256}), f32({256, 64})}, Attrs{}, 2),
                   std::max(flops / 1e12, bytes / 1e11) / 2);
}

TEST(CostModel, RedistributionPricesWhatThePassInserts) {
  const double B = 1e9, a = 1e-6;
  CostModel m({4}, DeviceSpec{}, topo(8, B, a, B, a));
  const TensorMeta t = f32({64, 32});  // 8192 bytes
  EXPECT_DOUBLE_EQ(m.local_bytes(t, lay({0, -1})), 2048);
  // partial -> split: one reduce_scatter of the whole 8192-byte buffer.
  EXPECT_DOUBLE_EQ(m.redistribute(t, lay({-1, -1}, 1), lay({0, -1})), 3 * a + 0.75 * 8192 / B);
  // partial -> replicated: all_reduce.
  EXPECT_DOUBLE_EQ(m.redistribute(t, lay({-1, -1}, 1), lay({-1, -1})), 6 * a + 1.5 * 8192 / B);
  // split rows -> split columns: one all_to_all of the 2048-byte block.
  EXPECT_DOUBLE_EQ(m.redistribute(t, lay({0, -1}), lay({-1, 0})), 3 * a + 0.75 * 2048 / B);
  // split -> replicated: all_gather into 8192 bytes.
  EXPECT_DOUBLE_EQ(m.redistribute(t, lay({0, -1}), lay({-1, -1})), 3 * a + 0.75 * 8192 / B);
  // replicated -> split: a local slice, free.
  EXPECT_EQ(m.redistribute(t, lay({-1, -1}), lay({0, -1})), 0.0);
}

TEST(CostModel, BadDescriptionsAreErrors) {
  DeviceSpec d;
  d.peak_flops = 0;
  EXPECT_THROW(CostModel({4}, d, Topology{}), Error);
  EXPECT_THROW(CostModel({4}, DeviceSpec{}, topo(0, 1, 0, 1, 0)), Error);
}

// One SGD training step of x(b, i) -> matmul w1 (i, h) -> relu -> matmul w2
// (h, o) -> sum(y * y): forward, gradients (autodiff) and the update, with the
// updated weights as outputs 1 and 2 tied to w1 and w2.
struct Step {
  ir::Graph g;
  std::map<size_t, std::string> ties;
};

Step mlp_step(int64_t b, int64_t i, int64_t h, int64_t o) {
  ir::Graph f;
  const ir::Value x = f.add_input("x", SPORA_DTYPE_F32, shp({b, i}));
  const ir::Value w1 = f.add_weight("w1", SPORA_DTYPE_F32, shp({i, h}));
  const ir::Value w2 = f.add_weight("w2", SPORA_DTYPE_F32, shp({h, o}));
  const ir::Value hdn = f.add_op("relu", {f.add_op("matmul", {x, w1}, Attrs{})[0]}, Attrs{})[0];
  const ir::Value y = f.add_op("matmul", {hdn, w2}, Attrs{})[0];
  Attrs all;
  all.set("axes", AttrValue::of_ints({0, 1}));
  // sum(y * y): the loss needs y whole (a partial y must be all-reduced first).
  const ir::Value loss = f.add_op("sum", {f.add_op("mul", {y, y}, Attrs{})[0]}, all)[0];
  f.set_outputs({loss});
  Step s;
  s.g = autodiff::value_and_grad(f, {w1.node, w2.node}, 0);
  // outputs now: loss, dw1, dw2
  const ir::Value dw1 = s.g.outputs()[1], dw2 = s.g.outputs()[2];
  const ir::Value lr = s.g.add_input("lr", SPORA_DTYPE_F32, shp({}));
  const ir::Value scale = s.g.add_input("grad_scale", SPORA_DTYPE_F32, shp({}));
  const std::vector<ir::Value> upd = s.g.add_op("sgd_update", {lr, scale, w1, w2, dw1, dw2}, Attrs{});
  s.g.set_outputs({s.g.outputs()[0], upd[0], upd[1]});
  s.ties = {{1, "w1"}, {2, "w2"}};
  return s;
}

parallel::SearchOptions options(std::vector<int64_t> mesh, double peak, double bw, double limit) {
  parallel::SearchOptions o;
  o.mesh.shape = std::move(mesh);
  o.device.peak_flops = peak;
  o.device.mem_bandwidth = 1e12;
  o.device.memory_bytes = 80e9;
  o.topology = topo(8, bw, 1e-6, bw, 1e-6);
  o.memory_limit = limit;
  return o;
}

// The plan as text, for failure messages.
std::string dump(const parallel::SearchResult& r) {
  std::string s = "step " + std::to_string(r.step_time) + " s, memory " + std::to_string(r.memory_bytes) +
                  " (weights " + std::to_string(r.weight_bytes) + ")\n";
  for (const auto& [name, l] : r.weights) s += "  " + name + " " + l.str() + "\n";
  for (const auto& n : r.nodes) {
    s += "  %" + std::to_string(n.node) + " " + n.op + " '" + n.strategy + "' (";
    for (const auto& l : n.in) s += l.str() + " ";
    s += ") -> (";
    for (const auto& l : n.out) s += l.str() + " ";
    s += ") compute " + std::to_string(n.compute) + " comm " + std::to_string(n.comm) + "\n";
  }
  return s;
}

const parallel::NodeChoice& first(const parallel::SearchResult& r, const std::string& op) {
  for (const auto& n : r.nodes)
    if (n.op == op) return n;
  throw Error(Code::kInternal, "no " + op);
}

TEST(StrategySearch, TinyMlpWithALargeBatchStaysDataParallel) {
  // Data parallel all-reduces the weight gradients (16x16 + 16x64 floats);
  // splitting the hidden layer would all-reduce y (4096x64 floats).
  Step s = mlp_step(4096, 16, 16, 64);
  parallel::SearchOptions o = options({4}, 1e9, 1e10, 0);
  o.ties = s.ties;
  const parallel::SearchResult r = parallel::search(s.g, o);
  EXPECT_TRUE(r.fits);
  // Weights replicated, the batch split: data parallel.
  EXPECT_TRUE(r.weights.at("w1").is_replicated()) << dump(r);
  EXPECT_TRUE(r.weights.at("w2").is_replicated()) << r.weights.at("w2").str();
  EXPECT_EQ(first(r, "matmul").strategy, "4,1;1,1");
  EXPECT_EQ(first(r, "matmul").out[0].str(), "[S0, R]");
  // Every matmul's work is divided by 4: the step costs about a quarter of
  // the replicated one (the same search on a 1-device mesh).
  parallel::SearchOptions one = options({1}, 1e9, 1e10, 0);
  one.ties = s.ties;
  const parallel::SearchResult r1 = parallel::search(s.g, one);
  EXPECT_EQ(r1.comm_time, 0.0);
  EXPECT_LT(r.step_time, 0.3 * r1.step_time);
  EXPECT_GT(r.comm_time, 0.0);  // the weight gradients are all-reduced
  // The pass applies the plan unchanged: the rank's x block is a slice and
  // the weights stay whole.
  parallel::PartitionOptions po;
  po.mesh.shape = {4};
  po.mesh.groups = {7};
  po.semi_auto = false;
  po.ties = s.ties;
  po.strategies = r.strategies;
  po.weights = r.weights;
  const parallel::PartitionResult p = parallel::partition(s.g, po);
  EXPECT_EQ(p.weights[0].local, shp({16, 16}));
  int all_reduces = 0;
  std::string ops;
  for (const auto& n : p.graph.nodes())
    if (n.op) {
      ops += n.op->name + " ";
      if (n.op->name == "all_reduce" || n.op->name == "reduce_scatter") ++all_reduces;
    }
  // The loss and both weight gradients are summed over the batch split: an
  // all_reduce each, or (the search may prefer it) a reduce_scatter into a
  // split update whose result is gathered back, which costs the same and
  // divides the update's work.
  EXPECT_GE(all_reduces, 3) << ops << "\n" << dump(r);
}

TEST(StrategySearch, WideHiddenLayerUnderAMemoryLimitIsSplit) {
  // w1 (32, 4096) + w2 (4096, 10) in f32: 688,128 bytes replicated; the
  // limit of 450,000 bytes per device forbids replicating them.
  Step s = mlp_step(16, 32, 4096, 10);
  parallel::SearchOptions o = options({4}, 1e12, 1e10, 450000);
  o.ties = s.ties;
  const parallel::SearchResult r0 = [&] {
    parallel::SearchOptions u = o;
    u.memory_limit = 1e12;
    return parallel::search(s.g, u);
  }();
  EXPECT_TRUE(r0.weights.at("w1").is_replicated());  // unconstrained: tiny batch, no reason to split
  const parallel::SearchResult r = parallel::search(s.g, o);
  ASSERT_TRUE(r.fits) << dump(r);
  EXPECT_LE(r.memory_bytes, 450000);
  EXPECT_GT(r.lambda, 1e-14);  // the memory penalty made it fit
  EXPECT_TRUE(r.weights.at("w1").is_split()) << r.weights.at("w1").str();
  EXPECT_TRUE(r.weights.at("w2").is_split()) << r.weights.at("w2").str();
  EXPECT_LE(r.weight_bytes, 688128.0 / 4 + 1);
  // Megatron's pair: hidden columns of w1, hidden rows of w2.
  EXPECT_EQ(r.weights.at("w1").str(), "[R, S0]");
  EXPECT_EQ(r.weights.at("w2").str(), "[S0, R]");
  // The pass gives each rank a quarter of each weight.
  parallel::PartitionOptions po;
  po.mesh.shape = {4};
  po.mesh.groups = {7};
  po.semi_auto = false;
  po.ties = s.ties;
  po.strategies = r.strategies;
  po.weights = r.weights;
  const parallel::PartitionResult p = parallel::partition(s.g, po);
  EXPECT_EQ(p.weights[0].local, shp({32, 1024}));
  EXPECT_EQ(p.weights[1].local, shp({1024, 10}));
}

TEST(StrategySearch, NothingFitsIsReportedNotHidden) {
  Step s = mlp_step(16, 32, 4096, 10);
  parallel::SearchOptions o = options({4}, 1e12, 1e10, 1000);
  o.ties = s.ties;
  const parallel::SearchResult r = parallel::search(s.g, o);
  EXPECT_FALSE(r.fits);
  EXPECT_GT(r.memory_bytes, 1000);
}

TEST(StrategySearch, AUsersStrategyIsKept) {
  ir::Graph f;
  const ir::Value x = f.add_input("x", SPORA_DTYPE_F32, shp({64, 16}));
  const ir::Value w = f.add_weight("w", SPORA_DTYPE_F32, shp({16, 64}));
  Attrs a;
  a.set("strategy", AttrValue::of_string("1,1;1,4"));
  f.set_outputs({f.add_op("matmul", {x, w}, a)[0]});
  const parallel::SearchResult r = parallel::search(f, options({4}, 1e9, 1e10, 0));
  EXPECT_EQ(r.strategies.at(first(r, "matmul").node), "1,1;1,4");
  EXPECT_EQ(r.weights.at("w").str(), "[R, S0]");
}

}  // namespace
}  // namespace spora

namespace spora {
namespace {

// A deep MLP step (layers x (matmul, relu), sum(y*y), SGD) on a (2, 4)
// mesh named (dp, mp): the search must come back with a consistent plan
// the pass applies; prints how long it took.
TEST(StrategySearch, DeepMlpOnA2DMesh) {
  const int layers = 12;
  const int64_t batch = 256, width = 512;
  ir::Graph f;
  const ir::Value x = f.add_input("x", SPORA_DTYPE_F32, shp({batch, width}));
  std::vector<int32_t> ws;
  ir::Value h = x;
  for (int l = 0; l < layers; ++l) {
    const ir::Value w = f.add_weight("w" + std::to_string(l), SPORA_DTYPE_F32, shp({width, width}));
    ws.push_back(w.node);
    h = f.add_op("relu", {f.add_op("matmul", {h, w}, Attrs{})[0]}, Attrs{})[0];
  }
  Attrs all;
  all.set("axes", AttrValue::of_ints({0, 1}));
  f.set_outputs({f.add_op("sum", {f.add_op("mul", {h, h}, Attrs{})[0]}, all)[0]});
  ir::Graph g = autodiff::value_and_grad(f, ws, 0);
  const ir::Value lr = g.add_input("lr", SPORA_DTYPE_F32, shp({}));
  const ir::Value scale = g.add_input("grad_scale", SPORA_DTYPE_F32, shp({}));
  std::vector<ir::Value> args = {lr, scale};
  for (int32_t w : ws) args.push_back({w, 0});
  for (int l = 0; l < layers; ++l) args.push_back(g.outputs()[static_cast<size_t>(l + 1)]);
  const std::vector<ir::Value> upd = g.add_op("sgd_update", args, Attrs{});
  std::vector<ir::Value> outs = {g.outputs()[0]};
  std::map<size_t, std::string> ties;
  for (int l = 0; l < layers; ++l) {
    outs.push_back(upd[static_cast<size_t>(l)]);
    ties[static_cast<size_t>(l + 1)] = "w" + std::to_string(l);
  }
  g.set_outputs(outs);
  parallel::SearchOptions o = options({2, 4}, 100e12, 25e9, 0);
  o.mesh.names = {"dp", "mp"};
  o.ties = ties;
  o.memory_limit = 12.0 * 512 * 512 * 4 / 2;  // half the weights' bytes: something must be split
  const auto t0 = std::chrono::steady_clock::now();
  const parallel::SearchResult r = parallel::search(g, o);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("deep MLP: %zu nodes, %d programmes, %.3f s, step %.3g s, memory %.0f (limit %.0f)\n", g.nodes().size(),
              r.evaluations, secs, r.step_time, r.memory_bytes, r.memory_limit);
  EXPECT_TRUE(r.fits) << dump(r);
  if (std::getenv("SPORA_TEST_VERBOSE")) std::printf("%s", dump(r).c_str());
  parallel::PartitionOptions po;
  po.mesh.shape = {2, 4};
  po.mesh.names = {"dp", "mp"};
  po.mesh.groups = {7, 8};
  po.semi_auto = false;
  po.ties = ties;
  po.strategies = r.strategies;
  po.weights = r.weights;
  const parallel::PartitionResult p = parallel::partition(g, po);
  double local = 0;
  for (const auto& w : p.weights) local += static_cast<double>(w.local.numel()) * 4;
  EXPECT_DOUBLE_EQ(local, r.weight_bytes);  // the pass holds what the search priced
}

}  // namespace
}  // namespace spora

namespace spora {
namespace {

// The training step of a `layers`-deep relu MLP (batch x width, square
// weights w0..), loss sum(h * h), gradients of every weight.
ir::Graph relu_mlp_step(int layers, int64_t batch, int64_t width) {
  ir::Graph f;
  std::vector<int32_t> ws;
  ir::Value h = f.add_input("x", SPORA_DTYPE_F32, shp({batch, width}));
  for (int l = 0; l < layers; ++l) {
    const ir::Value w = f.add_weight("w" + std::to_string(l), SPORA_DTYPE_F32, shp({width, width}));
    ws.push_back(w.node);
    h = f.add_op("relu", {f.add_op("matmul", {h, w}, Attrs{})[0]}, Attrs{})[0];
  }
  Attrs all;
  all.set("axes", AttrValue::of_ints({0, 1}));
  f.set_outputs({f.add_op("sum", {f.add_op("mul", {h, h}, Attrs{})[0]}, all)[0]});
  return autodiff::value_and_grad(f, ws, 0);
}

// The plan applied by the SPMD pass on a (dp, mp) mesh: the weights' local
// shards hold exactly the bytes the search reported (f32).
void expect_partition_holds_plan_bytes(const ir::Graph& g, std::vector<int64_t> mesh,
                                       const parallel::SearchResult& r) {
  parallel::PartitionOptions po;
  po.mesh.shape = std::move(mesh);
  po.mesh.names = {"dp", "mp"};
  po.mesh.groups = {7, 8};
  po.semi_auto = false;
  po.strategies = r.strategies;
  po.weights = r.weights;
  const parallel::PartitionResult p = parallel::partition(g, po);
  double local = 0;
  for (const auto& w : p.weights) local += static_cast<double>(w.local.numel()) * 4;
  EXPECT_DOUBLE_EQ(local, r.weight_bytes);
}

// Restarts under memory penalties (SearchOptions::restarts) only ever
// replace the unpenalised plan by a faster one that fits; and the pass
// applies the result. A 6-layer MLP step on a named (4, 4) mesh, no limit.
TEST(StrategySearch, RestartsNeverReturnASlowerPlan) {
  const int layers = 6;
  const ir::Graph g = relu_mlp_step(layers, 512, 256);
  parallel::SearchOptions o = options({4, 4}, 100e12, 25e9, 0);
  o.mesh.names = {"dp", "mp"};
  o.restarts = 0;
  const parallel::SearchResult r0 = parallel::search(g, o);
  o.restarts = 3;
  const parallel::SearchResult r3 = parallel::search(g, o);
  ASSERT_TRUE(r0.fits);
  EXPECT_TRUE(r3.fits);
  EXPECT_EQ(r0.evaluations, 1);
  EXPECT_EQ(r3.evaluations, 4);  // the unpenalised programme and three restarts
  EXPECT_LE(r3.step_time, r0.step_time) << dump(r3);
  expect_partition_holds_plan_bytes(g, {4, 4}, r3);
}


// Starting plans (SearchOptions::starts, data_parallel_start): a written
// plan is priced as its propagation gives it (evaluate), and a search given
// it as a start never returns a slower fitting plan.
TEST(StrategySearch, StartsArePricedAsWrittenAndNeverLost) {
  const int layers = 4;
  const ir::Graph g = relu_mlp_step(layers, 64, 1024);
  parallel::SearchOptions o = options({2, 4}, 100e12, 25e9, 0);
  o.mesh.names = {"dp", "mp"};
  // Megatron's pairs: even layers split by columns over mp, odd by rows;
  // the batch over dp. A layout that does not divide stays replicated.
  parallel::StartPlan meg;
  meg.name = "megatron";
  meg.inputs["x"] = lay({0, kReplicated});
  for (int l = 0; l < layers; ++l)
    meg.weights["w" + std::to_string(l)] = l % 2 == 0 ? lay({kReplicated, 1}) : lay({1, kReplicated});
  const parallel::SearchResult m = parallel::evaluate(g, o, meg);
  EXPECT_EQ(m.origin, "megatron");
  EXPECT_EQ(m.evaluations, 0);
  for (int l = 0; l < layers; ++l) EXPECT_EQ(m.weights.at("w" + std::to_string(l)), meg.weights.at("w" + std::to_string(l)));
  // Column then row: the pair's forward needs no redistribution but the
  // partial sum after the row split; every matmul's compute is split 8 ways.
  int split8 = 0;
  for (const parallel::NodeChoice& n : m.nodes)
    if (n.op == "matmul" && !n.out.empty() && n.out[0].dims[0] == 0) ++split8;
  EXPECT_GE(split8, layers) << dump(m);
  // The same plan written as strategies on the ops and partitioned holds
  // exactly the bytes evaluate reported.
  expect_partition_holds_plan_bytes(g, {2, 4}, m);
  // A start that does not divide (a 1024 dim over a 3-way axis would; 64
  // rows over 2 do) is taken as far as it goes: a layout of the wrong rank
  // is ignored, the weight replicated.
  parallel::StartPlan bad = meg;
  bad.weights["w0"] = lay({0});
  const parallel::SearchResult b = parallel::evaluate(g, o, bad);
  EXPECT_EQ(b.weights.at("w0"), lay({kReplicated, kReplicated}));
  // Searches: without the start, and with it; with it, never slower.
  o.data_parallel_start = false;
  const parallel::SearchResult plain = parallel::search(g, o);
  o.starts = {meg};
  const parallel::SearchResult with = parallel::search(g, o);
  ASSERT_TRUE(m.fits);
  EXPECT_TRUE(with.fits);
  EXPECT_LE(with.step_time, m.step_time * (1 + 1e-9)) << dump(with);
  EXPECT_LE(with.step_time, plain.step_time * (1 + 1e-9)) << dump(with);
  // Under a memory limit only the start meets, the start's plan (or a
  // refinement of it) is returned rather than the programme's.
  o.memory_limit = m.memory_bytes * 1.0001;
  const parallel::SearchResult lim = parallel::search(g, o);
  EXPECT_TRUE(lim.fits);
  EXPECT_LE(lim.step_time, m.step_time * (1 + 1e-9));
  // Data parallelism as the default start: never slower than itself.
  parallel::StartPlan dp;
  dp.name = "dp";
  dp.inputs["x"] = lay({0, kReplicated});
  const parallel::SearchResult dpe = parallel::evaluate(g, o, dp);
  o.starts.clear();
  o.memory_limit = 0;
  o.data_parallel_start = true;
  const parallel::SearchResult d = parallel::search(g, o);
  EXPECT_LE(d.step_time, dpe.step_time * (1 + 1e-9)) << dump(d);
}

}  // namespace
}  // namespace spora
