// C API: building, printing, serialising, compiling and running graphs.
#include <cstring>

#include "abi/abi.h"
#include "autodiff/grad.h"
#include "ir/printer.h"
#include "ir/serialize.h"
#include "passes/pass.h"
#include "passes/recompute.h"
#include "runtime/interpreter.h"
#include "sched/executor.h"
#include "sched/plan_cache.h"

struct spora_executable {
  std::unique_ptr<spora::sched::PlanCache> exe;  // plans by input signature
};

using spora::Code;
using spora::fail;
using spora::abi::from_handle;
using spora::abi::guard;
using spora::abi::need;
using spora::abi::run_and_publish;

namespace {

// Values travel as (node << 16) | output.
spora_value_t encode(spora::ir::Value v) { return (static_cast<int64_t>(v.node) << 16) | v.index; }

spora::ir::Value decode(const spora::ir::Graph& g, spora_value_t v, const char* fn) {
  const int64_t node = v >> 16, index = v & 0xffff;
  if (v < 0 || node >= static_cast<int64_t>(g.nodes().size()) ||
      index >= static_cast<int64_t>(g.node(static_cast<int32_t>(node)).outputs.size()))
    fail(Code::kInvalidArgument, "[{}] value {} does not belong to graph '{}'", fn, v, g.name());
  return {static_cast<int32_t>(node), static_cast<int32_t>(index)};
}

// decode, with the caller's source location in the error.
spora::ir::Value decode_at(const spora::ir::Graph& g, spora_value_t v, const char* fn,
                           const spora::ir::SourceLoc& loc) {
  try {
    return decode(g, v, fn);
  } catch (const spora::Error& e) {
    throw spora::Error(e.code(), spora::ir::with_loc(e.what(), loc));
  }
}

}  // namespace

