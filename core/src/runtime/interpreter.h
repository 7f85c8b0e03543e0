// The graph interpreter: runs a graph node by node with eager dispatch (no
// plan, no arena), control flow by running its sub-graphs the same way.
// Every op and constant it runs is told to the calling thread's op
// observers (observer.h), as any eager op is: the eager tape records them.
// It is what spora_graph_run_eager runs, what the tape runs a gradient's
// backward part with, and what an op's eager fallback runs its
// decomposition with. Compiled plans are sched's (sched/executor.h).
#pragma once
#include <vector>

#include "ir/graph.h"
#include "runtime/tensor.h"

namespace spora {

// Runs `graph` on `device`; `params` binds every input and weight, in node
// order. Checks the graph's JSON round trip first when
// SPORA_CHECK_JSON_ROUNDTRIP asks (ir/serialize.h).
std::vector<Tensor> run_eager(const ir::Graph& graph, Device* device, const std::vector<const Tensor*>& params);
// The same without the round-trip check (for graphs core built itself and
// runs often: sub-graphs, decompositions).
std::vector<Tensor> interpret(const ir::Graph& graph, Device* device, const std::vector<const Tensor*>& params);
// The same, for a graph whose first `bound.size()` nodes already have values
// (one vector per node, the node's outputs; nodes whose values are never
// read may be left empty): only the later nodes run, and they may not be
// inputs or weights. Only nodes the outputs need run. The eager tape runs
// just the backward part of a value_and_grad graph this way, binding the
// forward values it recorded.
std::vector<Tensor> run_eager_from(const ir::Graph& graph, Device* device, std::vector<std::vector<Tensor>> bound);

// Shared with sched's executor, so both run control flow alike:
// SPORA_MAX_WHILE_ITERATIONS (default 1e6), the most iterations one run of a
// while node may take, read on every run of a loop;
int64_t max_while_iterations();
// reads a bool scalar (an if/while condition) to the host, waiting for it;
bool read_flag(const Tensor& t);
// fails kAborted naming the while node that ran past `limit`.
[[noreturn]] void while_runaway(const ir::Node& n, int64_t limit);

}  // namespace spora
