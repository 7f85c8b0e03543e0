// Running a finished execution plan (plan.h): bind buffers, enqueue the
// launches, copies and host callbacks on the device's stream.
#include "sched/executor.h"

#include <algorithm>
#include <memory>

#include "ir/serialize.h"
#include "runtime/collective.h"
#include "runtime/interpreter.h"
#include "runtime/profiler.h"
#include "sched/host_errors.h"
#include "sched/plan_build.h"
#include "sched/plan_capture.h"
#include "support/error.h"

namespace spora::sched {

// The host callback of a cpu-placed step: runs its cpu kernel in the device
// stream's order, after the copies in and before the copies out. One per
// queued call; a failure goes to the thread whose run queued it
// (host_errors.h), not to whichever caller runs the plan next.
struct HostLaunch {
  Step* step;
  std::shared_ptr<HostErrors> errors;

  static void run(void* user, const spora_plugin_error_t* /*status*/) {
    // Earlier failures on the stream stay the stream's to report; the
    // kernel runs regardless, like the device's own kernels do.
    const std::unique_ptr<HostLaunch> call(static_cast<HostLaunch*>(user));
    const Step* s = call->step;
    const ir::Graph& g = s->owner->graph;
    try {
      s->host->launch(*s->kernel, s->host_in, s->host_out);
    } catch (const std::exception& e) {
      const Error* err = dynamic_cast<const Error*>(&e);
      record_host_error(*call->errors, Error(err ? err->code() : Code::kInternal,
                                             ir::with_loc(e.what(), g.node(s->node).loc) +
                                                 " (in an earlier run of graph '" + g.name() + "')"));
    } catch (...) {
      record_host_error(*call->errors, Error(Code::kInternal, "[graph] unknown error in a host callback (in an "
                                                              "earlier run of graph '" + g.name() + "')"));
    }
  }
};

namespace {

[[noreturn]] void node_error(const ir::Node& n, Code code, const std::string& msg) {
  throw Error(code, ir::with_loc(msg, n.loc));
}

// A device-to-device copy in stream order (synchronous on plugins without
// asynchronous copies).
void copy_in_stream(Device* d, spora_devptr_t dst, spora_devptr_t src, size_t bytes) {
  if (!bytes) return;
  if (d->has_async())
    d->copy_d2d_async(dst, src, bytes);
  else
    d->copy_d2d(dst, src, bytes);
}

void check_outputs(const ExecutionPlan& p, const std::vector<Tensor>& outputs) {
  const ir::Graph& g = p.graph;
  if (outputs.size() != g.outputs().size())
    fail(Code::kInternal, "[graph {}] has {} outputs, {} given to write", g.name(), g.outputs().size(), outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const TensorMeta& m = g.meta(g.outputs()[i]);
    const Tensor& t = outputs[i];
    if (!t.buffer || t.dtype != m.dtype || t.shape != m.shape || t.device() != p.device)
      fail(Code::kInternal, "[graph {}] output {} must be {} {} on {}", g.name(), i, dtype_name(m.dtype),
           m.shape.str(), p.device->name());
  }
}

std::vector<const Tensor*> pointers(const std::vector<Tensor>& ts) {
  std::vector<const Tensor*> p;
  for (const Tensor& t : ts) p.push_back(&t);
  return p;
}

// The collectives one run started without waiting (plan.h, "Overlap") on
// communicators' threads. They use the run's memory, so the run ends (even
// by an exception) only once they have: the destructor skips those never
// released to start and waits for the rest.
struct AsyncCollectives {
  struct Pending {
    std::shared_ptr<Communicator> comm;  // keeps the thread the job runs on
    std::shared_ptr<Communicator::Job> job;
    int32_t node = 0;
    bool released = false;  // marked ready, or a callback that will is queued
    // Staged (a device without host-addressable memory): where the result
    // is copied back from after the wait.
    void* host_out = nullptr;
    spora_devptr_t device_out = nullptr;
    size_t out_bytes = 0;
  };
  ExecutionPlan& p;
  std::vector<Pending> slots;

