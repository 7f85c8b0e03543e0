// Building an ExecutionPlan (plan.h), stage by stage. build_plan runs the
// stages in this order; each is a function over the plan under
// construction, so a test can run the stages up to the one it checks and
// look at what that one decided.
//
//   1. place                       placement by capability (placement.h),
//                                  verification, the JSON round-trip check
//   2. plan_kernels                params, constants uploaded, nested plans
//                                  of if/while, per op: inference, then its
//                                  kernel planned on the device or on cpu
//                                  (a view gets an alias slot, a collective
//                                  a collective step)
//   3. plan_lifetimes_and_aliases  each value's last reader, alias chains
//                                  resolved to their root (a view keeps its
//                                  root alive), graph outputs out of the
//                                  arena, who reads what on cpu and device
//      plan_collective_overlap     (inside 3) collectives started without
//                                  waiting, where each is waited for, and
//                                  their operands' lifetimes to there
//   4. plan_device_arena           one device arena by liveness, in-place
//                                  reuse, allocated
//   5. plan_host_steps             the pinned host arena and the copies in
//                                  and out of each cpu-placed step
//   6. plan_workspaces             kernel scratch reserved up front
//
// Errors name the failing node's op and source location.
#pragma once
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "sched/plan.h"

namespace spora::sched {

// A plan under construction: the plan, and what the stages work out on the
// way that the run does not need.
struct PlanBuild {
  std::unique_ptr<ExecutionPlan> plan = std::make_unique<ExecutionPlan>();
  // Graph output positions by value (node, output).
  std::map<std::pair<int32_t, int32_t>, int32_t> output_pos;
  // Per node, per output (plan_kernels): the input that output may
  // overwrite (ops with in_place_input), else -1.
  std::vector<std::vector<int>> in_place_partner;
  // Per node, per output (plan_lifetimes_and_aliases): the last node that
  // reads the value (itself when none; an alias root's includes its views'
  // readers); the first and last cpu-placed step reading it (-1: none),
  // and whether the device reads it (a device step or a graph output).
  std::vector<std::vector<int32_t>> last_use, host_first, host_last;
  std::vector<std::vector<char>> device_reads;

  int32_t last_use_of(ir::Value v) const {
    return last_use[static_cast<size_t>(v.node)][static_cast<size_t>(v.index)];
  }
};

void place(PlanBuild& b, const ir::Graph& graph, Device* device);
void plan_kernels(PlanBuild& b);
void plan_lifetimes_and_aliases(PlanBuild& b);
void plan_collective_overlap(PlanBuild& b);  // plan_overlap.cpp
void plan_device_arena(PlanBuild& b);
void plan_host_steps(PlanBuild& b);
void plan_workspaces(PlanBuild& b);

// Every stage in order. Throws with the failing node's op and location.
std::unique_ptr<ExecutionPlan> build_plan(const ir::Graph& graph, Device* device);

}  // namespace spora::sched
