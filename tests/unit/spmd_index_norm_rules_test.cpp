// Sharding rules of the indexing ops (gather, index_select, gather_nd,
// gather_elements, scatter_add; slice, which gather_nd's gradient uses) and of batch_norm / group_norm and their
// gradients (docs/parallel.md, rule table), one op at a time; then the
// partitioning pass on graphs that use them: the embedding's gradient
// (scatter_add of split tokens) is a local scatter plus one all_reduce, a
// batch split reaching a training batch_norm moves to the channels by one
// all_to_all, and a strategy asking batch_norm for a batch split is refused
// naming the op, the line and the layouts. Real ranks:
// tests/integration/mpi/spmd/test_index_norm_rules.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "ir/graph.h"
#include "ir/printer.h"
#include "ir/sharding.h"
#include "parallel/spmd_pass.h"
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

TensorLayout free_layout(int rank) {
  TensorLayout l = TensorLayout::replicated(rank);
  l.free = true;
  return l;
}

struct In {
  Shape shape;
  DType dtype = SPORA_DTYPE_F32;
};

// Asks op `name`'s rule with inputs of the given types and layouts; the
// answer's layouts as text, inputs then outputs: "[S0, R] [R] -> [S0]".
struct Rule {
  ir::Graph g;
  ShardPlan p;
  std::string text;
  bool ok = false;
  Rule(const char* name, const std::vector<In>& in, const std::vector<TensorLayout>& layouts, const Attrs& attrs = {},
       std::vector<int64_t> mesh = {4}) {
    std::vector<ir::Value> vs;
    for (size_t i = 0; i < in.size(); ++i) vs.push_back(g.add_input("x" + std::to_string(i), in[i].dtype, in[i].shape));
    const std::vector<ir::Value> out = g.add_op(name, vs, attrs);
    const ir::Node& n = g.node(out[0].node);
    ShardQuery q;
    q.op = n.op;
    q.attrs = &n.attrs;
    q.mesh = std::move(mesh);
    for (ir::Value v : vs) q.in.push_back(g.meta(v));
    q.out = n.outputs;
    q.in_layouts = layouts;
    ok = n.op->sharding && n.op->sharding(q, p);
    if (!ok) return;
    for (size_t i = 0; i < p.in.size(); ++i) text += (i ? " " : "") + p.in[i].str();
    text += " ->";
    for (const TensorLayout& l : p.out) text += " " + l.str();
  }
};

Attrs axis(int64_t a) {
  Attrs at;
  at.set("axis", AttrValue::of_int(a));
  return at;
}

const DType I32 = SPORA_DTYPE_I32;

TEST(IndexRules, ScatterAddOfSplitTokensIsAPartialSumAndIntoIsAskedPartial) {
  // The embedding's gradient: scatter_add(zeros (V, D), ids (T, D), dy (T, D), axis 0).
  Rule r("scatter_add", {{shp({20, 16})}, {shp({32, 16}), I32}, {shp({32, 16})}},
         {lay({-1, -1}), lay({0, -1}), lay({0, -1})}, axis(0));
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.text, "[R, R]+P{0} [S0, R] [S0, R] -> [R, R]+P{0}");
  // Only the indices placed (the search's seed): the updates follow them.
  Rule s("scatter_add", {{shp({20, 16})}, {shp({32, 16}), I32}, {shp({32, 16})}},
         {lay({-1, -1}), lay({0, -1}), free_layout(2)}, axis(0));
  EXPECT_EQ(s.text, "[R, R]+P{0} [S0, R] [S0, R] -> [R, R]+P{0}");
}

TEST(IndexRules, ScatterAddSplitsFeatureDimsTogetherAndCombinesBothOnTwoAxes) {
  // The feature dim split over axis 1 splits x, indices, updates and y;
  // the tokens over axis 0 make y partial over axis 0.
  Rule r("scatter_add", {{shp({20, 16})}, {shp({32, 16}), I32}, {shp({32, 16})}},
         {lay({-1, 1}), lay({0, -1}), lay({0, -1})}, axis(0), {2, 2});
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.text, "[R, S1]+P{0} [S0, S1] [S0, S1] -> [R, S1]+P{0}");
  // Scattering along dim 1 (gather_elements' gradient): the batch dim 0
  // splits everything, no partial sum.
  Rule e("scatter_add", {{shp({8, 10})}, {shp({8, 3}), I32}, {shp({8, 3})}}, {lay({0, -1}), lay({0, -1}), lay({0, -1})},
         axis(1));
  EXPECT_EQ(e.text, "[S0, R] [S0, R] [S0, R] -> [S0, R]");
}

