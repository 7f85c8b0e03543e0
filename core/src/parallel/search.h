// The strategy search of auto_parallel (search_mode "dynamic_programming",
// docs/parallel.md "Strategy search"): picks, for every op with a sharding
// rule, a strategy among those its rule can honour, and a layout for every
// weight, minimising the estimated step time (compute + redistribution)
// under a per-device memory limit. The result is per-node strategies and
// weight layouts that the SPMD pass (spmd_pass.h) consumes unchanged
// (PartitionOptions::strategies, ::weights).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/sharding.h"
#include "parallel/cost_model.h"
#include "parallel/mesh.h"

namespace spora::parallel {

// A plan to start from (docs/parallel.md "Starting plans"): layouts for some
// of the graph's inputs and weights (by node name; the others replicated),
// propagated through every op in graph order as sharding propagation does:
// each op is asked with its inputs' current layouts and runs the strategy
// its rule answers. Data parallelism is {inputs: batch split}; Megatron-LM's
// tensor parallelism names its column- and row-split weights.
struct StartPlan {
  std::string name;
  std::map<std::string, TensorLayout> inputs, weights;
};

struct SearchOptions {
  Mesh mesh;  // shape and names; rank and groups are not used
  DeviceSpec device;
  Topology topology;
  // Per-device memory limit in bytes; 0: device.memory_bytes.
  double memory_limit = 0;
  // Outputs that are a weight's new value keep that weight's layout (as in
  // PartitionOptions::ties); every other output is returned whole.
  std::map<size_t, std::string> ties;
  // Weights whose layout is already decided (a Parameter an earlier plan
  // split, by name): the search keeps them there and plans around them.
  std::map<std::string, TensorLayout> fixed_weights;
  // Rounds of local improvement after the dynamic programme.
  int refine_rounds = 8;
  // When the unpenalised plan fits: programmes under memory penalties of
  // step/memory x 4^k, k < restarts, keeping a faster plan that fits (the
  // penalty can move the search out of a local minimum). Off by default:
  // it trades memory headroom for speed (bench_gpt2_plan uses 3).
  int restarts = 0;
  // Plans the search also starts from: each is priced as written and after
  // local improvement, beside the dynamic programme's plan, and the best
  // (fitting, then fastest, under the same memory penalty) is kept, so the
  // result is never estimated worse than any of them.
  std::vector<StartPlan> starts;
  // Also start from data parallelism: every graph input of rank >= 1 whose
  // leading dim divides by mesh axis 0 is split over it, weights replicated.
  bool data_parallel_start = true;
};

// One op's choice.
struct NodeChoice {
  int32_t node = -1;
  std::string op;
  std::string strategy;  // "" for ops without a rule (they run replicated)
  std::vector<TensorLayout> in, out;
  double compute = 0;    // seconds on one device
  double comm = 0;       // seconds redistributing its inputs into `in`
  int candidates = 1;    // how many strategies were considered
};

struct SearchResult {
  std::map<int32_t, std::string> strategies;   // node id -> "strategy" text
  std::map<std::string, TensorLayout> weights; // weight name -> layout
  std::vector<NodeChoice> nodes;               // every op, in graph order
  double compute_time = 0, comm_time = 0;      // seconds per step
  double step_time = 0;                        // their sum (no overlap)
  double weight_bytes = 0;                     // per device
  double activation_bytes = 0;                 // per device: peak of live op outputs in graph order
  double memory_bytes = 0;                     // weight_bytes + activation_bytes
  double memory_limit = 0;
  bool fits = true;
  double lambda = 0;     // seconds per byte of the memory penalty that made it fit
  int evaluations = 0;   // dynamic programmes run (one per lambda tried)
  // Where the plan came from: "programme", or a start's name ("data
  // parallel", a StartPlan's), with "+refined" once local improvement moved it.
  std::string origin;
};

SearchResult search(const ir::Graph& g, const SearchOptions& options);

// A start priced as written: the strategies its propagation gives and its
// weight layouts, no search and no memory limit (how bench_gpt2_plan prices
// the hand-written plans people use).
SearchResult evaluate(const ir::Graph& g, const SearchOptions& options, const StartPlan& start);

}  // namespace spora::parallel