  explicit AsyncCollectives(ExecutionPlan& plan) : p(plan), slots(static_cast<size_t>(plan.num_async)) {}
  ~AsyncCollectives() {
    for (Pending& s : slots) {
      if (!s.job) continue;
      if (!s.released) s.job->cancel();
      s.job->wait(false);
    }
  }
  // Waits for every job and raises the first failure, naming its node.
  void finish() {
    for (Pending& s : slots)
      if (s.job) s.job->wait(false);  // the device's own waits were queued already
    for (Pending& s : slots) {
      if (!s.job) continue;
      try {
        s.job->rethrow();
      } catch (const Error& e) {
        node_error(p.graph.node(s.node), e.code(), e.what());
      } catch (const std::exception& e) {
        node_error(p.graph.node(s.node), Code::kInternal, e.what());
      }
    }
  }
  // Host callbacks own a reference to their job: an await queued at the end
  // of a run may run after the run returned and let go of its jobs.
  using JobRef = std::shared_ptr<Communicator::Job>;
  static void* ref(const JobRef& job) { return new JobRef(job); }
  static void ready(void* job, const spora_plugin_error_t*) {
    std::unique_ptr<JobRef> j(static_cast<JobRef*>(job));
    (*j)->mark_ready();
  }
  static void await(void* job, const spora_plugin_error_t*) {
    std::unique_ptr<JobRef> j(static_cast<JobRef*>(job));
    (*j)->wait();
  }
  // Queues `fn` (ready or await) for `job` on the device's stream.
  static void enqueue(Device* d, spora_host_callback_fn fn, const JobRef& job) {
    void* r = ref(job);
    try {
      d->host_callback(fn, r);
    } catch (...) {
      delete static_cast<JobRef*>(r);
      throw;
    }
  }
};

// One run of a plan: what its slots resolve to.
struct Frame {
  ExecutionPlan& p;
  const std::vector<const Tensor*>& params;
  const std::vector<Tensor>& outputs;
  AsyncCollectives* async;

  const Slot& root_slot(ir::Value v) const {
    const Slot* s = &p.slot(v);
    return s->kind == Slot::kAlias ? p.slot(s->alias) : *s;
  }
  spora_devptr_t addr(ir::Value v) const {
    const Slot& s = root_slot(v);
    switch (s.kind) {
      case Slot::kParam: return params[static_cast<size_t>(s.index)]->data();
      case Slot::kConstant: return p.constants[static_cast<size_t>(s.index)].data();
      case Slot::kOutput: return outputs[static_cast<size_t>(s.index)].data();
      case Slot::kArena: return reinterpret_cast<spora_devptr_t>(reinterpret_cast<uintptr_t>(p.arena->ptr()) + s.offset);
      default: return nullptr;
    }
  }
  void* host_addr(uint64_t offset) const {
    return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p.host_arena->ptr()) + offset);
  }
  // A tensor over a value's memory (for binding it to a nested plan).
  Tensor tensor_of(ir::Value v) const {
    const Slot& s = root_slot(v);
    const TensorMeta& m = p.graph.meta(v);
    Tensor t;
    switch (s.kind) {
      case Slot::kParam: t = *params[static_cast<size_t>(s.index)]; break;
      case Slot::kConstant: t = p.constants[static_cast<size_t>(s.index)]; break;
      case Slot::kOutput: t = outputs[static_cast<size_t>(s.index)]; break;
      case Slot::kArena:
        if (!p.arena) return make_tensor(p.device, m.dtype, m.shape);  // empty: every planned buffer is 0 bytes
        t.buffer = p.arena;
        t.offset = s.offset;
        break;
      default: fail(Code::kInternal, "[graph {}] value %{}.{} has no memory", p.graph.name(), v.node, v.index);
    }
    t.dtype = m.dtype;
    t.shape = m.shape;
    return t;
  }
  std::vector<Tensor> tensors_of(const std::vector<ir::Value>& vs, size_t first = 0) const {
    std::vector<Tensor> ts;
    for (size_t i = first; i < vs.size(); ++i) ts.push_back(tensor_of(vs[i]));
    return ts;
  }
};

