// Execution plans cached by input signature: what spora_graph_compile
// returns. A graph is compiled for the shapes it was built with; a run whose
// inputs have other shapes (same dtypes and ranks) re-infers the graph's
// types for them (passes/shape_inference.h), plans kernels and memory for
// that signature once, and keeps the plan for the next run with the same
// signature. Typical use: the last, smaller batch of an epoch.
//
// At most `capacity` plans are kept (SPORA_PLAN_CACHE, default 8), the
// least recently used dropped first; each holds its own arena. Weights must
// keep the shapes the graph was built with.
#pragma once
#include <list>
#include <memory>
#include <mutex>
#include <vector>

#include "sched/executor.h"

namespace spora::sched {

class PlanCache {
 public:
  // Compiles the graph's own signature now; errors name the op and line.
  PlanCache(const ir::Graph& graph, Device* device);
  ~PlanCache();

  // Runs the plan for the params' signature, planning it on first use. A
  // signature the graph cannot take fails with the op and source line that
  // reject it. Runs of one PlanCache are serialised.
  // `donate`: Executable::run's.
  std::vector<Tensor> run(const std::vector<const Tensor*>& params, const std::vector<int32_t>& donate = {});

  // The graph as built (its inputs' shapes are the default signature).
  const ir::Graph& graph() const { return graph_; }
  Device* device() const { return device_; }
  // Memory of the plan for the graph as built.
  uint64_t planned_bytes() const { return planned_bytes_; }
  uint64_t naive_bytes() const { return naive_bytes_; }
  // Of the graph's own signature's plan: collective steps, and those that
  // overlap the kernels after them.
  int32_t collectives() const { return collectives_; }
  int32_t overlapped_collectives() const { return overlapped_; }
  // Plans held now, and the most it keeps (for tests and diagnostics).
  size_t plan_count() const;
  size_t capacity() const { return capacity_; }

 private:
  struct Entry;
  Executable& plan_for(const std::vector<const Tensor*>& params);

  ir::Graph graph_;
  Device* device_;
  std::vector<int32_t> param_nodes_;
  size_t capacity_;
  uint64_t planned_bytes_ = 0, naive_bytes_ = 0;
  int32_t collectives_ = 0, overlapped_ = 0;
  mutable std::mutex mu_;
  std::list<Entry> plans_;  // most recently used first
};

// SPORA_PLAN_CACHE: how many signatures' plans one compiled graph keeps
// (default 8, at least 1). A malformed value is Code::kInvalidArgument.
size_t plan_cache_capacity();

}  // namespace spora::sched