TEST(IndexRules, ScatterAddGathersWhatCannotSplit) {
  // The feature dim differs between x (16) and the updates (12): no split
  // there; 30 tokens do not split into 4 blocks: gathered.
  Rule r("scatter_add", {{shp({20, 16})}, {shp({30, 12}), I32}, {shp({30, 12})}},
         {lay({-1, 0}), lay({0, -1}), lay({0, -1})}, axis(0));
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.text, "[R, R] [R, R] [R, R] -> [R, R]");
  // Bool adds as "or": never a partial sum.
  Rule b("scatter_add", {{shp({20, 16}), SPORA_DTYPE_BOOL}, {shp({32, 16}), I32}, {shp({32, 16}), SPORA_DTYPE_BOOL}},
         {lay({-1, -1}), lay({0, -1}), lay({0, -1})}, axis(0));
  EXPECT_EQ(b.text, "[R, R] [R, R] [R, R] -> [R, R]");
}

TEST(IndexRules, ScatterAddKeepsPartialSumsOfItsDataInputs) {
  // x partial over axis 0 (a gradient being accumulated), updates whole:
  // the updates are asked partial too, so the result is counted once.
  Rule r("scatter_add", {{shp({20, 16})}, {shp({32, 16}), I32}, {shp({32, 16})}},
         {lay({-1, -1}, 1), lay({-1, -1}), lay({-1, -1})}, axis(0));
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.text, "[R, R]+P{0} [R, R] [R, R]+P{0} -> [R, R]+P{0}");
}

TEST(IndexRules, GatherCarriesIndexSplitsAndTheOtherDimsOfX) {
  // x (6, 20, 8) taken along dim 1 by indices (4, 5): y (6, 4, 5, 8).
  Rule r("gather", {{shp({6, 20, 8})}, {shp({4, 5}), I32}}, {lay({1, 0, -1}), lay({0, -1})}, axis(1), {2, 2});
  ASSERT_TRUE(r.ok);
  // The indexed dim 1 is gathered (its axis 0 goes to the indices' rows).
  EXPECT_EQ(r.text, "[S1, R, R] [S0, R] -> [S1, S0, R, R]");
  // x partial over a free axis passes through (the gather is linear in x).
  Rule p("gather", {{shp({6, 20, 8})}, {shp({4, 5}), I32}}, {lay({-1, -1, -1}, 2), lay({0, -1})}, axis(1), {2, 2});
  EXPECT_EQ(p.text, "[R, R, R]+P{1} [S0, R] -> [R, S0, R, R]+P{1}");
  // ... but not over the axis the indices are split over (resolved first).
  Rule q("gather", {{shp({6, 20, 8})}, {shp({4, 5}), I32}}, {lay({-1, -1, -1}, 1), lay({0, -1})}, axis(1), {2, 2});
  EXPECT_EQ(q.text, "[R, R, R] [S0, R] -> [R, S0, R, R]");
}

TEST(IndexRules, IndexSelectSplitsItsIndexAndTheOtherDims) {
  Rule r("index_select", {{shp({20, 8})}, {shp({12}), I32}}, {lay({-1, 1}), lay({0})}, axis(0), {2, 2});
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.text, "[R, S1] [S0] -> [S0, S1]");
  // 10 indices do not split into 4 blocks.
  Rule s("index_select", {{shp({20, 8})}, {shp({10}), I32}}, {lay({-1, -1}), lay({0})}, axis(0));
  EXPECT_EQ(s.text, "[R, R] [R] -> [R, R]");
}