void run_kernel(const Frame& f, const Step& step) {
  spora_devptr_t in[kMaxOpInputs], out[kMaxOpOutputs];
  for (size_t i = 0; i < step.inputs.size(); ++i) in[i] = f.addr(step.inputs[i]);
  for (size_t i = 0; i < step.outputs.size(); ++i) out[i] = f.addr(step.outputs[i]);
  f.p.device->launch(*step.kernel, in, out, f.p.workspace ? f.p.workspace->ptr() : nullptr);
}

void run_host_kernel(const Frame& f, Step& step) {
  Device* d = f.p.device;
  if (f.p.host_steps_async) {
    // In stream order: the copies in, the cpu kernel from a callback, the
    // copies out -- from pinned memory, so they read what the callback
    // wrote (plan_arenas.cpp says why it must be pinned).
    for (const HostCopy& c : step.copy_in)
      if (c.bytes) d->copy_d2h_async(f.host_addr(c.host_offset), f.addr(c.value), c.bytes);
    auto call = std::make_unique<HostLaunch>(HostLaunch{&step, this_thread_host_errors()});
    d->host_callback(&HostLaunch::run, call.get());
    call.release();  // the callback deletes it (a plugin skipping callbacks after a device failure leaks it)
    for (const HostCopy& c : step.copy_out)
      if (c.bytes) d->copy_h2d_async(f.addr(c.value), f.host_addr(c.host_offset), c.bytes);
  } else {
    // No pinned memory: synchronous copies order the step (each waits for
    // the work queued before it).
    for (const HostCopy& c : step.copy_in)
      if (c.bytes) d->copy_d2h(f.host_addr(c.host_offset), f.addr(c.value), c.bytes);
    step.host->launch(*step.kernel, step.host_in, step.host_out);
    for (const HostCopy& c : step.copy_out)
      if (c.bytes) d->copy_h2d(f.addr(c.value), f.host_addr(c.host_offset), c.bytes);
  }
}

// Pinned host memory of an async collective staged through the host:
// `which` 0 its input, 1 its output. The plan keeps it for later runs.
void* stage(ExecutionPlan& p, int32_t slot, int which, size_t bytes) {
  if (p.comm_stage.empty()) p.comm_stage.resize(static_cast<size_t>(p.num_async) * 2);
  auto& b = p.comm_stage[static_cast<size_t>(slot) * 2 + static_cast<size_t>(which)];
  if (!b) {
    Device* d = p.device;
    b = std::shared_ptr<void>(d->host_alloc_pinned(std::max<size_t>(bytes, 1)), [d](void* q) { d->host_free_pinned(q); });
  }
  return b.get();
}

// A device-bound async collective's events: inputs ready (compute lane),
// done (comm lane).
Device::Event& comm_event(ExecutionPlan& p, int32_t slot, int which) {
  if (p.comm_events.empty()) p.comm_events.resize(static_cast<size_t>(p.num_async) * 2);
  auto& e = p.comm_events[static_cast<size_t>(slot) * 2 + static_cast<size_t>(which)];
  if (!e) e = std::make_unique<Device::Event>(p.device);
  return *e;
}

