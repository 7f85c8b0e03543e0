// passes/allreduce_fusion.cpp: gradient all_reduces (every reader an
// optimizer update) on one communicator are packed into buckets; others are
// left alone; the graph stays in dependency order with its inputs and
// weights in their order; SPORA_ALLREDUCE_BUCKET_MB sizes the buckets.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "ir/graph.h"
#include "ir/printer.h"
#include "passes/pass.h"
#include "support/error.h"

namespace spora {
namespace {

Shape shp(std::initializer_list<int64_t> d) {
  Shape s;
  for (int64_t v : d) s.push_back(v);
  return s;
}

Attrs reduce_attrs(int64_t group) {
  Attrs a;
  a.set("op", AttrValue::of_string("sum"));
  a.set("group", AttrValue::of_int(group));
  return a;
}

int count_op(const ir::Graph& g, const std::string& op) {
  int n = 0;
  for (const ir::Node& node : g.nodes()) n += node.kind == ir::NodeKind::kApply && node.op->name == op;
  return n;
}

// Five weights updated by SGD from all-reduced gradients (the SPMD pass's
// pattern: each reduction right before its update), one all_reduce read by
// something else, and one on another communicator.
ir::Graph step(std::vector<std::string>* weight_order) {
  ir::Graph g("step");
  const ir::Value lr = g.add_input("lr", SPORA_DTYPE_F32, shp({}));
  const ir::Value scale = g.add_input("scale", SPORA_DTYPE_F32, shp({}));
  std::vector<ir::Value> grads, ws;
  const int64_t sizes[5][2] = {{64, 32}, {32}, {32, 16}, {16}, {8, 8}};
  for (int i = 0; i < 5; ++i) {
    Shape s = sizes[i][1] ? shp({sizes[i][0], sizes[i][1]}) : shp({sizes[i][0]});
    ws.push_back(g.add_weight("w" + std::to_string(i), SPORA_DTYPE_F32, s));
    grads.push_back(g.add_input("g" + std::to_string(i), SPORA_DTYPE_F32, s));
    weight_order->push_back("w" + std::to_string(i));
  }
  std::vector<ir::Value> outs;
  for (int i = 0; i < 5; ++i) {
    const ir::Value r = g.add_op("all_reduce", {grads[static_cast<size_t>(i)]}, reduce_attrs(i == 4 ? 9 : 7))[0];
    outs.push_back(g.add_op("sgd_update", {lr, scale, ws[static_cast<size_t>(i)], r}, Attrs{})[0]);
  }
  // Read by a non-update op: stays a separate all_reduce.
  const ir::Value loss = g.add_op("all_reduce", {g.add_op("sum", {grads[0]}, Attrs{})[0]}, reduce_attrs(7))[0];
  outs.insert(outs.begin(), loss);
  g.set_outputs(outs);
  return g;
}

TEST(AllReduceFusion, GradientReductionsOnOneCommunicatorShareABucket) {
  std::vector<std::string> order;
  ir::Graph g = step(&order);
  ASSERT_EQ(count_op(g, "all_reduce"), 6);
  const std::vector<ir::Value> outputs_before = g.outputs();
  ASSERT_TRUE(passes::run_pass(g, "allreduce_fusion").changed);
  const std::string text = ir::to_text(g);
  // Group 7's four gradient reductions -> one; group 9's lone one and the
  // loss's stay: 3 all_reduces.
  EXPECT_EQ(count_op(g, "all_reduce"), 3) << text;
  EXPECT_EQ(count_op(g, "concat"), 1) << text;
  EXPECT_EQ(count_op(g, "split"), 1) << text;
  EXPECT_EQ(count_op(g, "sgd_update"), 5);
  ASSERT_EQ(g.outputs().size(), outputs_before.size());
  // Inputs and weights keep their relative order (executables bind them so).
  std::vector<std::string> names;
  for (int32_t w : g.weights()) names.push_back(g.node(w).name);
  EXPECT_EQ(names, order);
  // Every node reads earlier nodes only, and the types check out.
  for (size_t id = 0; id < g.nodes().size(); ++id)
    for (ir::Value v : g.node(static_cast<int32_t>(id)).inputs) EXPECT_LT(v.node, static_cast<int32_t>(id)) << text;
  EXPECT_NO_THROW(passes::run_pass(g, "shape_inference"));
  // The fused reduction carries 64*32 + 32 + 32*16 + 16 elements.
  for (const ir::Node& n : g.nodes())
    if (n.kind == ir::NodeKind::kApply && n.op->name == "concat")
      EXPECT_EQ(n.outputs[0].shape.numel(), 64 * 32 + 32 + 32 * 16 + 16);
}

TEST(AllReduceFusion, BucketSizeComesFromTheEnvironment) {
  std::vector<std::string> order;
  ir::Graph g = step(&order);
  // 8 KiB buckets: w0's 8 KiB gradient fills one; w1..w3's 2.2 KiB share the next.
  setenv("SPORA_ALLREDUCE_BUCKET_MB", "0.0078125", 1);
  ASSERT_TRUE(passes::run_pass(g, "allreduce_fusion").changed);
  EXPECT_EQ(count_op(g, "all_reduce"), 4) << ir::to_text(g);
  setenv("SPORA_ALLREDUCE_BUCKET_MB", "0", 1);  // off
  ir::Graph h = step(&order);
  EXPECT_FALSE(passes::run_pass(h, "allreduce_fusion").changed);
  setenv("SPORA_ALLREDUCE_BUCKET_MB", "lots", 1);
  EXPECT_THROW(passes::run_pass(h, "allreduce_fusion"), Error);
  unsetenv("SPORA_ALLREDUCE_BUCKET_MB");
}

}  // namespace
}  // namespace spora
