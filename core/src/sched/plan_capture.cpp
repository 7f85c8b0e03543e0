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
  // One recording: per param the address its graph reads, or NULL when it
  // reads the staging copy; per output the address it writes (a bound
  // param's memory), or NULL when it writes the staging buffer.
  struct Recording {
    std::vector<spora_devptr_t> bound, bound_out;
    std::shared_ptr<Device::Captured> graph;
    uint64_t used = 0;  // clock of the last replay, for eviction
  };
  std::vector<Recording> recordings;
  // Staging buffers, shared by the recordings that stage the same param or
  // output (replays are in stream order, each copies in and out around its
  // launch), made the first time one is needed.
  std::vector<Tensor> staged, staged_out;
  std::vector<spora_devptr_t> last;                 // per param: its address in the previous run
  bool noted = false, disabled = false;
  uint64_t replays = 0, captures = 0, clock = 0;
};

void destroy_capture_state(CaptureState* s) { delete s; }
void ExecutionPlan::CaptureDeleter::operator()(CaptureState* s) const { destroy_capture_state(s); }

namespace {

// Recordings that bind every param where it is (no staging copy, no staging
// memory: a loop over a few fixed batches, or an allocator that hands the
// same blocks back); past that, a recording stages the params that moved
// since the previous run, so that one replays whatever they bind.
constexpr size_t kBoundRecordings = 4;
constexpr size_t kMaxRecordings = kBoundRecordings + 2;  // then the least recently used goes
constexpr uint64_t kMaxCaptures = 8;                     // then the plan stops recording

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

bool matches(const CaptureState::Recording& r, const std::vector<const Tensor*>& params,
             const std::vector<Tensor>& outputs) {
  for (size_t i = 0; i < params.size(); ++i)
    if (r.bound[i] && params[i]->data() != r.bound[i]) return false;
  for (size_t o = 0; o < outputs.size(); ++o)
    if (r.bound_out[o] && outputs[o].data() != r.bound_out[o]) return false;
  return true;
}

void replay(ExecutionPlan& p, CaptureState& c, CaptureState::Recording& r, const std::vector<const Tensor*>& params,
            const std::vector<Tensor>& outputs) {
  Device* d = p.device;
  for (size_t i = 0; i < params.size(); ++i)
    if (!r.bound[i] && c.staged[i].nbytes()) d->copy_d2d_async(c.staged[i].data(), params[i]->data(), c.staged[i].nbytes());
  d->launch_captured(*r.graph);
  for (size_t o = 0; o < outputs.size(); ++o)
    if (!r.bound_out[o] && outputs[o].nbytes())
      d->copy_d2d_async(outputs[o].data(), c.staged_out[o].data(), outputs[o].nbytes());
  r.used = ++c.clock;
  ++c.replays;
}

// Records the plan with the params in `bind` bound and the rest staged. The
// recording, or NULL (nothing enqueued) when the capture failed.
CaptureState::Recording* record(ExecutionPlan& p, CaptureState& c, const std::vector<const Tensor*>& params,
                                const std::vector<Tensor>& outputs, const std::vector<bool>& bind) {
  Device* d = p.device;
  CaptureState::Recording r;
  r.bound.assign(params.size(), nullptr);
  r.bound_out.assign(outputs.size(), nullptr);
  c.staged.resize(params.size());
  c.staged_out.resize(outputs.size());
  std::vector<const Tensor*> arg_ptrs(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& t = *params[i];
    if (bind[i]) {
      r.bound[i] = t.data();
      arg_ptrs[i] = &t;
      continue;
    }
    if (!c.staged[i].buffer) c.staged[i] = make_tensor(d, t.dtype, t.shape);
    arg_ptrs[i] = &c.staged[i];
  }
  std::vector<Tensor> outs(outputs.size());
  for (size_t o = 0; o < outputs.size(); ++o) {
    bool on_bound = false;
    for (size_t i = 0; i < params.size() && !on_bound; ++i)
      on_bound = r.bound[i] && outputs[o].data() == r.bound[i];
    if (on_bound) {
      r.bound_out[o] = outputs[o].data();
      outs[o] = outputs[o];
    } else {
      if (!c.staged_out[o].buffer) c.staged_out[o] = make_tensor(d, outputs[o].dtype, outputs[o].shape);
      outs[o] = c.staged_out[o];
    }
  }
  std::string why;
  d->begin_capture();
  try {
    run_plan(p, arg_ptrs, outs);
  } catch (const std::exception& e) {
    why = e.what();
  }
  try {
    std::shared_ptr<Device::Captured> g = d->end_capture();
    if (why.empty()) r.graph = std::move(g);
  } catch (const std::exception& e) {
    if (why.empty()) why = e.what();
  }
  ++c.captures;
  if (!why.empty()) {
    c.disabled = true;
    c.recordings.clear();
    logger().debug("[graph {}] not captured on {}: {}", p.graph.name(), d->name(), why);
    return nullptr;
  }
  if (c.recordings.size() >= kMaxRecordings) {
    auto lru = std::min_element(c.recordings.begin(), c.recordings.end(),
                                [](const auto& a, const auto& b) { return a.used < b.used; });
    c.recordings.erase(lru);
  }
  logger().debug("[graph {}] captured on {} ({} steps, recording {})", p.graph.name(), d->name(), p.steps.size(),
                 c.captures);
  c.recordings.push_back(std::move(r));
  return &c.recordings.back();
}

}  // namespace

bool run_captured(ExecutionPlan& p, const std::vector<const Tensor*>& params, const std::vector<Tensor>& outputs) {
  if (!p.capture) {
    if (!qualifies(p)) return false;
    p.capture.reset(new CaptureState);
  }
  CaptureState& c = *p.capture;
  if (c.disabled) return false;
  for (auto& r : c.recordings)
    if (matches(r, params, outputs)) {
      replay(p, c, r, params, outputs);
      return true;
    }
  std::vector<spora_devptr_t> now(params.size());
  for (size_t i = 0; i < params.size(); ++i) now[i] = params[i]->data();
  if (!c.noted || c.captures >= kMaxCaptures) {
    if (c.noted) {
      c.disabled = true;  // bound addresses keep changing: recording would not pay
      c.recordings.clear();
      logger().debug("[graph {}] capture stopped after {} recordings", p.graph.name(), c.captures);
    }
    c.last = std::move(now);
    c.noted = true;
    return false;
  }
  std::vector<bool> bind(params.size(), true);
  if (c.captures >= kBoundRecordings)
    for (size_t i = 0; i < params.size(); ++i) bind[i] = now[i] == c.last[i];
  CaptureState::Recording* r = record(p, c, params, outputs, bind);
  c.last = std::move(now);
  if (!r) return false;
  replay(p, c, *r, params, outputs);
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