// A device-bound communicator (NCCL) enqueues the collective on the
// device's streams: in line on the compute stream, or -- async -- on the
// comm stream after the compute stream's point, so later kernels run
// beside it. A host-memory communicator reads what earlier launches wrote
// and blocks until every rank joins: in line it runs once the stream has
// drained; async it runs on the communicator's thread once the stream
// reaches it (a host callback releases it), while this thread goes on
// launching. Errors (a timeout naming the collective) belong to this run.
void run_collective(const Frame& f, const Step& step) {
  Device* d = f.p.device;
  const ir::Node& n = f.p.graph.node(step.node);
  std::shared_ptr<Communicator> comm = Communicator::find(step.group, n.op->name);
  const TensorMeta& in = f.p.graph.meta(step.inputs[0]);
  const TensorMeta& out = f.p.graph.meta(step.outputs[0]);
  const void* send = reinterpret_cast<const void*>(f.addr(step.inputs[0]));
  void* recv = reinterpret_cast<void*>(f.addr(step.outputs[0]));
  if (Device* cd = comm->device()) {
    if (cd != d)
      fail(Code::kInvalidArgument, "[{}] communicator {} runs on {}, but the graph runs on {}", n.op->name,
           comm->id(), cd->name(), d->name());
    if (step.async_slot < 0) return comm->run_device(n.op->name, n.attrs, in, out, send, recv, step.reduce_op,
                                                     Device::Lane::kCompute);
    Device::Event& ready = comm_event(f.p, step.async_slot, 0);
    d->record(ready, Device::Lane::kCompute);
    d->wait(Device::Lane::kComm, ready);
    comm->run_device(n.op->name, n.attrs, in, out, send, recv, step.reduce_op, Device::Lane::kComm);
    d->record(comm_event(f.p, step.async_slot, 1), Device::Lane::kComm);
    return;
  }
  // A device without host-addressable memory is staged through host
  // memory: pinned, in stream order, when the collective is async.
  const bool staged = !d->unified_memory();
  const size_t in_bytes = static_cast<size_t>(in.shape.numel()) * dtype_size(in.dtype);
  const size_t out_bytes = static_cast<size_t>(out.shape.numel()) * dtype_size(out.dtype);
  if (step.async_slot < 0) {
    std::vector<char> hin(staged ? in_bytes : 0), hout(staged ? out_bytes : 0);
    const void* hs = staged ? hin.data() : send;
    void* hr = staged ? hout.data() : recv;
    // Behind the collectives this run started, if any: every rank then
    // runs them in the same order.
    std::shared_ptr<Communicator::Job> job;
    if (f.p.num_async > 0) job = Communicator::post([&] { comm->run_host(n.op->name, n.attrs, in, out, hs, hr, step.reduce_op); });
    try {
      if (d->has_async())
        d->wait_idle();  // leaves the stream's pending error to the user's synchronize
      else
        d->synchronize();
      if (staged) d->copy_d2h(hin.data(), f.addr(step.inputs[0]), in_bytes);
    } catch (...) {
      if (job) {
        job->cancel();
        job->wait();
      }
      throw;
    }
    if (!job) {
      comm->run_host(n.op->name, n.attrs, in, out, hs, hr, step.reduce_op);
    } else {
      job->mark_ready();
      job->wait();
      job->rethrow();
    }
    if (staged) d->copy_h2d(f.addr(step.outputs[0]), hout.data(), out_bytes);
    return;
  }
  AsyncCollectives::Pending& s = f.async->slots[static_cast<size_t>(step.async_slot)];
  const void* hs = send;
  void* hr = recv;
  if (staged) {  // plan_overlap.cpp makes it async only with pinned memory and async copies
    hs = stage(f.p, step.async_slot, 0, in_bytes);
    hr = s.host_out = stage(f.p, step.async_slot, 1, out_bytes);
    s.device_out = f.addr(step.outputs[0]);
    s.out_bytes = out_bytes;
    d->copy_d2h_async(const_cast<void*>(hs), f.addr(step.inputs[0]), in_bytes);
  }
  Communicator* c = comm.get();  // s.comm keeps it alive while the job may run
  s.comm = comm;
  s.node = step.node;
  s.job = comm->post([c, op = n.op->name, attrs = n.attrs, in, out, hs, hr, r = step.reduce_op] {
    c->run_host(op, attrs, in, out, hs, hr, r);
  });
  if (d->has_async()) {
    AsyncCollectives::enqueue(d, &AsyncCollectives::ready, s.job);
  } else {
    s.job->mark_ready();
  }
  s.released = true;
}

// Before a step reading an async collective's outputs: the compute stream
// (or, for a device without one, this thread) waits until it finished.
void wait_collective(const Frame& f, int32_t slot) {
  Device* d = f.p.device;
  AsyncCollectives::Pending& s = f.async->slots[static_cast<size_t>(slot)];
  if (!s.job) {  // device-bound
    d->wait(Device::Lane::kCompute, comm_event(f.p, slot, 1));
    return;
  }
  if (d->has_async()) {
    AsyncCollectives::enqueue(d, &AsyncCollectives::await, s.job);
  } else {
    s.job->wait();
  }
  if (s.host_out) d->copy_h2d_async(s.device_out, s.host_out, s.out_bytes);  // staged: the result back
}