extern "C" {

spora_status_t spora_graph_create(const char* name, spora_graph_t** out) {
  return guard([&] {
    need(out, "spora_graph_create", "out");
    *out = new spora_graph{spora::ir::Graph(name ? name : "main"), {}};
  });
}

spora_status_t spora_graph_free(spora_graph_t* graph) {
  return guard([&] { delete graph; });
}

static spora_status_t add_leaf(bool weight, spora_graph_t* graph, const char* name, spora_dtype_t dtype,
                               const int64_t* shape, int32_t ndim, spora_value_t* out) {
  const char* fn = weight ? "spora_graph_add_weight" : "spora_graph_add_input";
  return guard([&] {
    need(graph, fn, "graph");
    need(name, fn, "name");
    need(out, fn, "out");
    const int32_t v = spora::abi::dtype_arg(dtype);
    if (!spora::dtype_valid(v)) fail(Code::kInvalidArgument, "[{}] unknown dtype value {}", fn, v);
    const auto t = static_cast<spora::DType>(v);
    const spora::Shape s = spora::Shape::from(shape, ndim, fn);
    *out = encode(weight ? graph->g.add_weight(name, t, s) : graph->g.add_input(name, t, s));
  });
}

spora_status_t spora_graph_add_input(spora_graph_t* graph, const char* name, spora_dtype_t dtype, const int64_t* shape,
                                     int32_t ndim, spora_value_t* out) {
  return add_leaf(false, graph, name, dtype, shape, ndim, out);
}

spora_status_t spora_graph_add_weight(spora_graph_t* graph, const char* name, spora_dtype_t dtype, const int64_t* shape,
                                      int32_t ndim, spora_value_t* out) {
  return add_leaf(true, graph, name, dtype, shape, ndim, out);
}

spora_status_t spora_graph_add_constant(spora_graph_t* graph, const spora_tensor_t* value, spora_value_t* out) {
  return guard([&] {
    need(graph, "spora_graph_add_constant", "graph");
    need(value, "spora_graph_add_constant", "value");
    need(out, "spora_graph_add_constant", "out");
    std::vector<uint8_t> bytes(value->t.nbytes());
    spora::tensor_read(value->t, bytes.data(), bytes.size());
    *out = encode(graph->g.add_constant(value->t.dtype, value->t.shape, std::move(bytes)));
  });
}

spora_status_t spora_graph_add_op(spora_graph_t* graph, const char* op, const spora_value_t* inputs, size_t num_inputs,
                                  const spora_attrs_t* attrs, const char* file, int32_t line, spora_value_t* outputs,
                                  size_t capacity, size_t* num_outputs) {
  return guard([&] {
    need(graph, "spora_graph_add_op", "graph");
    need(op, "spora_graph_add_op", "op");
    if (num_inputs) need(inputs, op, "inputs");
    std::vector<spora::ir::Value> in;
    for (size_t i = 0; i < num_inputs; ++i) in.push_back(decode(graph->g, inputs[i], op));
    static const spora::Attrs kNone;
    const spora::ir::SourceLoc loc{file ? file : "", file ? line : 0};
    // Check capacity before adding, so a failed call leaves the graph as it was.
    const spora::OpDef* def = spora::OpRegistry::get().find(op);
    if (def && !def->dynamic_outputs && capacity < def->outputs.size())
      fail(Code::kInvalidArgument, "[{}] has {} outputs, capacity is {}", op, def->outputs.size(), capacity);
    const auto outs = graph->g.add_op(op, in, attrs ? attrs->attrs : kNone, loc);
    if (outs.size() > capacity)
      fail(Code::kInvalidArgument, "[{}] has {} outputs, capacity is {}", op, outs.size(), capacity);
    if (outs.size()) need(outputs, op, "outputs");
    for (size_t i = 0; i < outs.size(); ++i) outputs[i] = encode(outs[i]);
    if (num_outputs) *num_outputs = outs.size();
  });
}

static void write_outputs(const std::vector<spora::ir::Value>& outs, const char* fn, spora_value_t* outputs,
                          size_t* num_outputs) {
  if (outs.size()) need(outputs, fn, "outputs");
  for (size_t i = 0; i < outs.size(); ++i) outputs[i] = encode(outs[i]);
  if (num_outputs) *num_outputs = outs.size();
}

spora_status_t spora_graph_inline(spora_graph_t* graph, const spora_graph_t* sub, const spora_value_t* args,
                                  size_t num_args, spora_value_t* outputs, size_t capacity, size_t* num_outputs) {
  return guard([&] {
    need(graph, "spora_graph_inline", "graph");
    need(sub, "spora_graph_inline", "sub");
    if (num_args) need(args, "spora_graph_inline", "args");
    std::vector<spora::ir::Value> in;
    for (size_t i = 0; i < num_args; ++i) in.push_back(decode(graph->g, args[i], "spora_graph_inline"));
    // Check capacity first, so a failed call leaves the graph as it was.
    const size_t n = sub->g.outputs().size();
    if (capacity < n) fail(Code::kInvalidArgument, "[spora_graph_inline] sub has {} outputs, capacity is {}", n, capacity);
    // Inline into a copy: a type mismatch found halfway must not leave
    // half the nodes behind.
    spora::ir::Graph g = graph->g;
    const auto outs = spora::ir::inline_graph(g, sub->g, in);
    graph->g = std::move(g);
    write_outputs(outs, "spora_graph_inline", outputs, num_outputs);
  });
}

spora_status_t spora_graph_add_if(spora_graph_t* graph, spora_value_t cond, const spora_graph_t* then_graph,
                                  const spora_graph_t* else_graph, const spora_value_t* inputs, size_t num_inputs,
                                  const char* file, int32_t line, spora_value_t* outputs, size_t capacity,
                                  size_t* num_outputs) {
  return guard([&] {
    need(graph, "spora_graph_add_if", "graph");
    need(then_graph, "spora_graph_add_if", "then_graph");
    need(else_graph, "spora_graph_add_if", "else_graph");
    if (num_inputs) need(inputs, "spora_graph_add_if", "inputs");
    const spora::ir::SourceLoc loc{file ? file : "", file ? line : 0};
    const spora::ir::Value c = decode_at(graph->g, cond, "if", loc);
    std::vector<spora::ir::Value> in;
    for (size_t i = 0; i < num_inputs; ++i) in.push_back(decode_at(graph->g, inputs[i], "if", loc));
    // Check capacity first, so a failed call leaves the graph as it was.
    const size_t n = then_graph->g.outputs().size();
    if (capacity < n)
      fail(Code::kInvalidArgument, "{}",
           spora::ir::with_loc(fmt::format("[if] has {} outputs, capacity is {}", n, capacity), loc));
    write_outputs(graph->g.add_if(c, then_graph->g, else_graph->g, in, loc), "if", outputs, num_outputs);
  });
}

spora_status_t spora_graph_add_while(spora_graph_t* graph, const spora_graph_t* cond_graph,
                                     const spora_graph_t* body_graph, const spora_value_t* inputs, size_t num_inputs,
                                     const char* file, int32_t line, spora_value_t* outputs, size_t capacity,
                                     size_t* num_outputs) {
  return guard([&] {
    need(graph, "spora_graph_add_while", "graph");
    need(cond_graph, "spora_graph_add_while", "cond_graph");
    need(body_graph, "spora_graph_add_while", "body_graph");
    if (num_inputs) need(inputs, "spora_graph_add_while", "inputs");
    const spora::ir::SourceLoc loc{file ? file : "", file ? line : 0};
    std::vector<spora::ir::Value> in;
    for (size_t i = 0; i < num_inputs; ++i) in.push_back(decode_at(graph->g, inputs[i], "while", loc));
    if (capacity < num_inputs)
      fail(Code::kInvalidArgument, "{}",
           spora::ir::with_loc(fmt::format("[while] has {} outputs, capacity is {}", num_inputs, capacity), loc));
    write_outputs(graph->g.add_while(cond_graph->g, body_graph->g, in, loc), "while", outputs, num_outputs);
  });
}

spora_status_t spora_graph_set_outputs(spora_graph_t* graph, const spora_value_t* values, size_t count) {
  return guard([&] {
    need(graph, "spora_graph_set_outputs", "graph");
    if (count) need(values, "spora_graph_set_outputs", "values");
    std::vector<spora::ir::Value> outs;
    for (size_t i = 0; i < count; ++i) outs.push_back(decode(graph->g, values[i], "spora_graph_set_outputs"));
    graph->g.set_outputs(std::move(outs));
  });
}

spora_status_t spora_graph_outputs(const spora_graph_t* graph, spora_value_t* values, size_t capacity, size_t* count) {
  return guard([&] {
    need(graph, "spora_graph_outputs", "graph");
    const auto& outs = graph->g.outputs();
    if (capacity) need(values, "spora_graph_outputs", "values");
    for (size_t i = 0; i < outs.size() && i < capacity; ++i) values[i] = encode(outs[i]);
    if (count) *count = outs.size();
  });
}

spora_status_t spora_graph_value_type(const spora_graph_t* graph, spora_value_t value, spora_dtype_t* dtype,
                                      int64_t* dims, int32_t capacity, int32_t* ndim) {
  return guard([&] {
    need(graph, "spora_graph_value_type", "graph");
    const spora::TensorMeta& m = graph->g.meta(decode(graph->g, value, "spora_graph_value_type"));
    if (dtype) *dtype = m.dtype;
    if (ndim) *ndim = m.shape.rank;
    if (dims) {
      if (capacity < m.shape.rank)
        fail(Code::kInvalidArgument, "[spora_graph_value_type] capacity {} < ndim {}", capacity, m.shape.rank);
      std::memcpy(dims, m.shape.dims, sizeof(int64_t) * static_cast<size_t>(m.shape.rank));
    }
  });
}

spora_status_t spora_graph_to_text(spora_graph_t* graph, const char** out) {
  return guard([&] {
    need(graph, "spora_graph_to_text", "graph");
    graph->text = spora::ir::to_text(graph->g);
    *need(out, "spora_graph_to_text", "out") = graph->text.c_str();
  });
}

spora_status_t spora_graph_to_json(spora_graph_t* graph, const char** out) {
  return guard([&] {
    need(graph, "spora_graph_to_json", "graph");
    graph->text = spora::ir::to_json(graph->g);
    *need(out, "spora_graph_to_json", "out") = graph->text.c_str();
  });
}

spora_status_t spora_graph_from_json(const char* json, size_t size, spora_graph_t** out) {
  return guard([&] {
    need(json, "spora_graph_from_json", "json");
    need(out, "spora_graph_from_json", "out");
    *out = new spora_graph{spora::ir::from_json(std::string(json, size)), {}};
  });
}

spora_status_t spora_graph_optimize(spora_graph_t* graph, int32_t level) {
  return guard([&] {
    need(graph, "spora_graph_optimize", "graph");
    spora::ir::Graph g = graph->g;  // optimise a copy: a failing pass leaves the graph as it was
    spora::passes::optimize(g, level);
    graph->g = std::move(g);
  });
}

spora_status_t spora_graph_run_pass(spora_graph_t* graph, const char* name) {
  return guard([&] {
    need(graph, "spora_graph_run_pass", "graph");
    need(name, "spora_graph_run_pass", "name");
    spora::ir::Graph g = graph->g;  // a failing pass leaves the graph as it was
    spora::passes::run_pass(g, name);
    graph->g = std::move(g);
  });
}

spora_status_t spora_graph_num_nodes(const spora_graph_t* graph, int64_t* out) {
  return guard([&] {
    need(graph, "spora_graph_num_nodes", "graph");
    need(out, "spora_graph_num_nodes", "out");
    *out = static_cast<int64_t>(graph->g.nodes().size());
  });
}

spora_status_t spora_graph_mark_recompute(spora_graph_t* graph, int64_t first, int64_t end, int64_t mark,
                                          int64_t* marked) {
  return guard([&] {
    need(graph, "spora_graph_mark_recompute", "graph");
    const auto size = static_cast<int64_t>(graph->g.nodes().size());
    if (first < 0 || end < first || end > size)
      fail(Code::kInvalidArgument,
           "[spora_graph_mark_recompute] node range [{}, {}) is outside graph '{}' of {} nodes", first, end,
           graph->g.name(), size);
    const int32_t n =
        spora::passes::mark_recompute(graph->g, static_cast<int32_t>(first), static_cast<int32_t>(end), mark);
    if (marked) *marked = n;
  });
}

spora_status_t spora_graph_grad(const spora_graph_t* graph, const spora_value_t* wrt, size_t num_wrt, size_t output,
                                spora_graph_t** out) {
  return guard([&] {
    need(graph, "spora_graph_grad", "graph");
    need(out, "spora_graph_grad", "out");
    if (num_wrt) need(wrt, "spora_graph_grad", "wrt");
    std::vector<int32_t> nodes;
    for (size_t i = 0; i < num_wrt; ++i) {
      const spora::ir::Value v = decode(graph->g, wrt[i], "spora_graph_grad");
      nodes.push_back(v.node);
    }
    *out = new spora_graph{spora::autodiff::value_and_grad(graph->g, nodes, static_cast<int32_t>(output)), {}};
  });
}

spora_status_t spora_graph_compile(const spora_graph_t* graph, spora_device_t* device, spora_executable_t** out) {
  return guard([&] {
    need(graph, "spora_graph_compile", "graph");
    spora::Device* d = from_handle(need(device, "spora_graph_compile", "device"));
    need(out, "spora_graph_compile", "out");
    *out = new spora_executable{std::make_unique<spora::sched::PlanCache>(graph->g, d)};
  });
}

spora_status_t spora_executable_free(spora_executable_t* exe) {
  return guard([&] { delete exe; });
}

spora_status_t spora_executable_run(spora_executable_t* exe, spora_tensor_t* const* params, size_t num_params,
                                    spora_tensor_t** outputs, size_t num_outputs) {
  return guard([&] {
    need(exe, "spora_executable_run", "exe");
    const spora::ir::Graph& g = exe->exe->graph();
    run_and_publish("spora_executable_run", "params", "[graph " + g.name() + "]", g.outputs().size(), params,
                    num_params, outputs, num_outputs, [&](const auto& in) { return exe->exe->run(in); });
  });
}

spora_status_t spora_executable_run_donating(spora_executable_t* exe, spora_tensor_t* const* params,
                                             size_t num_params, const int64_t* donate, spora_tensor_t** outputs,
                                             size_t num_outputs) {
  return guard([&] {
    need(exe, "spora_executable_run_donating", "exe");
    const spora::ir::Graph& g = exe->exe->graph();
    std::vector<int32_t> d;
    if (donate)
      for (size_t i = 0; i < num_outputs; ++i) {
        if (donate[i] < -1 || donate[i] >= static_cast<int64_t>(num_params))
          fail(Code::kInvalidArgument,
               "[spora_executable_run_donating] donate[{}] = {} is neither -1 nor a position among the {} params", i,
               donate[i], num_params);
        d.push_back(static_cast<int32_t>(donate[i]));
      }
    run_and_publish("spora_executable_run_donating", "params", "[graph " + g.name() + "]", g.outputs().size(), params,
                    num_params, outputs, num_outputs, [&](const auto& in) { return exe->exe->run(in, d); });
  });
}

spora_status_t spora_graph_run_eager(const spora_graph_t* graph, spora_device_t* device, spora_tensor_t* const* params,
                                     size_t num_params, spora_tensor_t** outputs, size_t num_outputs) {
  return guard([&] {
    need(graph, "spora_graph_run_eager", "graph");
    spora::Device* d = from_handle(need(device, "spora_graph_run_eager", "device"));
    run_and_publish("spora_graph_run_eager", "params", "[graph " + graph->g.name() + "]", graph->g.outputs().size(),
                    params, num_params, outputs, num_outputs,
                    [&](const auto& in) { return spora::run_eager(graph->g, d, in); });
  });
}

spora_status_t spora_executable_collectives(const spora_executable_t* exe, int32_t* total, int32_t* overlapped) {
  return guard([&] {
    need(exe, "spora_executable_collectives", "exe");
    if (total) *total = exe->exe->collectives();
    if (overlapped) *overlapped = exe->exe->overlapped_collectives();
  });
}

spora_status_t spora_executable_memory(const spora_executable_t* exe, uint64_t* planned, uint64_t* naive) {
  return guard([&] {
    need(exe, "spora_executable_memory", "exe");
    if (planned) *planned = exe->exe->planned_bytes();
    if (naive) *naive = exe->exe->naive_bytes();
  });
}

}  // extern "C"
