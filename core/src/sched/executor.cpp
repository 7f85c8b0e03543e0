#include "sched/executor.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>

#include "ir/serialize.h"
#include "ir/verifier.h"
#include "runtime/collective.h"
#include "runtime/eager.h"
#include "runtime/interpreter.h"
#include "sched/memory_plan.h"
#include "sched/placement.h"
#include "support/error.h"
#include "support/log.h"

namespace spora::sched {

// Where a value's bytes are at run time.
struct Executable::Slot {
  // kHostOnly: made and read by cpu-placed ops only; it lives in the host
  // arena and has no device memory.
  enum Kind { kParam, kConstant, kArena, kOutput, kAlias, kHostOnly } kind = kArena;
  int32_t index = 0;    // param position, constant index, output position
  uint64_t offset = 0;  // arena offset (kArena)
  ir::Value alias;      // kAlias: the value whose memory this is (a view)
};

// A copy between a device value and its copy in the host arena.
struct HostCopy {
  ir::Value value;  // the device-side value (an alias root)
  uint64_t host_offset = 0;
  uint64_t bytes = 0;
};

struct Step {
  enum Kind { kKernel, kHostKernel, kIf, kWhile, kCollective } kind = kKernel;
  int32_t node = 0;
  // kCollective: the communicator id ("group") and reduce op of all_reduce.
  int64_t group = 0;
  int32_t reduce_op = 0;
  KernelRef kernel;  // kKernel; kHostKernel: planned on the cpu device
  std::vector<ir::Value> inputs;
  std::vector<ir::Value> outputs;
  // kIf: then, else. kWhile: cond, body.
  std::unique_ptr<Executable> sub[2];
  // kWhile: the cond's result and the second set of loop-carried buffers.
  Tensor flag;
  std::vector<Tensor> scratch;
  // kHostKernel: device values copied to cpu before the launch and back
  // after it; the launch's cpu addresses are fixed when compiling.
  std::vector<HostCopy> copy_in, copy_out;
  spora_devptr_t host_in[kMaxOpInputs] = {};
  spora_devptr_t host_out[kMaxOpOutputs] = {};
  Device* host = nullptr;
  Executable* owner = nullptr;
};

// The host callback of a cpu-placed step: runs its cpu kernel in the device
// stream's order, after the copies in and before the copies out.
struct HostLaunch {
  static void run(void* user, const spora_plugin_error_t* /*status*/) {
    // Earlier failures on the stream stay the stream's to report; the
    // kernel runs regardless, like the device's own kernels do.
    Step* s = static_cast<Step*>(user);
    Executable* x = s->owner;
    try {
      s->host->launch(*s->kernel, s->host_in, s->host_out);
    } catch (const std::exception& e) {
      const Error* err = dynamic_cast<const Error*>(&e);
      std::lock_guard<std::mutex> lock(x->async_mu_);
      if (!x->async_error_)
        x->async_error_ = std::make_unique<Error>(err ? err->code() : Code::kInternal,
                                                  ir::with_loc(e.what(), x->graph_.node(s->node).loc));
    } catch (...) {
      std::lock_guard<std::mutex> lock(x->async_mu_);
      if (!x->async_error_)
        x->async_error_ = std::make_unique<Error>(Code::kInternal, "[graph] unknown error in a host callback");
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

}  // namespace

Executable::~Executable() {
  // Queued host callbacks point into this plan's steps (and the pinned host
  // arena they read and write).
  if (host_ops_ && device_->has_async() && !device_->failed()) {
    try {
      device_->wait_idle();
    } catch (const std::exception& e) {
      logger().error("[graph {}] releasing a plan: {}", graph_.name(), e.what());
    }
  }
}

void Executable::raise_async_error() {
  std::lock_guard<std::mutex> lock(async_mu_);
  if (!async_error_) return;
  const Error e = *async_error_;
  async_error_.reset();
  throw Error(e.code(), std::string(e.what()) + " (in an earlier run of graph '" + graph_.name() + "')");
}

Executable::Executable(const ir::Graph& graph, Device* device) : device_(device) {
  ir::check_json_roundtrip(graph, "compile");
  {
    Placement placed = place(graph, device);
    graph_ = std::move(placed.graph);
    on_host_ = std::move(placed.on_host);
    host_ = placed.host;
  }
  ir::verify(graph_);
  ir::check_json_roundtrip(graph_, "compile, after decomposing unsupported ops");
  const auto& nodes = graph_.nodes();
  slots_.resize(nodes.size());
  for (size_t id = 0; id < nodes.size(); ++id) slots_[id].resize(nodes[id].outputs.size());

  // Graph outputs get fresh tensors on every run: they outlive the run.
  std::map<std::pair<int32_t, int32_t>, int32_t> output_pos;
  for (size_t i = 0; i < graph_.outputs().size(); ++i) {
    const ir::Value v = graph_.outputs()[i];
    output_pos.emplace(std::make_pair(v.node, v.index), static_cast<int32_t>(i));
  }

  // Last step reading each value (aliases extend their source's life).
  std::vector<std::vector<int32_t>> last_use(nodes.size());
  for (size_t id = 0; id < nodes.size(); ++id) last_use[id].assign(nodes[id].outputs.size(), static_cast<int32_t>(id));

  std::vector<BufferRequest> requests;
  std::vector<std::pair<int32_t, int32_t>> request_value;
  // Per node, per output: the input it may overwrite (ops with in_place_input).
  std::vector<std::vector<int>> in_place_partner(nodes.size());
  for (size_t id = 0; id < nodes.size(); ++id) {
    const ir::Node& n = nodes[id];
    switch (n.kind) {
      case ir::NodeKind::kInput:
      case ir::NodeKind::kWeight:
        slots_[id][0] = {Slot::kParam, static_cast<int32_t>(param_nodes_.size()), 0, {}};
        param_nodes_.push_back(static_cast<int32_t>(id));
        break;
      case ir::NodeKind::kConstant: {
        const TensorMeta& m = n.outputs[0];
        constants_.push_back(tensor_from_host(device_, m.dtype, m.shape, n.data->data(), n.data->size()));
        slots_[id][0] = {Slot::kConstant, static_cast<int32_t>(constants_.size() - 1), 0, {}};
        break;
      }
      case ir::NodeKind::kIf:
      case ir::NodeKind::kWhile: {
        auto step = std::make_unique<Step>();
        step->kind = n.kind == ir::NodeKind::kIf ? Step::kIf : Step::kWhile;
        step->node = static_cast<int32_t>(id);
        step->inputs = n.inputs;
        for (const ir::Value& v : n.inputs)
          last_use[static_cast<size_t>(v.node)][static_cast<size_t>(v.index)] = static_cast<int32_t>(id);
        for (size_t i = 0; i < n.outputs.size(); ++i)
          step->outputs.push_back({static_cast<int32_t>(id), static_cast<int32_t>(i)});
        // Nested plans, compiled once; their errors already name the
        // failing node inside the sub-graph.
        for (size_t b = 0; b < 2; ++b) step->sub[b] = std::make_unique<Executable>(*n.subgraphs[b], device_);
        if (step->kind == Step::kWhile) {
          const ir::Graph& cond = *n.subgraphs[0];
          const TensorMeta& fm = cond.meta(cond.outputs()[0]);
          step->flag = make_tensor(device_, fm.dtype, fm.shape);
          for (const TensorMeta& m : n.outputs) step->scratch.push_back(make_tensor(device_, m.dtype, m.shape));
        }
        uint64_t held = step->flag.buffer ? step->flag.nbytes() : 0;
        for (const Tensor& t : step->scratch) held += t.nbytes();
        sub_bytes_ += held + step->sub[0]->planned_bytes() + step->sub[1]->planned_bytes();
        sub_naive_bytes_ += held + step->sub[0]->naive_bytes() + step->sub[1]->naive_bytes();
        steps_.push_back(std::move(step));
        break;
      }
      case ir::NodeKind::kApply: {
        TensorMeta metas[kMaxOpInputs];
        for (size_t i = 0; i < n.inputs.size(); ++i) metas[i] = graph_.meta(n.inputs[i]);
        OpCall call;
        try {
          infer_call(*n.op, metas, static_cast<int>(n.inputs.size()), n.attrs, call);
        } catch (const Error& e) {
          node_error(n, e.code(), e.what());
        }
        auto step = std::make_unique<Step>();
        step->node = static_cast<int32_t>(id);
        step->inputs = n.inputs;
        for (const ir::Value& v : n.inputs)
          last_use[static_cast<size_t>(v.node)][static_cast<size_t>(v.index)] = static_cast<int32_t>(id);
        for (int i = 0; i < call.num_outputs; ++i) step->outputs.push_back({static_cast<int32_t>(id), i});
        if (n.op->in_place && n.op->in_place_input)
          for (int i = 0; i < call.num_outputs; ++i) in_place_partner[id].push_back(n.op->in_place_input(call, i));
        if (call.view) {
          slots_[id][0] = {Slot::kAlias, 0, 0, n.inputs[0]};
        } else if (is_collective_op(*n.op)) {
          // Run by the scheduler through the communicator's plugin, not by
          // a device kernel; placement checked the memory is host memory.
          step->kind = Step::kCollective;
          step->group = call.attrs.get_int("group");
          step->reduce_op = reduce_op_from_name(call.attrs.find("op")->s, n.op->name);
          steps_.push_back(std::move(step));
        } else {
          Device* runs_on = on_host_[id] ? host_ : device_;
          try {
            step->kernel = runs_on->kernel(*n.op, call);
          } catch (const Error& e) {
            node_error(n, e.code(), e.what());
          }
          if (on_host_[id]) {
            step->kind = Step::kHostKernel;
            step->host = host_;
            step->owner = this;
            ++host_ops_;
          }
          steps_.push_back(std::move(step));
        }
        break;
      }
    }
  }
  // Resolve alias chains and propagate their lifetimes to the source.
  auto root = [&](ir::Value v) {
    while (slots_[static_cast<size_t>(v.node)][static_cast<size_t>(v.index)].kind == Slot::kAlias)
      v = slots_[static_cast<size_t>(v.node)][static_cast<size_t>(v.index)].alias;
    return v;
  };
  for (size_t id = nodes.size(); id-- > 0;)
    for (size_t o = 0; o < slots_[id].size(); ++o)
      if (slots_[id][o].kind == Slot::kAlias) {
        const ir::Value r = root({static_cast<int32_t>(id), static_cast<int32_t>(o)});
        int32_t& lu = last_use[static_cast<size_t>(r.node)][static_cast<size_t>(r.index)];
        lu = std::max(lu, last_use[id][o]);
        slots_[id][o].alias = r;
      }
  // Outputs (and views of outputs) are not arena buffers.
  for (const auto& [v, pos] : output_pos) {
    const ir::Value r = root({v.first, v.second});
    auto& slot = slots_[static_cast<size_t>(r.node)][static_cast<size_t>(r.index)];
    if (slot.kind == Slot::kArena) slot = {Slot::kOutput, pos, 0, {}};
  }
  // Which values the cpu and the device need, by alias root: cpu-placed
  // outputs the device never reads get no device memory.
  std::vector<std::vector<int32_t>> host_first(nodes.size()), host_last(nodes.size());
  std::vector<std::vector<char>> device_reads(nodes.size());
  if (host_ops_) {
    for (size_t id = 0; id < nodes.size(); ++id) {
      host_first[id].assign(nodes[id].outputs.size(), -1);
      host_last[id].assign(nodes[id].outputs.size(), -1);
      device_reads[id].assign(nodes[id].outputs.size(), 0);
    }
    for (const auto& step : steps_)
      for (const ir::Value& v : step->inputs) {
        const ir::Value r = root(v);
        const size_t rn = static_cast<size_t>(r.node), ri = static_cast<size_t>(r.index);
        if (step->kind == Step::kHostKernel) {
          if (host_first[rn][ri] < 0) host_first[rn][ri] = step->node;
          host_last[rn][ri] = step->node;
        } else {
          device_reads[rn][ri] = 1;
        }
      }
    for (const ir::Value& v : graph_.outputs()) {
      const ir::Value r = root(v);
      device_reads[static_cast<size_t>(r.node)][static_cast<size_t>(r.index)] = 1;
    }
    for (size_t id = 0; id < nodes.size(); ++id)
      if (on_host_[id])
        for (size_t o = 0; o < slots_[id].size(); ++o)
          if (!device_reads[id][o] && slots_[id][o].kind == Slot::kArena) slots_[id][o].kind = Slot::kHostOnly;
  }
  std::map<std::pair<int32_t, int32_t>, size_t> request_index;
  for (size_t id = 0; id < nodes.size(); ++id) {
    const ir::NodeKind k = nodes[id].kind;
    if (k != ir::NodeKind::kApply && k != ir::NodeKind::kIf && k != ir::NodeKind::kWhile) continue;
    for (size_t o = 0; o < slots_[id].size(); ++o) {
      if (slots_[id][o].kind != Slot::kArena) continue;
      const TensorMeta& m = nodes[id].outputs[o];
      BufferRequest req{static_cast<uint64_t>(m.shape.numel()) * dtype_size(m.dtype), static_cast<int32_t>(id),
                        last_use[id][o]};
      // In place: an elementwise op may write over an arena input of its
      // own type that nothing reads afterwards.
      const ir::Node& n = nodes[id];
      auto reuse = [&](const ir::Value& v) {
        const ir::Value r = root(v);
        auto it = request_index.find({r.node, r.index});
        const TensorMeta& im = graph_.meta(r);
        if (it == request_index.end() || im.dtype != m.dtype || im.shape != m.shape ||
            last_use[static_cast<size_t>(r.node)][static_cast<size_t>(r.index)] != static_cast<int32_t>(id))
          return false;
        req.reuse = static_cast<int32_t>(it->second);
        return true;
      };
      if (k == ir::NodeKind::kApply && n.op->in_place && n.op->in_place_input && !on_host_[id]) {
        // A multi-output op writes output o over its partner input only: the
        // partner must not be read through any other input slot too, since
        // the kernel reads those while writing o (possibly on other threads).
        const int i = o < in_place_partner[id].size() ? in_place_partner[id][o] : -1;
        if (i >= 0 && static_cast<size_t>(i) < n.inputs.size()) {
          const ir::Value r = root(n.inputs[static_cast<size_t>(i)]);
          bool shared = false;
          for (size_t j = 0; j < n.inputs.size(); ++j) {
            const ir::Value rj = root(n.inputs[j]);
            shared = shared || (j != static_cast<size_t>(i) && rj.node == r.node && rj.index == r.index);
          }
          if (!shared) reuse(n.inputs[static_cast<size_t>(i)]);
        }
      } else if (o == 0 && k == ir::NodeKind::kApply && n.op->in_place && !on_host_[id]) {
        for (const ir::Value& v : n.inputs)
          if (reuse(v)) break;
      }
      request_index[{static_cast<int32_t>(id), static_cast<int32_t>(o)}] = requests.size();
      requests.push_back(req);
      request_value.emplace_back(static_cast<int32_t>(id), static_cast<int32_t>(o));
    }
  }
  const MemoryPlan plan = plan_memory(requests);
  for (size_t i = 0; i < requests.size(); ++i)
    slots_[static_cast<size_t>(request_value[i].first)][static_cast<size_t>(request_value[i].second)].offset =
        plan.offsets[i];
  arena_bytes_ = plan.arena_bytes;
  naive_bytes_ = plan.naive_bytes;
  for (const ir::Value& v : graph_.outputs()) {
    const TensorMeta& m = graph_.meta(v);
    naive_bytes_ += static_cast<uint64_t>(m.shape.numel()) * dtype_size(m.dtype);
  }
  if (arena_bytes_ > 0) arena_ = std::make_shared<Buffer>(device_, arena_bytes_);
  // Nested plans (and a loop's scratch) are memory this executable holds.
  arena_bytes_ += sub_bytes_;
  naive_bytes_ += sub_naive_bytes_;

  if (host_ops_) {
    // The host arena, planned like the device's: cpu-placed outputs from
    // their step on, device values' cpu copies from their first cpu reader,
    // each until its last cpu reader. Constants are uploaded to cpu once.
    std::vector<BufferRequest> host_requests;
    std::vector<ir::Value> host_value;
    std::vector<std::vector<int32_t>> host_const(nodes.size());
    for (size_t id = 0; id < nodes.size(); ++id) {
      host_const[id].assign(nodes[id].outputs.size(), -1);
      for (size_t o = 0; o < nodes[id].outputs.size(); ++o) {
        const bool produced = on_host_[id];
        if (!produced && host_first[id][o] < 0) continue;
        const TensorMeta& m = nodes[id].outputs[o];
        if (nodes[id].kind == ir::NodeKind::kConstant) {
          host_constants_.push_back(
              tensor_from_host(host_, m.dtype, m.shape, nodes[id].data->data(), nodes[id].data->size()));
          host_const[id][o] = static_cast<int32_t>(host_constants_.size() - 1);
          continue;
        }
        const int32_t first = produced ? static_cast<int32_t>(id) : host_first[id][o];
        host_requests.push_back(
            {static_cast<uint64_t>(m.shape.numel()) * dtype_size(m.dtype), first, std::max(first, host_last[id][o])});
        host_value.push_back({static_cast<int32_t>(id), static_cast<int32_t>(o)});
      }
    }
    const MemoryPlan hplan = plan_memory(host_requests);
    host_arena_bytes_ = hplan.arena_bytes;
    // The host arena takes part in copies ordered after host callbacks (a
    // cpu step's outputs are written by its callback, then copied to the
    // device): it must be the device plugin's pinned memory, which async
    // copies read and write when the stream reaches them. Pageable memory
    // may be read when the copy is enqueued (CUDA does), before the
    // callback has run. A plugin without pinned memory gets synchronous
    // cpu steps instead (run_into).
    host_steps_async_ = device_->has_pinned();
    if (host_arena_bytes_ > 0) {
      if (host_steps_async_) {
        Device* dev = device_;
        void* p = dev->host_alloc_pinned(host_arena_bytes_);
        host_arena_ = std::make_shared<Buffer>(host_, reinterpret_cast<spora_devptr_t>(p), host_arena_bytes_,
                                               [dev, p] { dev->host_free_pinned(p); });
      } else {
        host_arena_ = std::make_shared<Buffer>(host_, host_arena_bytes_);
      }
    }
    std::map<std::pair<int32_t, int32_t>, uint64_t> host_offset;
    for (size_t i = 0; i < host_requests.size(); ++i)
      host_offset[{host_value[i].node, host_value[i].index}] = hplan.offsets[i];
    auto host_ptr = [&](ir::Value r) -> spora_devptr_t {
      const int32_t c = host_const[static_cast<size_t>(r.node)][static_cast<size_t>(r.index)];
      if (c >= 0) return host_constants_[static_cast<size_t>(c)].data();
      return reinterpret_cast<spora_devptr_t>(reinterpret_cast<uintptr_t>(host_arena_->ptr()) +
                                              host_offset.at({r.node, r.index}));
    };
    for (const auto& step : steps_) {
      if (step->kind != Step::kHostKernel) continue;
      for (size_t i = 0; i < step->inputs.size(); ++i) {
        const ir::Value r = root(step->inputs[i]);
        step->host_in[i] = host_ptr(r);
        const size_t rn = static_cast<size_t>(r.node), ri = static_cast<size_t>(r.index);
        // A device value is copied in by its first cpu reader, once.
        if (on_host_[rn] || host_const[rn][ri] >= 0 || host_first[rn][ri] != step->node) continue;
        bool seen = false;
        for (const HostCopy& c : step->copy_in) seen = seen || c.value == r;
        if (!seen)
          step->copy_in.push_back(
              {r, host_offset.at({r.node, r.index}), graph_.meta(r).shape.numel() * dtype_size(graph_.meta(r).dtype)});
      }
      for (size_t o = 0; o < step->outputs.size(); ++o) {
        const ir::Value v = step->outputs[o];
        step->host_out[o] = host_ptr(v);
        if (device_reads[static_cast<size_t>(v.node)][static_cast<size_t>(v.index)])
          step->copy_out.push_back(
              {v, host_offset.at({v.node, v.index}), graph_.meta(v).shape.numel() * dtype_size(graph_.meta(v).dtype)});
      }
      host_copies_ += step->copy_in.size() + step->copy_out.size();
    }
  }
  // Kernel scratch sized now: growing it during a run would free the old
  // one, which waits for the device.
  size_t workspace = 0, host_workspace = 0;
  for (const auto& step : steps_) {
    if (step->kind == Step::kKernel) workspace = std::max(workspace, step->kernel->workspace);
    if (step->kind == Step::kHostKernel) host_workspace = std::max(host_workspace, step->kernel->workspace);
  }
  device_->reserve_workspace(workspace);
  if (host_) host_->reserve_workspace(host_workspace);
}

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

void Executable::check_params(const std::vector<const Tensor*>& params) const {
  check_bound_params(graph_, param_nodes_, device_, params, false);
}

std::vector<Tensor> Executable::run(const std::vector<const Tensor*>& params) {
  check_params(params);  // before allocating the outputs
  std::vector<Tensor> outputs;
  for (const ir::Value& v : graph_.outputs()) {
    const TensorMeta& m = graph_.meta(v);
    outputs.push_back(make_tensor(device_, m.dtype, m.shape));
  }
  run_into(params, outputs);
  return outputs;
}

void Executable::run_into(const std::vector<const Tensor*>& params, const std::vector<Tensor>& outputs) {
  check_params(params);
  raise_async_error();
  if (outputs.size() != graph_.outputs().size())
    fail(Code::kInternal, "[graph {}] has {} outputs, {} given to write", graph_.name(), graph_.outputs().size(),
         outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const TensorMeta& m = graph_.meta(graph_.outputs()[i]);
    const Tensor& t = outputs[i];
    if (!t.buffer || t.dtype != m.dtype || t.shape != m.shape || t.device() != device_)
      fail(Code::kInternal, "[graph {}] output {} must be {} {} on {}", graph_.name(), i, dtype_name(m.dtype),
           m.shape.str(), device_->name());
  }
  auto addr = [&](ir::Value v) -> spora_devptr_t {
    const Slot* s = &slots_[static_cast<size_t>(v.node)][static_cast<size_t>(v.index)];
    if (s->kind == Slot::kAlias) s = &slots_[static_cast<size_t>(s->alias.node)][static_cast<size_t>(s->alias.index)];
    switch (s->kind) {
      case Slot::kParam: return params[static_cast<size_t>(s->index)]->data();
      case Slot::kConstant: return constants_[static_cast<size_t>(s->index)].data();
      case Slot::kOutput: return outputs[static_cast<size_t>(s->index)].data();
      case Slot::kArena:
        return reinterpret_cast<spora_devptr_t>(reinterpret_cast<uintptr_t>(arena_->ptr()) + s->offset);
      default: return nullptr;
    }
  };
  // A tensor over a value's memory (for binding it to a nested plan).
  auto tensor_of = [&](ir::Value v) -> Tensor {
    const Slot* s = &slots_[static_cast<size_t>(v.node)][static_cast<size_t>(v.index)];
    if (s->kind == Slot::kAlias) s = &slots_[static_cast<size_t>(s->alias.node)][static_cast<size_t>(s->alias.index)];
    const TensorMeta& m = graph_.meta(v);
    Tensor t;
    switch (s->kind) {
      case Slot::kParam: t = *params[static_cast<size_t>(s->index)]; break;
      case Slot::kConstant: t = constants_[static_cast<size_t>(s->index)]; break;
      case Slot::kOutput: t = outputs[static_cast<size_t>(s->index)]; break;
      case Slot::kArena:
        if (!arena_) return make_tensor(device_, m.dtype, m.shape);  // empty: every planned buffer is 0 bytes
        t.buffer = arena_;
        t.offset = s->offset;
        break;
      default: fail(Code::kInternal, "[graph {}] value %{}.{} has no memory", graph_.name(), v.node, v.index);
    }
    t.dtype = m.dtype;
    t.shape = m.shape;
    return t;
  };
  auto pointers = [](const std::vector<Tensor>& ts) {
    std::vector<const Tensor*> p;
    for (const Tensor& t : ts) p.push_back(&t);
    return p;
  };
  spora_devptr_t in[kMaxOpInputs], out[kMaxOpOutputs];
  for (const auto& step : steps_) {
    switch (step->kind) {
      case Step::kKernel:
        for (size_t i = 0; i < step->inputs.size(); ++i) in[i] = addr(step->inputs[i]);
        for (size_t i = 0; i < step->outputs.size(); ++i) out[i] = addr(step->outputs[i]);
        try {
          device_->launch(*step->kernel, in, out);
        } catch (const Error& e) {
          node_error(graph_.node(step->node), e.code(), e.what());
        }
        break;
      case Step::kHostKernel: {
        const auto host_addr = [&](uint64_t offset) {
          return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(host_arena_->ptr()) + offset);
        };
        try {
          if (host_steps_async_) {
            // In stream order: the copies in, the cpu kernel from a
            // callback, the copies out -- from pinned memory, so they read
            // what the callback wrote.
            for (const HostCopy& c : step->copy_in)
              if (c.bytes) device_->copy_d2h_async(host_addr(c.host_offset), addr(c.value), c.bytes);
            device_->host_callback(&HostLaunch::run, step.get());
            for (const HostCopy& c : step->copy_out)
              if (c.bytes) device_->copy_h2d_async(addr(c.value), host_addr(c.host_offset), c.bytes);
          } else {
            // No pinned memory: synchronous copies order the step (each
            // waits for the work queued before it).
            for (const HostCopy& c : step->copy_in)
              if (c.bytes) device_->copy_d2h(host_addr(c.host_offset), addr(c.value), c.bytes);
            step->host->launch(*step->kernel, step->host_in, step->host_out);
            for (const HostCopy& c : step->copy_out)
              if (c.bytes) device_->copy_h2d(addr(c.value), host_addr(c.host_offset), c.bytes);
          }
        } catch (const Error& e) {
          node_error(graph_.node(step->node), e.code(), e.what());
        }
        break;
      }
      case Step::kCollective: {
        // The collective reads what earlier launches wrote and blocks until
        // every rank joins, so it runs on the host once the stream has
        // drained, and its errors (a timeout naming the collective) belong to
        // this run.
        const ir::Node& n = graph_.node(step->node);
        try {
          std::shared_ptr<Communicator> comm = Communicator::find(step->group, n.op->name);
          if (device_->has_async())
            device_->wait_idle();  // leaves the stream's pending error to the user's synchronize
          else
            device_->synchronize();
          const TensorMeta& m = graph_.meta(step->inputs[0]);
          comm->all_reduce_host(reinterpret_cast<const void*>(addr(step->inputs[0])),
                                reinterpret_cast<void*>(addr(step->outputs[0])), static_cast<size_t>(m.shape.numel()),
                                m.dtype, step->reduce_op);
        } catch (const Error& e) {
          node_error(n, e.code(), e.what());
        }
        break;
      }
      case Step::kIf: {
        const bool taken = read_flag(tensor_of(step->inputs[0]));
        std::vector<Tensor> args, outs;
        for (size_t i = 1; i < step->inputs.size(); ++i) args.push_back(tensor_of(step->inputs[i]));
        for (const ir::Value& v : step->outputs) outs.push_back(tensor_of(v));
        step->sub[taken ? 0 : 1]->run_into(pointers(args), outs);
        break;
      }
      case Step::kWhile: {
        const int64_t limit = max_while_iterations();
        // Carried values live in the inputs (read only), then alternately in
        // the node's outputs and the scratch set.
        std::vector<Tensor> initial;
        for (const ir::Value& v : step->inputs) initial.push_back(tensor_of(v));
        std::vector<Tensor> final_out;
        for (const ir::Value& v : step->outputs) final_out.push_back(tensor_of(v));
        const std::vector<Tensor>* cur = &initial;
        const std::vector<Tensor>* next = &final_out;
        const std::vector<Tensor> flag = {step->flag};
        for (int64_t iter = 0;; ++iter) {
          step->sub[0]->run_into(pointers(*cur), flag);
          if (!read_flag(step->flag)) break;
          if (iter >= limit) while_runaway(graph_.node(step->node), limit);
          step->sub[1]->run_into(pointers(*cur), *next);
          cur = next;
          next = cur == &final_out ? &step->scratch : &final_out;
        }
        if (cur != &final_out)
          for (size_t i = 0; i < final_out.size(); ++i)
            copy_in_stream(device_, final_out[i].data(), (*cur)[i].data(), final_out[i].nbytes());
        break;
      }
    }
  }
  // Outputs that are graph inputs, constants, or views of something other
  // than a fresh output buffer: copy their bytes into the output tensors.
  for (size_t i = 0; i < graph_.outputs().size(); ++i) {
    const ir::Value v = graph_.outputs()[i];
    const spora_devptr_t src = addr(v);
    if (src != outputs[i].data()) copy_in_stream(device_, outputs[i].data(), src, outputs[i].nbytes());
  }
}

}  // namespace spora::sched
