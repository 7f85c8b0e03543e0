// Pipeline parallelism, the graph side (docs/parallel.md "Pipeline
// parallelism"): cuts a traced forward graph (one micro-batch, output 0 the
// scalar loss) into stages and builds, for one stage, the graph its forward
// step runs and the graph its backward step runs. The schedule (GPipe,
// 1F1B), the send/recv between stages and the gradient accumulation over
// micro-batches are the runtime's (frontends/python/spora/_pipeline.py).
//
// Stages. Each op node gets a stage from the marks (node-id ranges, earlier
// marks winning: a Cell's call marks what it recorded, inner cells first);
// an unmarked op takes the latest stage among the ops it reads (0 if none),
// so the loss after the last marked cell runs in the last stage. With no
// marks at all, balanced_marks cuts the graph (ids are a topological order)
// into contiguous runs of about equal estimated time, each cut placed where
// the fewest bytes cross it within a tenth of a stage of its target. Reading a
// value of a later stage, a stage without ops, or a weight read by two
// stages is an error naming the op, its line and the stages.
//
// Boundaries. Values cross stages only between neighbours: a value made in
// stage t and read in stage s > t is an output of every stage t..s-1 and an
// input of every stage t+1..s (relayed unchanged through the stages
// between), so each stage sends one list to the next and receives one list
// from the previous, in the same order (by producing node id).
//
// Backward. A stage's backward graph takes the forward's inputs, then one
// cotangent per float boundary output, and returns the gradients of its
// float boundary inputs, then of its weights (the last stage: the loss
// first). It recomputes the stage's forward from the stage's inputs
// (GPipe's re-materialisation): only the inputs of a micro-batch in flight
// are kept between its forward and backward steps, never its activations.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace spora::parallel {

struct StageMark {
  int64_t first = 0, end = 0;  // node ids [first, end)
  int32_t stage = 0;
};

struct StageBoundary {
  TensorMeta meta;
  bool differentiable = false;  // a float value: its gradient travels back
};

struct PipelineStage {
  int32_t stage = 0, stages = 1;
  ir::Graph forward;   // inputs: data inputs, then received boundary values; outputs: sent values (last stage: loss)
  ir::Graph backward;  // inputs: forward's, then a cotangent per differentiable sent value;
                       // outputs: (last stage: loss,) gradients of differentiable received values, then of weights
  std::vector<int32_t> data_inputs;  // the forward's leading inputs: indices into the whole graph's inputs
  std::vector<StageBoundary> recv, send;
  std::vector<std::string> weights;  // the stage's weights (names of the whole graph's), in both graphs' order
  int32_t num_ops = 0;
};

// Stage `stage` of `stages` of graph g (its output 0 a scalar float loss,
// its only output).
PipelineStage pipeline_stage(const ir::Graph& g, int32_t stages, int32_t stage, const std::vector<StageMark>& marks);

// Marks cutting g into `stages` contiguous runs of node ids of about equal
// estimated time (the cost model's roofline on one default device), each
// cut at the fewest bytes crossing within 10% of a stage's time of its
// target, never between two readers of one weight.
std::vector<StageMark> balanced_marks(const ir::Graph& g, int32_t stages);

// Every apply node's stage (-1 for inputs, weights and constants), checked
// as above (no marks and stages > 1: balanced_marks); what pipeline_stage
// cuts by.
std::vector<int32_t> assign_stages(const ir::Graph& g, int32_t stages, const std::vector<StageMark>& marks);

}  // namespace spora::parallel
