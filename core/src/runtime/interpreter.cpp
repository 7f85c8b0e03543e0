#include "runtime/interpreter.h"

#include <cmath>
#include <cstdlib>

#include "ir/serialize.h"
#include "runtime/eager.h"
#include "runtime/observer.h"
#include "runtime/profiler.h"
#include "support/error.h"

namespace spora {

int64_t max_while_iterations() {
  const char* s = std::getenv("SPORA_MAX_WHILE_ITERATIONS");
  if (!s || !*s) return 1000000;
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (end == s || *end != '\0' || !std::isfinite(v) || v < 0 || v > 9.0e18)
    fail(Code::kInvalidArgument, "[while] SPORA_MAX_WHILE_ITERATIONS='{}' is not a non-negative iteration count", s);
  return static_cast<int64_t>(v);
}

bool read_flag(const Tensor& t) {
  uint8_t b = 0;
  t.device()->copy_d2h(&b, t.data(), 1);
  return b != 0;
}

void while_runaway(const ir::Node& n, int64_t limit) {
  throw Error(Code::kAborted,
              ir::with_loc(fmt::format("[while] loop still running after {} iterations (the limit set by "
                                       "SPORA_MAX_WHILE_ITERATIONS); raise the limit or check the loop condition",
                                       limit),
                           n.loc));
}

namespace {

using Values = std::vector<std::vector<Tensor>>;

const Tensor& value_of(const Values& values, const ir::Value& v) {
  return values[static_cast<size_t>(v.node)][static_cast<size_t>(v.index)];
}

std::vector<Tensor> bind_param(const ir::Graph& graph, const ir::Node& n, const std::vector<const Tensor*>& params,
                               size_t& next_param) {
  if (next_param >= params.size() || !params[next_param])
    fail(Code::kInvalidArgument, "[graph {}] {} '{}' is not bound", graph.name(), node_kind_name(n.kind), n.name);
  const Tensor& t = *params[next_param++];
  if (t.dtype != n.outputs[0].dtype || t.shape != n.outputs[0].shape)
    fail(Code::kInvalidArgument, "[graph {}] {} '{}' must be {} {}, got {} {}", graph.name(), node_kind_name(n.kind),
         n.name, dtype_name(n.outputs[0].dtype), n.outputs[0].shape.str(), dtype_name(t.dtype), t.shape.str());
  return {t};
}

std::vector<Tensor> apply(const ir::Node& n, Device* device, const Values& values) {
  std::vector<const Tensor*> in;
  for (const ir::Value& v : n.inputs) in.push_back(&value_of(values, v));
  std::vector<Tensor> out(n.outputs.size());
  const profiler::OpTimer timer;
  try {
    eager_call(*n.op, device, in.data(), static_cast<int>(in.size()), n.attrs, out.data(),
               static_cast<int>(n.outputs.size()));
  } catch (const Error& e) {
    throw Error(e.code(), ir::with_loc(e.what(), n.loc));
  }
  if (timer.armed())
    profiler::record_op("op", n.op->name, timer.t0(), in.data(), static_cast<int>(in.size()), out.data(),
                        static_cast<int>(out.size()), device, n.loc.file.c_str(), n.loc.line);
  if (observing())
    notify_op(*n.op, in.data(), static_cast<int>(in.size()), n.attrs, out.data(), static_cast<int>(n.outputs.size()),
              n.loc.file.c_str(), n.loc.line);
  return out;
}

std::vector<Tensor> run_if(const ir::Node& n, Device* device, const Values& values) {
  const bool taken = read_flag(value_of(values, n.inputs[0]));
  std::vector<const Tensor*> args;
  for (size_t i = 1; i < n.inputs.size(); ++i) args.push_back(&value_of(values, n.inputs[i]));
  return interpret(*n.subgraphs[taken ? 0 : 1], device, args);
}

std::vector<Tensor> run_while(const ir::Node& n, Device* device, const Values& values) {
  const int64_t limit = max_while_iterations();
  std::vector<Tensor> cur;
  for (const ir::Value& v : n.inputs) cur.push_back(value_of(values, v));
  for (int64_t iter = 0;; ++iter) {
    std::vector<const Tensor*> args;
    for (const Tensor& t : cur) args.push_back(&t);
    if (!read_flag(interpret(*n.subgraphs[0], device, args).at(0))) break;
    if (iter >= limit) while_runaway(n, limit);
    // The previous iteration's values are released as they are replaced.
    cur = interpret(*n.subgraphs[1], device, args);
  }
  return cur;
}

// Runs nodes [first, end) of `graph` op by op. `values` holds one entry per
// node; those before `first` are already bound (their values may be read).
// `params` binds the input and weight nodes met from `first` on. With `live`,
// nodes it marks false are skipped.
std::vector<Tensor> run_nodes(const ir::Graph& graph, Device* device, Values& values, size_t first,
                              const std::vector<const Tensor*>& params, const std::vector<bool>* live = nullptr) {
  const auto& nodes = graph.nodes();
  std::vector<int64_t> last_use(nodes.size(), -1);
  for (size_t id = 0; id < nodes.size(); ++id)
    if (!live || (*live)[id])
      for (const ir::Value& v : nodes[id].inputs) last_use[static_cast<size_t>(v.node)] = static_cast<int64_t>(id);
  for (const ir::Value& v : graph.outputs()) last_use[static_cast<size_t>(v.node)] = static_cast<int64_t>(nodes.size());
  size_t next_param = 0;
  for (size_t id = first; id < nodes.size(); ++id) {
    if (live && !(*live)[id]) continue;
    const ir::Node& n = nodes[id];
    switch (n.kind) {
      case ir::NodeKind::kInput:
      case ir::NodeKind::kWeight: values[id] = bind_param(graph, n, params, next_param); break;
      case ir::NodeKind::kConstant:
        values[id] = {tensor_from_host(device, n.outputs[0].dtype, n.outputs[0].shape, n.data->data(), n.data->size())};
        if (observing()) notify_constant(n, values[id][0]);
        break;
      case ir::NodeKind::kApply: values[id] = apply(n, device, values); break;
      case ir::NodeKind::kIf: values[id] = run_if(n, device, values); break;
      case ir::NodeKind::kWhile: values[id] = run_while(n, device, values); break;
    }
    // Like any eager runtime, release a value after its last reader.
    for (const ir::Value& v : n.inputs)
      if (last_use[static_cast<size_t>(v.node)] == static_cast<int64_t>(id))
        values[static_cast<size_t>(v.node)].clear();
  }
  if (next_param != params.size())
    fail(Code::kInvalidArgument, "[graph {}] takes {} inputs and weights, got {}", graph.name(), next_param,
         params.size());
  std::vector<Tensor> out;
  for (const ir::Value& v : graph.outputs()) out.push_back(value_of(values, v));
  return out;
}

}  // namespace

std::vector<Tensor> interpret(const ir::Graph& graph, Device* device, const std::vector<const Tensor*>& params) {
  Values values(graph.nodes().size());
  return run_nodes(graph, device, values, 0, params);
}

std::vector<Tensor> run_eager(const ir::Graph& graph, Device* device, const std::vector<const Tensor*>& params) {
  ir::check_json_roundtrip(graph, "run_eager");
  return interpret(graph, device, params);
}

std::vector<Tensor> run_eager_from(const ir::Graph& graph, Device* device, std::vector<std::vector<Tensor>> bound) {
  const size_t first = bound.size();
  if (first > graph.nodes().size())
    fail(Code::kInternal, "[graph {}] {} values bound for {} nodes", graph.name(), first, graph.nodes().size());
  ir::check_json_roundtrip(graph, "run_eager_from");
  // Autodiff rules compute every input's adjoint, some of which nothing
  // reads (graph mode leaves them to dce): run only what the outputs need.
  const auto& nodes = graph.nodes();
  std::vector<bool> live(nodes.size(), false);
  for (const ir::Value& v : graph.outputs()) live[static_cast<size_t>(v.node)] = true;
  for (size_t id = nodes.size(); id-- > first;)
    if (live[id])
      for (const ir::Value& v : nodes[id].inputs) live[static_cast<size_t>(v.node)] = true;
  bound.resize(nodes.size());
  return run_nodes(graph, device, bound, first, {}, &live);
}

}  // namespace spora