TEST(IndexRules, GatherNdSplitsIndexRowsAndTheUnindexedDimsOfX) {
  // x (10, 6, 8) indexed by its first two dims: indices (4, 3, 2), y (4, 3, 8).
  Rule r("gather_nd", {{shp({10, 6, 8})}, {shp({4, 3, 2}), I32}}, {lay({0, -1, 1}), lay({0, -1, -1})}, {}, {2, 2});
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.text, "[R, R, S1] [S0, R, R] -> [S0, R, S1]");
  // The indices' last dim (the coordinates) is never split.
  Rule c("gather_nd", {{shp({10, 6, 8})}, {shp({4, 2}), I32}}, {lay({-1, -1, -1}), lay({-1, 0})}, {}, {2});
  EXPECT_EQ(c.text, "[R, R, R] [R, R] -> [R, R]");
}

TEST(IndexRules, GatherElementsSplitsMatchingDimsAndTheIndicesAlongAxis) {
  // x (8, 10), indices (8, 4) along axis 1: the batch splits both, the
  // indices' axis dim splits alone (x stays whole along it).
  Rule r("gather_elements", {{shp({8, 10})}, {shp({8, 4}), I32}}, {lay({0, -1}), lay({-1, 1})}, axis(1), {2, 2});
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.text, "[S0, R] [S0, S1] -> [S0, S1]");
  // Indices shorter than x outside axis: their blocks would not line up.
  Rule s("gather_elements", {{shp({8, 10})}, {shp({4, 4}), I32}}, {lay({0, -1}), lay({0, -1})}, axis(1), {2});
  EXPECT_EQ(s.text, "[R, R] [R, R] -> [R, R]");
}

TEST(IndexRules, SliceKeepsTheSplitsOfDimsItTakesWhole) {
  // gather_nd's gradient slices each coordinate column out of (tokens, q).
  Attrs a;
  a.set("starts", AttrValue::of_ints({0, 1}));
  a.set("ends", AttrValue::of_ints({32, 2}));
  Rule r("slice", {{shp({32, 3}), I32}}, {lay({0, -1})}, a, {2});
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.text, "[S0, R] -> [S0, R]");
  EXPECT_EQ(r.p.local_attrs.get_ints("ends"), (std::vector<int64_t>{16, 2}));
  // A dim the slice cuts is gathered; a partial sum passes through.
  Rule c("slice", {{shp({32, 3})}}, {lay({-1, 0}, 2)}, a, {3, 2});
  EXPECT_EQ(c.text, "[R, R]+P{1} -> [R, R]+P{1}");
}

Attrs bn(bool training) {
  Attrs a;
  a.set("training", AttrValue::of_bool(training));
  return a;
}

std::vector<In> bn_inputs(const Shape& x) {
  const Shape c = shp({x.dims[1]});
  return {{x}, {c}, {c}, {c}, {c}};
}

TEST(NormRules, BatchNormChannelSplitIsFree) {
  Rule r("batch_norm", bn_inputs(shp({8, 4, 3, 3})), {lay({-1, 0, -1, -1}), lay({-1}), lay({-1}), lay({-1}), lay({-1})},
         bn(true), {2});
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.text, "[R, S0, R, R] [S0] [S0] [S0] [S0] -> [R, S0, R, R] [S0] [S0] [S0] [S0]");
  // The channel split may come from gamma (a weight a strategy placed).
  Rule g("batch_norm", bn_inputs(shp({8, 4, 3, 3})),
         {lay({-1, -1, -1, -1}), lay({0}), free_layout(1), free_layout(1), free_layout(1)}, bn(true), {2});
  EXPECT_EQ(g.text, "[R, S0, R, R] [S0] [S0] [S0] [S0] -> [R, S0, R, R] [S0] [S0] [S0] [S0]");
}

