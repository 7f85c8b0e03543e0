// The SPMD partitioning pass: rewrites a whole graph (forward, gradients,
// optimizer updates: partitioning runs after autodiff) into what one rank
// of a device mesh runs. docs/parallel.md has the design.
//
// Every value gets a layout (ir/sharding.h). Inputs and constants are
// replicated (every rank is fed the full batch); a weight takes the layout
// its first consumer asks for (the user's strategy, or the op's rule from
// the layouts of its other inputs), so weights split by a strategy, and the
// biases, gradients and optimizer state that follow them, become local
// shards. Each op node asks its rule (OpDef::sharding) for the layouts it
// wants its inputs in and gets its outputs' layouts; the pass inserts the
// redistribution (parallel/redistribute.h) and adds the op with local shapes.
// An op without a rule, or whose rule declines, runs on replicated inputs:
// the result is always what the unpartitioned graph computes.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/sharding.h"
#include "parallel/mesh.h"

namespace spora::parallel {

struct PartitionOptions {
  Mesh mesh;
  // semi_auto_parallel: an op with a strategy but no sharding rule is an
  // error (naming the op, the line and the strategy) rather than replicated.
  bool semi_auto = true;
  // Graph outputs that are a weight's new value (an optimizer update), by
  // output index: they keep that weight's layout so they can be written
  // back to its shard. Every other output is returned replicated (whole).
  std::map<size_t, std::string> ties;
  // A plan made elsewhere (the strategy search, parallel/search.h): a
  // strategy per node id, used instead of the node's "strategy" attribute,
  // and a layout per weight name, used instead of the first consumer's ask.
  std::map<int32_t, std::string> strategies;
  std::map<std::string, TensorLayout> weights;
};

struct WeightPlacement {
  std::string name;
  Shape global, local;
  TensorLayout layout;
};

struct PartitionResult {
  ir::Graph graph;                      // this rank's graph (same inputs, weights, outputs, in order)
  std::vector<WeightPlacement> weights; // in the graph's weight order
  std::vector<TensorLayout> outputs;    // the layout of each output
  std::vector<std::string> decisions;   // one line per op: "%5 matmul [R, R] x [R, S0] -> [R, S0]"
};

PartitionResult partition(const ir::Graph& g, const PartitionOptions& options);

}  // namespace spora::parallel
