#include "sched/executor.h"

#include <map>

#include "ir/verifier.h"
#include "runtime/eager.h"
#include "sched/memory_plan.h"
#include "support/error.h"

namespace spora::sched {

// Where a value's bytes are at run time.
struct Executable::Slot {
  enum Kind { kParam, kConstant, kArena, kOutput, kAlias } kind = kArena;
  int32_t index = 0;    // param position, constant index, output position
  uint64_t offset = 0;  // arena offset (kArena)
  ir::Value alias;      // kAlias: the value whose memory this is (a view)
};

struct Step {
  int32_t node = 0;
  KernelRef kernel;
  std::vector<ir::Value> inputs;
  std::vector<ir::Value> outputs;
};

namespace {

[[noreturn]] void node_error(const ir::Node& n, Code code, const std::string& msg) {
  throw Error(code, ir::with_loc(msg, n.loc));
}

}  // namespace

Executable::~Executable() = default;

Executable::Executable(const ir::Graph& graph, Device* device) : graph_(graph), device_(device) {
  ir::verify(graph_);
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
      case ir::NodeKind::kWhile:
        node_error(n, Code::kUnimplemented,
                   fmt::format("[{}] control flow sub-graphs are verified and serialised but not yet executable",
                               ir::node_kind_name(n.kind)));
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
        if (call.view) {
          slots_[id][0] = {Slot::kAlias, 0, 0, n.inputs[0]};
        } else {
          try {
            step->kernel = device_->kernel(*n.op, call);
          } catch (const Error& e) {
            node_error(n, e.code(), e.what());
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
  for (size_t id = 0; id < nodes.size(); ++id) {
    if (nodes[id].kind != ir::NodeKind::kApply) continue;
    for (size_t o = 0; o < slots_[id].size(); ++o) {
      if (slots_[id][o].kind != Slot::kArena) continue;
      const TensorMeta& m = nodes[id].outputs[o];
      requests.push_back({static_cast<uint64_t>(m.shape.numel()) * dtype_size(m.dtype), static_cast<int32_t>(id),
                          last_use[id][o]});
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
}

std::vector<Tensor> Executable::run(const std::vector<const Tensor*>& params) {
  if (params.size() != param_nodes_.size())
    fail(Code::kInvalidArgument, "[graph {}] takes {} inputs and weights, got {}", graph_.name(), param_nodes_.size(),
         params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const ir::Node& n = graph_.node(param_nodes_[i]);
    const TensorMeta& m = n.outputs[0];
    if (!params[i]) fail(Code::kInvalidArgument, "[graph {}] {} '{}' is null", graph_.name(), node_kind_name(n.kind), n.name);
    const Tensor& t = *params[i];
    if (t.device() != device_)
      fail(Code::kInvalidArgument, "[graph {}] {} '{}' is on {}, the graph runs on {}", graph_.name(),
           node_kind_name(n.kind), n.name, t.device()->name(), device_->name());
    if (t.dtype != m.dtype || t.shape != m.shape)
      fail(Code::kInvalidArgument, "[graph {}] {} '{}' must be {} {}, got {} {}", graph_.name(), node_kind_name(n.kind),
           n.name, dtype_name(m.dtype), m.shape.str(), dtype_name(t.dtype), t.shape.str());
  }
  std::vector<Tensor> outputs;
  for (const ir::Value& v : graph_.outputs()) {
    const TensorMeta& m = graph_.meta(v);
    outputs.push_back(make_tensor(device_, m.dtype, m.shape));
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
  spora_devptr_t in[kMaxOpInputs], out[kMaxOpOutputs];
  for (const auto& step : steps_) {
    for (size_t i = 0; i < step->inputs.size(); ++i) in[i] = addr(step->inputs[i]);
    for (size_t i = 0; i < step->outputs.size(); ++i) out[i] = addr(step->outputs[i]);
    try {
      device_->launch(*step->kernel, in, out);
    } catch (const Error& e) {
      node_error(graph_.node(step->node), e.code(), e.what());
    }
  }
  // Outputs that are graph inputs, constants, or views of something other
  // than a fresh output buffer: copy their bytes into the output tensors.
  for (size_t i = 0; i < graph_.outputs().size(); ++i) {
    const ir::Value v = graph_.outputs()[i];
    const spora_devptr_t src = addr(v);
    if (src != outputs[i].data() && outputs[i].nbytes()) device_->copy_d2d(outputs[i].data(), src, outputs[i].nbytes());
  }
  return outputs;
}

std::vector<Tensor> run_eager(const ir::Graph& graph, Device* device, const std::vector<const Tensor*>& params) {
  const auto& nodes = graph.nodes();
  std::vector<std::vector<Tensor>> values(nodes.size());
  std::vector<int64_t> last_use(nodes.size(), -1);
  for (size_t id = 0; id < nodes.size(); ++id)
    for (const ir::Value& v : nodes[id].inputs) last_use[static_cast<size_t>(v.node)] = static_cast<int64_t>(id);
  for (const ir::Value& v : graph.outputs()) last_use[static_cast<size_t>(v.node)] = static_cast<int64_t>(nodes.size());
  size_t next_param = 0;
  for (size_t id = 0; id < nodes.size(); ++id) {
    const ir::Node& n = nodes[id];
    switch (n.kind) {
      case ir::NodeKind::kInput:
      case ir::NodeKind::kWeight: {
        if (next_param >= params.size() || !params[next_param])
          fail(Code::kInvalidArgument, "[graph {}] {} '{}' is not bound", graph.name(), node_kind_name(n.kind), n.name);
        const Tensor& t = *params[next_param++];
        if (t.dtype != n.outputs[0].dtype || t.shape != n.outputs[0].shape)
          fail(Code::kInvalidArgument, "[graph {}] {} '{}' must be {} {}, got {} {}", graph.name(),
               node_kind_name(n.kind), n.name, dtype_name(n.outputs[0].dtype), n.outputs[0].shape.str(),
               dtype_name(t.dtype), t.shape.str());
        values[id] = {t};
        break;
      }
      case ir::NodeKind::kConstant:
        values[id] = {tensor_from_host(device, n.outputs[0].dtype, n.outputs[0].shape, n.data->data(), n.data->size())};
        break;
      case ir::NodeKind::kApply: {
        std::vector<const Tensor*> in;
        for (const ir::Value& v : n.inputs)
          in.push_back(&values[static_cast<size_t>(v.node)][static_cast<size_t>(v.index)]);
        values[id].resize(n.outputs.size());
        try {
          eager_call(*n.op, device, in.data(), static_cast<int>(in.size()), n.attrs, values[id].data(),
                     static_cast<int>(n.outputs.size()));
        } catch (const Error& e) {
          node_error(n, e.code(), e.what());
        }
        break;
      }
      default:
        node_error(n, Code::kUnimplemented,
                   fmt::format("[{}] control flow sub-graphs are not yet executable", ir::node_kind_name(n.kind)));
    }
    // Like any eager runtime, release a value after its last reader.
    for (const ir::Value& v : n.inputs)
      if (last_use[static_cast<size_t>(v.node)] == static_cast<int64_t>(id)) values[static_cast<size_t>(v.node)].clear();
  }
  if (next_param != params.size())
    fail(Code::kInvalidArgument, "[graph {}] takes {} inputs and weights, got {}", graph.name(), next_param,
         params.size());
  std::vector<Tensor> out;
  for (const ir::Value& v : graph.outputs()) out.push_back(values[static_cast<size_t>(v.node)][static_cast<size_t>(v.index)]);
  return out;
}

}  // namespace spora::sched
