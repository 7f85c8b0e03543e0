// Recording and replaying a plan's launches (see plan_capture.h).
#include "sched/plan_capture.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "runtime/device.h"
#include "sched/executor.h"
#include "support/error.h"
#include "support/log.h"

namespace spora::sched {

struct CaptureState {
  // Per param: its address in the previous run (the first run only notes them).
  std::vector<spora_devptr_t> last;
  bool noted = false;
  bool disabled = false;
  uint64_t replays = 0, captures = 0;

  // The recording. Per param: the address the graph reads, or NULL when it
  // reads staged[i]. Per output: the address the graph writes (a bound
  // param's memory), or NULL when it writes staged_out[o].
  std::vector<spora_devptr_t> bound, bound_out;
  std::vector<Tensor> staged, staged_out;
  std::shared_ptr<Device::Captured> graph;
  std::shared_ptr<Buffer> workspace;  // the kernel workspace the launches use
};

void destroy_capture_state(CaptureState* s) { delete s; }
void ExecutionPlan::CaptureDeleter::operator()(CaptureState* s) const { destroy_capture_state(s); }

namespace {

constexpr uint64_t kMaxCaptures = 3;

bool capture_enabled() {
  const char* v = std::getenv("SPORA_GRAPH_CAPTURE");
  return !(v && std::string(v) == "0");
}

// Whether the plan can be recorded at all: device kernels only.
bool qualifies(const ExecutionPlan& p) {
  if (!p.device->has_capture() || p.steps.empty() || p.host_ops) return false;
  for (const auto& s : p.steps)
    if (s->kind != Step::kKernel) return false;
  return capture_enabled();
}

bool matches(const CaptureState& c, const std::vector<const Tensor*>& params, const std::vector<Tensor>& outputs) {
  if (!c.graph) return false;
  for (size_t i = 0; i < params.size(); ++i)
    if (c.bound[i] && params[i]->data() != c.bound[i]) return false;
  for (size_t o = 0; o < outputs.size(); ++o)
    if (c.bound_out[o] && outputs[o].data() != c.bound_out[o]) return false;
  return true;
}

void replay(ExecutionPlan& p, CaptureState& c, const std::vector<const Tensor*>& params,
            const std::vector<Tensor>& outputs) {
  Device* d = p.device;
  for (size_t i = 0; i < params.size(); ++i)
    if (!c.bound[i] && c.staged[i].nbytes()) d->copy_d2d_async(c.staged[i].data(), params[i]->data(), c.staged[i].nbytes());
  d->launch_captured(*c.graph);
  for (size_t o = 0; o < outputs.size(); ++o)
    if (!c.bound_out[o] && outputs[o].nbytes())
      d->copy_d2d_async(outputs[o].data(), c.staged_out[o].data(), outputs[o].nbytes());
  ++c.replays;
}

// Records the plan with the params that kept their address bound and the
// rest staged. False (and nothing enqueued) when the capture failed.
bool record(ExecutionPlan& p, CaptureState& c, const std::vector<const Tensor*>& params,
            const std::vector<Tensor>& outputs) {
  Device* d = p.device;
  c.graph.reset();
  c.bound.assign(params.size(), nullptr);
  c.bound_out.assign(outputs.size(), nullptr);
  c.staged.assign(params.size(), Tensor{});
  c.staged_out.assign(outputs.size(), Tensor{});
  std::vector<Tensor> args(params.size());
  std::vector<const Tensor*> arg_ptrs(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& t = *params[i];
    if (t.data() == c.last[i]) {
      c.bound[i] = t.data();
      arg_ptrs[i] = &t;
      continue;
    }
    c.staged[i] = make_tensor(d, t.dtype, t.shape);
    arg_ptrs[i] = &c.staged[i];
  }
  std::vector<Tensor> outs(outputs.size());
  for (size_t o = 0; o < outputs.size(); ++o) {
    bool on_bound = false;
    for (size_t i = 0; i < params.size() && !on_bound; ++i)
      on_bound = c.bound[i] && outputs[o].data() == c.bound[i];
    if (on_bound) {
      c.bound_out[o] = outputs[o].data();
      outs[o] = outputs[o];
    } else {
      c.staged_out[o] = make_tensor(d, outputs[o].dtype, outputs[o].shape);
      outs[o] = c.staged_out[o];
    }
  }
  // The shared kernel workspace, grown now if needed: a launch must not
  // reallocate it while recording.
  size_t workspace = 0;
  for (const auto& s : p.steps) workspace = std::max(workspace, s->kernel ? s->kernel->workspace : size_t{0});
  if (workspace) d->reserve_workspace(workspace);
  c.workspace = d->workspace_buffer();
  std::string why;
  d->begin_capture();
  try {
    run_plan(p, arg_ptrs, outs);
  } catch (const std::exception& e) {
    why = e.what();
  }
  try {
    std::shared_ptr<Device::Captured> g = d->end_capture();
    if (why.empty()) c.graph = std::move(g);
  } catch (const std::exception& e) {
    if (why.empty()) why = e.what();
  }
  // A launch that grew the shared workspace while recording would leave the
  // graph pointing at a buffer this state does not hold.
  if (why.empty() && d->workspace_buffer() != c.workspace) why = "the kernel workspace was reallocated while recording";
  ++c.captures;
  if (!why.empty()) {
    c.graph.reset();
    c.disabled = true;
    logger().debug("[graph {}] not captured on {}: {}", p.graph.name(), d->name(), why);
    return false;
  }
  logger().debug("[graph {}] captured on {} ({} steps)", p.graph.name(), d->name(), p.steps.size());
  return true;
}

}  // namespace

bool run_captured(ExecutionPlan& p, const std::vector<const Tensor*>& params, const std::vector<Tensor>& outputs) {
  if (!p.capture) {
    if (!qualifies(p)) return false;
    p.capture.reset(new CaptureState);
  }
  CaptureState& c = *p.capture;
  if (c.disabled) return false;
  if (matches(c, params, outputs)) {
    replay(p, c, params, outputs);
    return true;
  }
  std::vector<spora_devptr_t> now(params.size());
  for (size_t i = 0; i < params.size(); ++i) now[i] = params[i]->data();
  if (!c.noted || c.captures >= kMaxCaptures) {
    if (c.noted) {
      c.disabled = true;  // the bound addresses keep changing: recording would not pay
      logger().debug("[graph {}] capture stopped after {} recordings", p.graph.name(), c.captures);
    }
    c.last = std::move(now);
    c.noted = true;
    return false;
  }
  const bool ok = record(p, c, params, outputs);
  c.last = std::move(now);
  if (!ok) return false;
  replay(p, c, params, outputs);
  return true;
}

CaptureCounts capture_counts(const ExecutionPlan& p) {
  CaptureCounts n;
  if (p.capture) {
    n.replays = p.capture->replays;
    n.captures = p.capture->captures;
    n.disabled = p.capture->disabled;
  }
  return n;
}

}  // namespace spora::sched