void run_if(const Frame& f, Step& step) {
  const bool taken = read_flag(f.tensor_of(step.inputs[0]));
  const std::vector<Tensor> args = f.tensors_of(step.inputs, 1), outs = f.tensors_of(step.outputs);
  run_plan(*step.sub[taken ? 0 : 1], pointers(args), outs);
}

// Carried values live in the inputs (read only), then alternately in the
// node's outputs and the scratch set, so a loop allocates nothing per
// iteration.
void run_while(const Frame& f, Step& step) {
  const int64_t limit = max_while_iterations();
  const std::vector<Tensor> initial = f.tensors_of(step.inputs), final_out = f.tensors_of(step.outputs);
  const std::vector<Tensor>* cur = &initial;
  const std::vector<Tensor>* next = &final_out;
  const std::vector<Tensor> flag = {step.flag};
  for (int64_t iter = 0;; ++iter) {
    run_plan(*step.sub[0], pointers(*cur), flag);
    if (!read_flag(step.flag)) break;
    if (iter >= limit) while_runaway(f.p.graph.node(step.node), limit);
    run_plan(*step.sub[1], pointers(*cur), *next);
    cur = next;
    next = cur == &final_out ? &step.scratch : &final_out;
  }
  if (cur != &final_out)
    for (size_t i = 0; i < final_out.size(); ++i)
      copy_in_stream(f.p.device, final_out[i].data(), (*cur)[i].data(), final_out[i].nbytes());
}

// The profiler's span of a step: the host time it took to enqueue (the
// device work shows on the plugin's tracks), with its node's types and
// source line.
void profile_step(const Frame& f, const Step& step, int64_t t0) {
  const ir::Node& n = f.p.graph.node(step.node);
  profiler::IoArgs io;
  for (const ir::Value& v : step.inputs) {
    const TensorMeta& m = f.p.graph.meta(v);
    io.input(m.dtype, m.shape.dims, m.shape.rank);
  }
  for (const ir::Value& v : step.outputs) {
    const TensorMeta& m = f.p.graph.meta(v);
    io.output(m.dtype, m.shape.dims, m.shape.rank);
  }
  profiler::record_op("node", n.op ? n.op->name : std::string("step"), t0, io,
                      step.kind == Step::kHostKernel ? nullptr : f.p.device, n.loc.file.c_str(), n.loc.line);
}

void run_step(const Frame& f, Step& step) {
  for (int32_t slot : step.waits) wait_collective(f, slot);
  switch (step.kind) {
    case Step::kIf: return run_if(f, step);  // nested plans' errors name their own nodes
    case Step::kWhile: return run_while(f, step);
    default: break;
  }
  const profiler::OpTimer timer;
  try {
    if (step.kind == Step::kKernel) run_kernel(f, step);
    else if (step.kind == Step::kHostKernel) run_host_kernel(f, step);
    else run_collective(f, step);
  } catch (const Error& e) {
    node_error(f.p.graph.node(step.node), e.code(), e.what());
  }
  if (timer.armed()) profile_step(f, step, timer.t0());
}

}  // namespace

void check_bound_params(const ir::Graph& graph, const std::vector<int32_t>& param_nodes, const Device* device,
                        const std::vector<const Tensor*>& params, bool inputs_may_reshape) {
  if (params.size() != param_nodes.size())
    fail(Code::kInvalidArgument, "[graph {}] takes {} inputs and weights, got {}", graph.name(), param_nodes.size(),
         params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const ir::Node& n = graph.node(param_nodes[i]);
    const TensorMeta& m = n.outputs[0];
    if (!params[i])
      fail(Code::kInvalidArgument, "[graph {}] {} '{}' is null", graph.name(), node_kind_name(n.kind), n.name);
    const Tensor& t = *params[i];
    if (t.device() != device)
      fail(Code::kInvalidArgument, "[graph {}] {} '{}' is on {}, the graph runs on {}", graph.name(),
           node_kind_name(n.kind), n.name, t.device()->name(), device->name());
    const bool reshapable = inputs_may_reshape && n.kind == ir::NodeKind::kInput;
    if (t.dtype != m.dtype || t.shape.rank != m.shape.rank || (!reshapable && t.shape != m.shape))
      fail(Code::kInvalidArgument, "[graph {}] {} '{}' must be {} {}{}, got {} {}", graph.name(),
           node_kind_name(n.kind), n.name, dtype_name(m.dtype), m.shape.str(),
           reshapable ? " (or another shape of that rank)" : "", dtype_name(t.dtype), t.shape.str());
  }
}