TEST(NormRules, TrainingBatchNormMovesABatchSplitToTheChannelsOrGathersIt) {
  // Batch (or spatial) split in training: statistics need every sample, so
  // the split moves to the channels (one all_to_all in the pass).
  Rule r("batch_norm", bn_inputs(shp({8, 4, 3, 3})), {lay({0, -1, -1, -1}), free_layout(1), free_layout(1),
                                                        free_layout(1), free_layout(1)},
         bn(true), {2});
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.text, "[R, S0, R, R] [S0] [S0] [S0] [S0] -> [R, S0, R, R] [S0] [S0] [S0] [S0]");
  // 6 channels do not split into 4: the batch is gathered.
  Rule g("batch_norm", bn_inputs(shp({8, 6, 3, 3})), {lay({0, -1, -1, -1}), lay({-1}), lay({-1}), lay({-1}), lay({-1})},
         bn(true), {4});
  EXPECT_EQ(g.text, "[R, R, R, R] [R] [R] [R] [R] -> [R, R, R, R] [R] [R] [R] [R]");
  // Channels over axis 1 and the batch over axis 0 on a 2x2 mesh: the
  // batch split goes, the channel split stays.
  Rule m("batch_norm", bn_inputs(shp({8, 4, 3, 3})), {lay({0, 1, -1, -1}), lay({1}), lay({1}), lay({1}), lay({1})},
         bn(true), {2, 2});
  EXPECT_EQ(m.text, "[R, S1, R, R] [S1] [S1] [S1] [S1] -> [R, S1, R, R] [S1] [S1] [S1] [S1]");
  // The gradient likewise (x and dy share the layout; dgamma, dbeta split
  // by channel, never partial).
  Rule d("batch_norm_grad", {{shp({8, 4, 3, 3})}, {shp({8, 4, 3, 3})}, {shp({4})}, {shp({4})}, {shp({4})}},
         {lay({0, -1, -1, -1}), lay({0, -1, -1, -1}), lay({-1}), lay({-1}), lay({-1})}, {}, {2});
  EXPECT_EQ(d.text, "[R, S0, R, R] [R, S0, R, R] [S0] [S0] [S0] -> [R, S0, R, R] [S0] [S0]");
}

TEST(NormRules, InferenceBatchNormPassesEverySplit) {
  Rule r("batch_norm", bn_inputs(shp({8, 4, 6, 3})), {lay({0, 1, -1, -1}), lay({-1}), lay({-1}), lay({-1}), lay({-1})},
         bn(false), {2, 2});
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.text, "[S0, S1, R, R] [S1] [S1] [S1] [S1] -> [S0, S1, R, R] [S1] [S1] [S1] [S1]");
  Rule s("batch_norm", bn_inputs(shp({8, 4, 6, 3})), {lay({-1, -1, 0, -1}), lay({-1}), lay({-1}), lay({-1}), lay({-1})},
         bn(false), {2});
  EXPECT_EQ(s.text, "[R, R, S0, R] [R] [R] [R] [R] -> [R, R, S0, R] [R] [R] [R] [R]");
}

Attrs groups(int64_t g) {
  Attrs a;
  a.set("groups", AttrValue::of_int(g));
  return a;
}

TEST(NormRules, GroupNormSplitsTheBatchFreelyAndChannelsByWholeGroups) {
  const std::vector<In> in = {{shp({8, 8, 3, 3})}, {shp({8})}, {shp({8})}};
  Rule r("group_norm", in, {lay({0, 1, -1, -1}), lay({-1}), lay({-1})}, groups(4), {2, 2});
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.text, "[S0, S1, R, R] [S1] [S1] -> [S0, S1, R, R] [S0, S1] [S0, S1]");
  ASSERT_TRUE(r.p.attrs_changed);
  EXPECT_EQ(r.p.local_attrs.get_int("groups"), 2);  // each device holds 2 whole groups
  // 2 groups over 4 devices would cut groups: the channels are gathered;
  // the spatial dims are always whole.
  Rule c("group_norm", in, {lay({-1, 0, 1, -1}), lay({-1}), lay({-1})}, groups(2), {4, 3});
  EXPECT_EQ(c.text, "[R, R, R, R] [R] [R] -> [R, R, R, R] [R, R] [R, R]");
  EXPECT_FALSE(c.p.attrs_changed);
  // The gradient: dgamma and dbeta sum over the batch: partial over its axis.
  Rule d("group_norm_grad", {{shp({8, 8, 3, 3})}, {shp({8, 8, 3, 3})}, {shp({8})}, {shp({8, 4})}, {shp({8, 4})}},
         {lay({0, 1, -1, -1}), lay({0, 1, -1, -1}), lay({-1}), lay({0, 1}), lay({0, 1})}, groups(4), {2, 2});
  EXPECT_EQ(d.text, "[S0, S1, R, R] [S0, S1, R, R] [S1] [S0, S1] [S0, S1] -> [S0, S1, R, R] [S1]+P{0} [S1]+P{0}");
  EXPECT_EQ(d.p.local_attrs.get_int("groups"), 2);
}

