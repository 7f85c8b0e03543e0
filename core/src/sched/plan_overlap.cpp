// Overlapping collectives with the kernels after them (plan.h, "Overlap").
// A data-parallel step reduces each gradient bucket once backward has made
// it (passes/allreduce_fusion.cpp puts the bucket there) while backward goes
// on to the earlier layers: the bucket's all_reduce is started and not
// waited for until its first reader, the optimizer update at the end of the
// step. What PyTorch DDP and MindSpore do with their gradient buckets.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <string>
#include <utility>

#include "runtime/collective.h"
#include "runtime/host_services.h"
#include "runtime/plugin_library.h"
#include "sched/plan_build.h"
#include "support/error.h"

namespace spora::sched {

namespace {

// SPORA_COMM_OVERLAP=0 (option comm.overlap) runs every collective where it
// is, waiting for it: for measuring what overlap hides, and as a way out.
// Unset: on, except on the cpu device of a host with fewer than two cores
// per local rank, whose kernels run on the very cores a host-memory
// collective needs. bench/comm_overlap.py, 2 ranks, MLP 8x512: on 2 cores a
// step was 26 % slower with it; on a 16-core host (ranks unpinned, 2 to 8
// threads each) overlap saved 41-170 % of the collectives' own time.
// =1 turns it on everywhere.
bool cores_to_spare() {
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  long ranks = 1;
  for (const char* var : {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE"})
    if (const char* v = std::getenv(var)) {
      ranks = std::max(1L, std::atol(v));
      break;
    }
  return cores >= 2 * ranks;
}

bool overlap_enabled(const Device* d) {
  std::string v;
  if (!config_lookup("comm.overlap", &v)) return d->plugin()->name() != "cpu" || cores_to_spare();
  if (v == "0" || v == "false" || v == "off") return false;
  if (v == "1" || v == "true" || v == "on") return true;
  fail(Code::kInvalidArgument, "[graph] SPORA_COMM_OVERLAP='{}' is not 0 or 1", v);
}

std::pair<int32_t, int32_t> key(const ir::Value& v) { return {v.node, v.index}; }

}  // namespace

void plan_collective_overlap(PlanBuild& b) {
  ExecutionPlan& p = *b.plan;
  if (!overlap_enabled(p.device)) return;
  const int32_t end = static_cast<int32_t>(p.graph.nodes().size());
  for (size_t i = 0; i < p.steps.size(); ++i) {
    Step& c = *p.steps[i];
    if (c.kind != Step::kCollective) continue;
    std::set<std::pair<int32_t, int32_t>> made;
    for (const ir::Value& v : c.outputs) made.insert(key(p.root(v)));
    // The first later step that reads what the collective makes, or runs
    // nested plans (which may read anything).
    size_t first = p.steps.size();
    for (size_t j = i + 1; j < p.steps.size() && first == p.steps.size(); ++j) {
      const Step& s = *p.steps[j];
      if (s.kind == Step::kIf || s.kind == Step::kWhile) first = j;
      for (const ir::Value& v : s.inputs)
        if (made.count(key(p.root(v)))) first = j;
    }
    if (first == i + 1) continue;  // read at once: nothing to overlap with
    // A host-memory backend on a device without host-addressable memory is
    // staged: async only with pinned memory and async copies (else it runs
    // in line, staged by synchronous copies).
    const std::shared_ptr<Communicator> comm = Communicator::lookup(c.group);
    Device* d = p.device;
    if (!(comm && comm->device()) && !d->unified_memory() && !(d->has_async() && d->has_pinned())) continue;
    c.async_slot = p.num_async++;
    int32_t until = end;
    if (first < p.steps.size()) {
      p.steps[first]->waits.push_back(c.async_slot);
      until = p.steps[first]->node;
    } else {
      p.waits_at_end.push_back(c.async_slot);
    }
    // The collective reads its inputs and writes its outputs until the
    // wait: their memory stays theirs that long.
    auto extend = [&](const ir::Value& v) {
      const ir::Value r = p.root(v);
      int32_t& lu = b.last_use[static_cast<size_t>(r.node)][static_cast<size_t>(r.index)];
      lu = std::max(lu, until);
    };
    for (const ir::Value& v : c.inputs) extend(v);
    for (const ir::Value& v : c.outputs) extend(v);
  }
}

}  // namespace spora::sched