void run_plan(ExecutionPlan& p, const std::vector<const Tensor*>& params, const std::vector<Tensor>& outputs) {
  check_bound_params(p.graph, p.param_nodes, p.device, params, false);
  raise_host_error();
  check_outputs(p, outputs);
  const profiler::OpTimer timer;
  AsyncCollectives async(p);
  const Frame f{p, params, outputs, &async};
  for (const auto& step : p.steps) run_step(f, *step);
  for (int32_t slot : p.waits_at_end) wait_collective(f, slot);
  async.finish();
  // Outputs that are graph inputs, constants, or views of something other
  // than a fresh output buffer: copy their bytes into the output tensors.
  for (size_t i = 0; i < p.graph.outputs().size(); ++i) {
    const spora_devptr_t src = f.addr(p.graph.outputs()[i]);
    if (src != outputs[i].data()) copy_in_stream(p.device, outputs[i].data(), src, outputs[i].nbytes());
  }
  if (timer.armed())
    profiler::record_span(profiler::Track::kHost, "graph", "graph " + p.graph.name(), timer.t0(), profiler::now_ns(),
                          "");
}

Executable::Executable(const ir::Graph& graph, Device* device) : plan_(build_plan(graph, device)) {}

Executable::~Executable() = default;

namespace {

// Whether output i may be written into params[j]'s memory: the plan allows
// it (output_may_take), the param's buffer is held by this binding alone (no
// other tensor, view or binding sees the overwrite) and not taken yet.
bool may_donate(const ExecutionPlan& p, const std::vector<const Tensor*>& params, size_t i, int32_t j,
                const std::vector<bool>& taken) {
  if (j < 0 || static_cast<size_t>(j) >= params.size() || taken[static_cast<size_t>(j)]) return false;
  const auto& allowed = p.output_may_take[i];
  if (std::find(allowed.begin(), allowed.end(), j) == allowed.end()) return false;
  const Tensor& t = *params[static_cast<size_t>(j)];
  if (!t.buffer || t.buffer.use_count() != 1) return false;
  for (size_t k = 0; k < params.size(); ++k)
    if (k != static_cast<size_t>(j) && params[k]->buffer == t.buffer) return false;
  return true;
}

}  // namespace

std::vector<Tensor> Executable::run(const std::vector<const Tensor*>& params, const std::vector<int32_t>& donate) {
  // Checked before allocating the outputs.
  check_bound_params(plan_->graph, plan_->param_nodes, plan_->device, params, false);
  std::vector<Tensor> outputs;
  std::vector<bool> taken(params.size(), false);
  const auto& outs = plan_->graph.outputs();
  for (size_t i = 0; i < outs.size(); ++i) {
    const int32_t j = i < donate.size() ? donate[i] : -1;
    if (may_donate(*plan_, params, i, j, taken)) {
      taken[static_cast<size_t>(j)] = true;
      outputs.push_back(*params[static_cast<size_t>(j)]);
      continue;
    }
    const TensorMeta& m = plan_->graph.meta(outs[i]);
    outputs.push_back(make_tensor(plan_->device, m.dtype, m.shape));
  }
  const profiler::OpTimer timer;
  if (!run_captured(*plan_, params, outputs)) {
    run_plan(*plan_, params, outputs);
  } else if (timer.armed()) {  // a replay: one launch, no steps of its own
    profiler::record_span(profiler::Track::kHost, "graph", "graph " + plan_->graph.name() + " (replay)",
                          timer.t0(), profiler::now_ns(), "");
  }
  return outputs;
}

int32_t Executable::collectives() const {
  int32_t n = 0;
  for (const auto& s : plan_->steps) n += s->kind == Step::kCollective;
  return n;
}

void Executable::run_into(const std::vector<const Tensor*>& params, const std::vector<Tensor>& outputs) {
  run_plan(*plan_, params, outputs);
}

}  // namespace spora::sched