// ---- the pass on graphs that use these rules --------------------------------

parallel::PartitionOptions mesh_of(int64_t size, int64_t rank) {
  parallel::PartitionOptions o;
  o.mesh.shape = {size};
  o.mesh.groups = {9};
  o.mesh.rank = rank;
  return o;
}

// The embedding gradient's pattern with the tokens split by a strategy on
// the relu that produces the updates: each rank scatters its own 16 tokens
// into the whole table, and the table gradient is one all_reduce. No
// all_gather of tokens or updates; the table is kept on coordinate 0 only.
TEST(IndexPass, EmbeddingGradientIsALocalScatterAndOneAllReduce) {
  ir::Graph g;
  const ir::Value ids = g.add_input("ids", I32, shp({32, 16}));
  const ir::Value dy = g.add_input("dy", SPORA_DTYPE_F32, shp({32, 16}));
  Attrs split;
  split.set("strategy", AttrValue::of_string("2,1"));
  const ir::Value upd = g.add_op("relu", {dy}, split)[0];
  const ir::Value idx = g.add_op("abs", {ids}, split)[0];
  Attrs z;
  z.set("shape", AttrValue::of_ints({20, 16}));
  z.set("dtype", AttrValue::of_string("f32"));
  const ir::Value zeros = g.add_op("zeros", {}, z)[0];
  g.set_outputs({g.add_op("scatter_add", {zeros, idx, upd}, axis(0))[0]});
  size_t lines = 0;
  for (int64_t rank : {0, 1}) {
    const parallel::PartitionResult r = parallel::partition(g, mesh_of(2, rank));
    const std::string text = ir::to_text(r.graph);
    // Rank 0 keeps the table, rank 1 adds zeros: the same graph otherwise.
    EXPECT_NE(text.find(rank == 0 ? "constant 0x01 : bool[]" : "constant 0x00 : bool[]"), std::string::npos) << text;
    const size_t n = static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
    if (rank == 1) EXPECT_EQ(n, lines) << text;
    lines = n;
    EXPECT_EQ(text.find("all_gather"), std::string::npos) << text;
    EXPECT_NE(text.find("scatter_add("), std::string::npos) << text;
    EXPECT_NE(text.find(": f32[16,16]"), std::string::npos) << text;  // this rank's updates
    EXPECT_NE(text.find("all_reduce("), std::string::npos) << text;
    EXPECT_NE(text.find("where("), std::string::npos) << text;
    EXPECT_EQ(r.graph.meta(r.graph.outputs()[0]).shape, shp({20, 16}));
    bool found = false;
    for (const std::string& d : r.decisions)
      if (d.find("scatter_add: ([R, R]+P{0}, [S0, R], [S0, R]) -> ([R, R]+P{0})") != std::string::npos) found = true;
    EXPECT_TRUE(found) << text;
  }
}

