// The SPMD pieces in isolation (docs/parallel.md): sharding rules of single
// ops, strategy parsing and its errors, and the partitioning pass on a 2x2
// mesh with named axes (the graph one rank runs: local shapes, inserted
// collectives and slices). Running partitioned graphs on real ranks is
// tests/integration/mpi/spmd.
#include <gtest/gtest.h>

#include <string>

#include "ir/graph.h"
#include "ir/printer.h"
#include "ir/sharding.h"
#include "parallel/spmd_pass.h"
#include "parallel/strategy.h"
#include "support/error.h"

namespace spora {
namespace {

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

// Runs op `name`'s rule on inputs of the given shapes and layouts.
bool rule(const char* name, const std::vector<Shape>& in, const std::vector<TensorLayout>& layouts, ShardPlan& p,
          const Attrs& attrs = {}, std::vector<int64_t> mesh = {4}) {
  ir::Graph g;
  std::vector<ir::Value> vs;
  for (size_t i = 0; i < in.size(); ++i) vs.push_back(g.add_input("x" + std::to_string(i), SPORA_DTYPE_F32, in[i]));
  const std::vector<ir::Value> out = g.add_op(name, vs, attrs);
  const ir::Node& n = g.node(out[0].node);
  ShardQuery q;
  q.op = n.op;
  q.attrs = &n.attrs;
  q.mesh = mesh;
  for (size_t i = 0; i < in.size(); ++i) q.in.push_back(g.meta(vs[i]));
  q.out = n.outputs;
  q.in_layouts = layouts;
  return n.op->sharding && n.op->sharding(q, p);
}

TEST(ShardRules, MatmulContractionSplitGivesPartialSum) {
  ShardPlan p;
  ASSERT_TRUE(rule("matmul", {shp({8, 16}), shp({16, 10})}, {lay({-1, 0}), lay({0, -1})}, p));
  EXPECT_EQ(p.out[0].str(), "[R, R]+P{0}");
  EXPECT_EQ(p.in[1].str(), "[S0, R]");
}

TEST(ShardRules, MatmulTransposedWeightFollowsSplitInput) {
  // dx = dy @ w^T with w [256, 10] split by rows: dx split by columns, local.
  Attrs t;
  t.set("transpose_b", AttrValue::of_bool(true));
  ShardPlan p;
  ASSERT_TRUE(rule("matmul", {shp({8, 10}), shp({256, 10})}, {lay({-1, -1}), lay({0, -1})}, p, t));
  EXPECT_EQ(p.out[0].str(), "[R, S0]");
  EXPECT_EQ(p.in[0].str(), "[R, R]");
}

TEST(ShardRules, AddKeepsEqualPartialsAndResolvesMixedOnes) {
  ShardPlan p;
  ASSERT_TRUE(rule("add", {shp({8, 10}), shp({8, 10})}, {lay({-1, -1}, 1), lay({-1, -1}, 1)}, p));
  EXPECT_EQ(p.out[0].str(), "[R, R]+P{0}");
  ASSERT_TRUE(rule("add", {shp({8, 10}), shp({10})}, {lay({-1, -1}, 1), lay({-1})}, p));
  EXPECT_EQ(p.out[0].str(), "[R, R]");
  EXPECT_EQ(p.in[0].str(), "[R, R]");  // the partial is all-reduced first
  ASSERT_TRUE(rule("mul", {shp({8, 10}), shp({10})}, {lay({-1, -1}, 1), lay({-1})}, p));
  EXPECT_EQ(p.out[0].str(), "[R, R]+P{0}");
}

TEST(ShardRules, BroadcastBiasFollowsSplitColumns) {
  ShardPlan p;
  ASSERT_TRUE(rule("add", {shp({8, 256}), shp({256})}, {lay({-1, 0}), lay({-1})}, p));
  EXPECT_EQ(p.out[0].str(), "[R, S0]");
  EXPECT_EQ(p.in[1].str(), "[S0]");
}

TEST(ShardRules, SoftmaxKeepsItsAxisWhole) {
  Attrs a;
  a.set("axis", AttrValue::of_int(1));
  ShardPlan p;
  ASSERT_TRUE(rule("softmax", {shp({8, 12})}, {lay({0, 0})}, p, a, {2, 2}));
  EXPECT_EQ(p.out[0].str(), "[S0, R]");
  EXPECT_EQ(p.in[0].str(), "[S0, R]");
}

TEST(ShardRules, SumOverSplitDimIsPartialMaxGathers) {
  Attrs a;
  a.set("axes", AttrValue::of_ints({0}));
  ShardPlan p;
  ASSERT_TRUE(rule("sum", {shp({8, 12})}, {lay({0, -1})}, p, a));
  EXPECT_EQ(p.out[0].str(), "[R]+P{0}");
  ASSERT_TRUE(rule("max", {shp({8, 12})}, {lay({0, -1})}, p, a));
  EXPECT_EQ(p.in[0].str(), "[R, R]");
  EXPECT_EQ(p.out[0].str(), "[R]");
}

TEST(ShardRules, ReshapeKeepsOutermostSplitAndGivesLocalShape) {
  Attrs a;
  a.set("shape", AttrValue::of_ints({8, 4, 6}));
  ShardPlan p;
  ASSERT_TRUE(rule("reshape", {shp({8, 24})}, {lay({0, -1})}, p, a));
  EXPECT_EQ(p.out[0].str(), "[S0, R, R]");
  EXPECT_EQ(p.local_attrs.get_ints("shape"), (std::vector<int64_t>{2, 4, 6}));
  // The inner dim of a merged group cannot stay split: gathered.
  a.set("shape", AttrValue::of_ints({192}));
  ASSERT_TRUE(rule("reshape", {shp({8, 24})}, {lay({-1, 0})}, p, a));
  EXPECT_EQ(p.in[0].str(), "[R, R]");
  EXPECT_EQ(p.out[0].str(), "[R]");
}

// A 2x2 mesh ("dp", "mp"): x [8, 16] @ w [16, 12] with x split by rows
// over dp and w by columns over mp; y = relu(x @ w) + b.
struct MeshFixture : ::testing::Test {
  ir::Graph g;
  parallel::PartitionOptions o;
  void SetUp() override {
    const ir::Value x = g.add_input("x", SPORA_DTYPE_F32, shp({8, 16}));
    const ir::Value w = g.add_weight("w", SPORA_DTYPE_F32, shp({16, 12}));
    const ir::Value b = g.add_weight("b", SPORA_DTYPE_F32, shp({12}));
    Attrs s;
    s.set("strategy", AttrValue::of_string("dp,1;1,mp"));
    const ir::Value y = g.add_op("matmul", {x, w}, s, {"model.py", 17})[0];
    const ir::Value r = g.add_op("relu", {y}, {})[0];
    g.set_outputs({g.add_op("add", {r, b}, {})[0]});
    o.mesh.shape = {2, 2};
    o.mesh.names = {"dp", "mp"};
    o.mesh.groups = {101, 102};
  }
};

TEST_F(MeshFixture, RankGraphHasLocalShapesAndCollectivesOverTheRightAxes) {
  o.mesh.rank = 3;  // coordinates (1, 1)
  const parallel::PartitionResult r = parallel::partition(g, o);
  ASSERT_EQ(r.weights.size(), 2u);
  EXPECT_EQ(r.weights[0].local, shp({16, 6}));
  EXPECT_EQ(r.weights[0].layout.str({"dp", "mp"}), "[R, Smp]");
  EXPECT_EQ(r.weights[1].local, shp({6}));  // the bias follows w's columns
  const std::string text = ir::to_text(r.graph);
  // x is fed whole and sliced to this rank's rows (dp coordinate 1: 4..8).
  EXPECT_NE(text.find("slice(%0) {axes=[0, 1], ends=[8, 16], starts=[4, 0]}"), std::string::npos) << text;
  // The whole output: rows gathered over dp (group 101), columns over mp (102).
  EXPECT_NE(text.find("all_gather"), std::string::npos) << text;
  EXPECT_NE(text.find("axis=0, group=101, size=2"), std::string::npos) << text;
  EXPECT_NE(text.find("axis=1, group=102, size=2"), std::string::npos) << text;
  EXPECT_EQ(r.graph.meta(r.graph.outputs()[0]).shape, shp({8, 12}));
  EXPECT_EQ(text.find("strategy"), std::string::npos) << text;
}

TEST_F(MeshFixture, StrategyErrorsNameOpLineAndNumbers) {
  o.mesh.rank = 0;
  ir::Node& mm = g.mutable_node(3);
  ASSERT_EQ(mm.op->name, "matmul");
  mm.attrs.set("strategy", AttrValue::of_string("1,1;1,3"));
  try {
    parallel::partition(g, o);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[matmul] strategy ((1, 1), (1, 3))"), std::string::npos) << m;
    EXPECT_NE(m.find("no free axis of mesh (2, 2)"), std::string::npos) << m;
    EXPECT_NE(m.find("model.py:17"), std::string::npos) << m;
  }
  mm.attrs.set("strategy", AttrValue::of_string("1,1;tp,1"));
  EXPECT_THROW(
      {
        try {
          parallel::partition(g, o);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("no axis named 'tp'"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  // Contraction dims split differently on the two inputs: not honoured.
  mm.attrs.set("strategy", AttrValue::of_string("1,dp;mp,1"));
  EXPECT_THROW(
      {
        try {
          parallel::partition(g, o);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("cannot be honoured"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
}

}  // namespace
}  // namespace spora

namespace spora {
namespace {

TEST(SpmdPass, StrategyOnAnOpWithoutARuleIsAnErrorUnderSemiAuto) {
  ir::Graph g;
  const ir::Value x = g.add_input("x", SPORA_DTYPE_F32, shp({8, 4}));
  Attrs s;
  s.set("strategy", AttrValue::of_string("2,1"));
  g.set_outputs({g.add_op("cumsum", {x}, s, {"net.py", 9})[0]});
  parallel::PartitionOptions o;
  o.mesh.shape = {2};
  o.mesh.groups = {7};
  try {
    parallel::partition(g, o);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.code(), Code::kUnimplemented);
    EXPECT_NE(m.find("[cumsum] has no sharding rule, so strategy ((2, 1),)"), std::string::npos) << m;
    EXPECT_NE(m.find("net.py:9"), std::string::npos) << m;
  }
  // Outside semi_auto the op just runs replicated.
  o.semi_auto = false;
  const parallel::PartitionResult r = parallel::partition(g, o);
  EXPECT_EQ(r.graph.meta(r.graph.outputs()[0]).shape, shp({8, 4}));
}

}  // namespace
}  // namespace spora

namespace spora {
namespace {

TEST(SpmdPass, PartialSumWantedSplitIsReduceScattered) {
  // y = x @ w with the contraction split: a partial sum; added to z split
  // by rows, it is reduce-scattered by rows rather than all-reduced.
  ir::Graph g;
  const ir::Value x = g.add_input("x", SPORA_DTYPE_F32, shp({8, 12}));
  const ir::Value z = g.add_input("z", SPORA_DTYPE_F32, shp({8, 6}));
  const ir::Value w = g.add_weight("w", SPORA_DTYPE_F32, shp({12, 6}));
  Attrs s1, s2, r;
  s1.set("strategy", AttrValue::of_string("1,2;2,1"));
  s2.set("strategy", AttrValue::of_string("2,1"));
  s2.set("shape", AttrValue::of_ints({8, 6}));
  const ir::Value y = g.add_op("matmul", {x, w}, s1)[0];
  const ir::Value zs = g.add_op("reshape", {z}, s2)[0];
  g.set_outputs({g.add_op("add", {y, zs}, {})[0]});
  parallel::PartitionOptions o;
  o.mesh.shape = {2};
  o.mesh.groups = {9};
  o.mesh.rank = 1;
  const parallel::PartitionResult res = parallel::partition(g, o);
  const std::string text = ir::to_text(res.graph);
  EXPECT_NE(text.find("reduce_scatter(%4) {axis=0, group=9, op=\"sum\", size=2} : f32[4,6]"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("all_reduce"), std::string::npos) << text;
  EXPECT_EQ(res.weights[0].local, shp({6, 6}));  // w's rows follow x's split contraction
  EXPECT_EQ(res.graph.meta(res.graph.outputs()[0]).shape, shp({8, 6}));
}

}  // namespace
}  // namespace spora

namespace spora {
namespace {

TEST(SpmdPass, SplitMovingToAnotherDimIsOneAllToAll) {
  ir::Graph g;
  const ir::Value x = g.add_input("x", SPORA_DTYPE_F32, shp({8, 6}));
  Attrs rows, cols;
  rows.set("strategy", AttrValue::of_string("2,1"));
  rows.set("shape", AttrValue::of_ints({8, 6}));
  cols.set("strategy", AttrValue::of_string("1,2"));
  cols.set("shape", AttrValue::of_ints({8, 6}));
  const ir::Value y = g.add_op("reshape", {x}, rows)[0];
  g.set_outputs({g.add_op("reshape", {y}, cols)[0]});
  parallel::PartitionOptions o;
  o.mesh.shape = {2};
  o.mesh.groups = {9};
  const parallel::PartitionResult res = parallel::partition(g, o);
  const std::string text = ir::to_text(res.graph);
  EXPECT_NE(text.find("all_to_all(%2) {concat_axis=0, group=9, size=2, split_axis=1} : f32[8,3]"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("all_gather(%2)"), std::string::npos) << text;
}

}  // namespace
}  // namespace spora

namespace spora {
namespace {

TEST(ShardRules, LayerNormKeepsLeadingSplitsAndItsGradientSumsArePartial) {
  Attrs a;
  a.set("normalized_ndim", AttrValue::of_int(1));
  ShardPlan p;
  ASSERT_TRUE(rule("layer_norm", {shp({8, 4, 16}), shp({16}), shp({16})}, {lay({0, -1, 0}), lay({-1}), lay({-1})}, p,
                   a));
  EXPECT_EQ(p.in[0].str(), "[S0, R, R]");  // the normalised dim is gathered
  EXPECT_EQ(p.out[0].str(), "[S0, R, R]");
  EXPECT_EQ(p.out[1].str(), "[S0, R]");
  ASSERT_TRUE(rule("layer_norm_grad", {shp({8, 16}), shp({8, 16}), shp({16}), shp({8}), shp({8})},
                   {lay({0, -1}), lay({0, -1}), lay({-1}), lay({0}), lay({0})}, p, a));
  EXPECT_EQ(p.out[0].str(), "[S0, R]");
  EXPECT_EQ(p.out[1].str(), "[R]+P{0}");
  EXPECT_EQ(p.out[2].str(), "[R]+P{0}");
}

TEST(ShardRules, EmbeddingCarriesIdsSplitsAndWeightColumns) {
  ir::Graph g;
  const ir::Value w = g.add_input("w", SPORA_DTYPE_F32, shp({20, 16}));
  const ir::Value ids = g.add_input("ids", SPORA_DTYPE_I64, shp({4, 6}));
  const ir::Value y = g.add_op("embedding", {w, ids}, {})[0];
  const ir::Node& n = g.node(y.node);
  ShardQuery q;
  q.op = n.op;
  q.attrs = &n.attrs;
  q.mesh = {2, 2};
  q.in = {g.meta(w), g.meta(ids)};
  q.out = n.outputs;
  q.in_layouts = {lay({0, 1}), lay({0, -1})};
  ShardPlan p;
  ASSERT_TRUE(n.op->sharding(q, p));
  EXPECT_EQ(p.in[0].str(), "[R, S1]");  // the vocabulary is gathered
  EXPECT_EQ(p.out[0].str(), "[S0, R, S1]");
}

}  // namespace
}  // namespace spora

namespace spora {
namespace {

TEST(ShardRules, ConvSplitsBatchAndOutputChannelsAndItsGradientsSumToPartials) {
  Attrs a;
  a.set("padding", AttrValue::of_ints({1, 1}));
  ShardPlan p;
  ASSERT_TRUE(rule("conv2d", {shp({8, 2, 6, 6}), shp({4, 2, 3, 3})}, {lay({0, -1, -1, -1}), lay({1, -1, -1, -1})}, p, a,
                   {2, 2}));
  EXPECT_EQ(p.out[0].str(), "[S0, S1, R, R]");
  Attrs gi = a;
  gi.set("input_shape", AttrValue::of_ints({8, 2, 6, 6}));
  ASSERT_TRUE(rule("conv2d_grad_input", {shp({8, 4, 6, 6}), shp({4, 2, 3, 3})},
                   {lay({0, 1, -1, -1}), lay({1, -1, -1, -1})}, p, gi, {2, 2}));
  EXPECT_EQ(p.out[0].str(), "[S0, R, R, R]+P{1}");
  EXPECT_EQ(p.local_attrs.get_ints("input_shape"), (std::vector<int64_t>{4, 2, 6, 6}));
  Attrs gw = a;
  gw.set("weight_shape", AttrValue::of_ints({4, 2, 3, 3}));
  ASSERT_TRUE(rule("conv2d_grad_weight", {shp({8, 2, 6, 6}), shp({8, 4, 6, 6})},
                   {lay({0, -1, -1, -1}), lay({0, 1, -1, -1})}, p, gw, {2, 2}));
  EXPECT_EQ(p.out[0].str(), "[S1, R, R, R]+P{0}");
  EXPECT_EQ(p.local_attrs.get_ints("weight_shape"), (std::vector<int64_t>{2, 2, 3, 3}));
}

}  // namespace
}  // namespace spora

#include "ir/builder.h"

namespace spora {
namespace {

TEST(SpmdPass, OpsBuiltByRulesDoNotInheritTheUsersStrategy) {
  // Gradient rules hand a forward node's attributes on (conv2d's to
  // conv2d_grad_input): the strategy must stay on the forward node.
  ir::Graph g;
  const ir::Value x = g.add_input("x", SPORA_DTYPE_F32, shp({4, 4}));
  Attrs a;
  a.set("strategy", AttrValue::of_string("2,1"));
  a.set("axis", AttrValue::of_int(1));
  const ir::Value y = g.add_op("softmax", {x}, a)[0];
  EXPECT_TRUE(g.node(y.node).attrs.find("strategy"));
  ir::Builder b(g, {});
  const ir::Value z = b.op("softmax", {y}, g.node(y.node).attrs);
  EXPECT_FALSE(g.node(z.node).attrs.find("strategy"));
  EXPECT_EQ(g.node(z.node).attrs.get_int("axis"), 1);
}

}  // namespace
}  // namespace spora

namespace spora {
namespace {

// one_hot (cross_entropy's gradient one-hots the targets): the indices'
// splits carry over, the depth dim stays whole; a split that does not
// divide is dropped, and an axis is used once.
TEST(ShardRules, OneHotCarriesTheIndicesSplitsAndKeepsDepthWhole) {
  ir::Graph g;
  const ir::Value ids = g.add_input("ids", SPORA_DTYPE_I32, shp({4, 6}));
  Attrs a;
  a.set("depth", AttrValue::of_int(10));
  const ir::Value y = g.add_op("one_hot", {ids}, a)[0];
  const ir::Node& n = g.node(y.node);
  ASSERT_TRUE(n.op->sharding);
  ShardQuery q;
  q.op = n.op;
  q.attrs = &n.attrs;
  q.mesh = {2, 4};
  q.in = {g.meta(ids)};
  q.out = n.outputs;
  q.in_layouts = {lay({0, -1})};
  ShardPlan p;
  ASSERT_TRUE(n.op->sharding(q, p));
  EXPECT_EQ(p.in[0].str(), "[S0, R]");
  EXPECT_EQ(p.out[0].str(), "[S0, R, R]");
  q.in_layouts = {lay({1, 0}, 2)};  // splits kept (4 | 4, 2 | 6); indices are never partial sums
  ASSERT_TRUE(n.op->sharding(q, p));
  EXPECT_EQ(p.in[0].str(), "[S1, S0]");
  EXPECT_EQ(p.out[0].str(), "[S1, S0, R]");
  q.in_layouts = {lay({-1, 1})};  // 6 does not divide into 4 blocks: gathered
  ASSERT_TRUE(n.op->sharding(q, p));
  EXPECT_EQ(p.in[0].str(), "[R, R]");
  EXPECT_EQ(p.out[0].str(), "[R, R, R]");
}

}  // namespace
}  // namespace spora