// Strategies written on scatter_add: a split of the scattered (vocabulary)
// dim of x is refused by the rule, a count that does not divide is an
// error; both name the op, the line and the numbers.
TEST(IndexPass, ScatterAddStrategyErrorsNameOpLineAndNumbers) {
  ir::Graph g;
  const ir::Value x = g.add_input("x", SPORA_DTYPE_F32, shp({20, 16}));
  const ir::Value idx = g.add_input("idx", I32, shp({32, 16}));
  const ir::Value upd = g.add_input("upd", SPORA_DTYPE_F32, shp({32, 16}));
  Attrs a = axis(0);
  a.set("strategy", AttrValue::of_string("2,1;1,1;1,1"));
  const ir::Value y = g.add_op("scatter_add", {x, idx, upd}, a, {"model.py", 41})[0];
  g.set_outputs({y});
  auto error_of = [&](int64_t devices) {
    try {
      parallel::partition(g, mesh_of(devices, 0));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string m = error_of(2);
  EXPECT_NE(m.find("[scatter_add] strategy ((2, 1), (1, 1), (1, 1)) cannot be honoured"), std::string::npos) << m;
  EXPECT_NE(m.find("input 0 laid out [R, R] instead of [S0, R]"), std::string::npos) << m;
  EXPECT_NE(m.find("model.py:41"), std::string::npos) << m;
  g.mutable_node(y.node).attrs.set("strategy", AttrValue::of_string("1,1;3,1;3,1"));
  m = error_of(3);
  EXPECT_NE(m.find("[scatter_add] strategy ((1, 1), (3, 1), (3, 1)): input 1 dim 0 of size 32 (shape (32,16)) "
                   "does not divide into 3 blocks"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("model.py:41"), std::string::npos) << m;
  // The tokens split as written: honoured, the result a partial sum.
  g.mutable_node(y.node).attrs.set("strategy", AttrValue::of_string("1,1;2,1;2,1"));
  EXPECT_EQ(parallel::partition(g, mesh_of(2, 0)).decisions.back(),
            "%3 scatter_add [strategy ((1, 1), (2, 1), (2, 1))]: ([R, R]+P{0}, [S0, R], [S0, R]) -> ([R, R]+P{0})");
}

// conv output split by batch reaching a training batch_norm: one all_to_all
// moves the split to the channels; gamma/beta and the statistics are 1/N.
TEST(NormPass, BatchSplitReachingTrainingBatchNormIsOneAllToAll) {
  ir::Graph g;
  const ir::Value x = g.add_input("x", SPORA_DTYPE_F32, shp({8, 4, 3, 3}));
  Attrs split;
  split.set("strategy", AttrValue::of_string("2,1,1,1"));
  const ir::Value h = g.add_op("relu", {x}, split, {"net.py", 12})[0];
  std::vector<ir::Value> in = {h};
  for (const char* w : {"gamma", "beta", "running_mean", "running_var"})
    in.push_back(g.add_weight(w, SPORA_DTYPE_F32, shp({4})));
  const std::vector<ir::Value> y = g.add_op("batch_norm", in, bn(true), {"net.py", 13});
  g.set_outputs({y[0]});
  const parallel::PartitionResult r = parallel::partition(g, mesh_of(2, 1));
  const std::string text = ir::to_text(r.graph);
  EXPECT_NE(text.find("all_to_all(%"), std::string::npos) << text;
  EXPECT_NE(text.find("batch_norm(%"), std::string::npos) << text;
  EXPECT_NE(text.find(": f32[8,2,3,3]"), std::string::npos) << text;
  for (const parallel::WeightPlacement& w : r.weights) EXPECT_EQ(w.local, shp({2})) << w.name;
  // A strategy asking batch_norm itself for the batch split is refused:
  // per-device statistics would differ from one process's.
  g.mutable_node(y[0].node).attrs.set("strategy", AttrValue::of_string("2,1,1,1;1;1;1;1"));
  try {
    parallel::partition(g, mesh_of(2, 0));
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[batch_norm] strategy ((2, 1, 1, 1), (1,), (1,), (1,), (1,)) cannot be honoured"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("input 0 laid out [R, S0, R, R] instead of [S0, R, R, R]"), std::string::npos) << m;
    EXPECT_NE(m.find("net.py:13"), std::string::npos) << m;
  }
  // A strategy that does not divide: op, line and numbers.
  g.mutable_node(h.node).attrs = {};
  g.mutable_node(y[0].node).attrs.set("strategy", AttrValue::of_string("1,1,1,1;3;1;1;1"));
  try {
    parallel::partition(g, mesh_of(3, 0));
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[batch_norm] strategy"), std::string::npos) << m;
    EXPECT_NE(m.find("input 1 dim 0 of size 4 (shape (4,)) does not divide into 3 blocks"), std::string::npos) << m;
    EXPECT_NE(m.find("net.py:13"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace spora
