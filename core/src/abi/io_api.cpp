// C API: checkpoint and model files (core/src/io).
#include <cstring>

#include "abi/abi.h"
#include "io/checkpoint.h"
#include "io/model.h"
#include "io/onnx_export.h"
#include "io/onnx_import.h"

struct spora_checkpoint {
  spora::io::Checkpoint ckpt;
};
struct spora_model {
  std::unique_ptr<spora::io::Model> model;
  spora_graph graph;  // what spora_model_graph lends out
};

using spora::Code;
using spora::fail;
using spora::abi::from_handle;
using spora::abi::guard;
using spora::abi::need;
using spora::abi::run_and_publish;

namespace {

void write_type(const char* fn, spora::DType d, const spora::Shape& s, spora_dtype_t* dtype, int64_t* dims,
                int32_t capacity, int32_t* ndim) {
  if (dims && capacity < s.rank) fail(Code::kInvalidArgument, "[{}] capacity {} is less than ndim {}", fn, capacity, s.rank);
  if (dtype) *dtype = d;
  if (dims && s.rank) std::memcpy(dims, s.dims, sizeof(int64_t) * static_cast<size_t>(s.rank));
  if (ndim) *ndim = s.rank;
}

const spora::ir::Node& model_input(const spora_model_t* model, size_t index, const char* fn) {
  need(model, fn, "model");
  const auto& in = model->model->inputs();
  if (index >= in.size())
    fail(Code::kInvalidArgument, "[{}] index {} is past the {} inputs of the model", fn, index, in.size());
  return model->model->graph().node(in[index]);
}

}  // namespace

extern "C" {

spora_status_t spora_checkpoint_save(const char* path, const char* const* names, spora_tensor_t* const* tensors,
                                     size_t n, const char* metadata_json) {
  return guard([&] {
    need(path, "spora_checkpoint_save", "path");
    if (n) {
      need(names, "spora_checkpoint_save", "names");
      need(tensors, "spora_checkpoint_save", "tensors");
    }
    std::vector<std::string> nm;
    std::vector<const spora::Tensor*> ts;
    for (size_t i = 0; i < n; ++i) {
      if (!names[i]) fail(Code::kInvalidArgument, "[checkpoint] saving '{}': name {} is null", path, i);
      if (!tensors[i]) fail(Code::kInvalidArgument, "[checkpoint] saving '{}': tensor '{}' is null", path, names[i]);
      nm.emplace_back(names[i]);
      ts.push_back(&tensors[i]->t);
    }
    std::map<std::string, std::string> meta;
    if (metadata_json) meta = spora::io::parse_string_map(metadata_json, "checkpoint");
    spora::io::save_checkpoint(path, nm, ts, meta);
  });
}

spora_status_t spora_checkpoint_open(const char* path, spora_checkpoint_t** out) {
  return guard([&] {
    need(path, "spora_checkpoint_open", "path");
    need(out, "spora_checkpoint_open", "out");
    *out = new spora_checkpoint{spora::io::Checkpoint(path)};
  });
}

spora_status_t spora_checkpoint_close(spora_checkpoint_t* ckpt) {
  return guard([&] { delete ckpt; });
}

spora_status_t spora_checkpoint_count(const spora_checkpoint_t* ckpt, size_t* out) {
  return guard([&] {
    need(ckpt, "spora_checkpoint_count", "ckpt");
    *need(out, "spora_checkpoint_count", "out") = ckpt->ckpt.entries().size();
  });
}

spora_status_t spora_checkpoint_entry(const spora_checkpoint_t* ckpt, size_t index, const char** name,
                                      spora_dtype_t* dtype, int64_t* dims, int32_t capacity, int32_t* ndim) {
  return guard([&] {
    need(ckpt, "spora_checkpoint_entry", "ckpt");
    const auto& entries = ckpt->ckpt.entries();
    if (index >= entries.size())
      fail(Code::kInvalidArgument, "[spora_checkpoint_entry] index {} is past the {} tensors of '{}'", index,
           entries.size(), ckpt->ckpt.path());
    const spora::io::TensorInfo& t = entries[index];
    write_type("spora_checkpoint_entry", t.dtype, t.shape, dtype, dims, capacity, ndim);
    if (name) *name = t.name.c_str();
  });
}

spora_status_t spora_checkpoint_metadata(const spora_checkpoint_t* ckpt, const char** json) {
  return guard([&] {
    need(ckpt, "spora_checkpoint_metadata", "ckpt");
    *need(json, "spora_checkpoint_metadata", "json") = ckpt->ckpt.metadata_json().c_str();
  });
}

spora_status_t spora_checkpoint_read(const spora_checkpoint_t* ckpt, const char* name, spora_device_t* device,
                                     spora_tensor_t** out) {
  return guard([&] {
    need(ckpt, "spora_checkpoint_read", "ckpt");
    need(name, "spora_checkpoint_read", "name");
    spora::Device* d = from_handle(need(device, "spora_checkpoint_read", "device"));
    need(out, "spora_checkpoint_read", "out");
    *out = new spora_tensor{ckpt->ckpt.read(name, d)};
  });
}

spora_status_t spora_model_save(const char* path, const spora_graph_t* graph, spora_tensor_t* const* weights,
                                size_t num_weights) {
  return guard([&] {
    need(path, "spora_model_save", "path");
    need(graph, "spora_model_save", "graph");
    if (num_weights) need(weights, "spora_model_save", "weights");
    std::vector<const spora::Tensor*> ws;
    for (size_t i = 0; i < num_weights; ++i) ws.push_back(weights[i] ? &weights[i]->t : nullptr);
    spora::io::save_model(path, graph->g, ws);
  });
}

spora_status_t spora_model_load(const char* path, spora_device_t* device, spora_model_t** out) {
  return guard([&] {
    need(path, "spora_model_load", "path");
    spora::Device* d = from_handle(need(device, "spora_model_load", "device"));
    need(out, "spora_model_load", "out");
    std::unique_ptr<spora::io::Model> m = spora::io::onnx::is_onnx_path(path)
                                               ? spora::io::onnx::load_onnx_model(path, d)
                                               : std::make_unique<spora::io::Model>(path, d);
    spora::ir::Graph g = m->graph();
    *out = new spora_model{std::move(m), spora_graph{std::move(g), {}}};
  });
}

spora_status_t spora_model_free(spora_model_t* model) {
  return guard([&] { delete model; });
}

spora_status_t spora_model_num_inputs(const spora_model_t* model, size_t* out) {
  return guard([&] {
    need(model, "spora_model_num_inputs", "model");
    *need(out, "spora_model_num_inputs", "out") = model->model->inputs().size();
  });
}

spora_status_t spora_model_input_type(const spora_model_t* model, size_t index, spora_dtype_t* dtype, int64_t* dims,
                                      int32_t capacity, int32_t* ndim) {
  return guard([&] {
    const spora::TensorMeta& m = model_input(model, index, "spora_model_input_type").outputs.at(0);
    write_type("spora_model_input_type", m.dtype, m.shape, dtype, dims, capacity, ndim);
  });
}

spora_status_t spora_model_input_name(const spora_model_t* model, size_t index, const char** name) {
  return guard([&] {
    const spora::ir::Node& n = model_input(model, index, "spora_model_input_name");
    *need(name, "spora_model_input_name", "name") = n.name.c_str();
  });
}

spora_status_t spora_model_num_outputs(const spora_model_t* model, size_t* out) {
  return guard([&] {
    need(model, "spora_model_num_outputs", "model");
    *need(out, "spora_model_num_outputs", "out") = model->model->graph().outputs().size();
  });
}

spora_status_t spora_model_run(spora_model_t* model, spora_tensor_t* const* inputs, size_t num_inputs,
                               spora_tensor_t** outputs, size_t num_outputs) {
  return guard([&] {
    need(model, "spora_model_run", "model");
    run_and_publish("spora_model_run", "inputs", "[model]", model->model->graph().outputs().size(), inputs, num_inputs,
                    outputs, num_outputs, [&](const auto& in) { return model->model->run(in); });
  });
}

spora_status_t spora_model_graph(const spora_model_t* model, const spora_graph_t** out) {
  return guard([&] {
    need(model, "spora_model_graph", "model");
    *need(out, "spora_model_graph", "out") = &model->graph;
  });
}

spora_status_t spora_model_import_onnx(const char* path, spora_device_t* device, spora_model_t** out) {
  return guard([&] {
    need(path, "spora_model_import_onnx", "path");
    spora::Device* d = from_handle(need(device, "spora_model_import_onnx", "device"));
    need(out, "spora_model_import_onnx", "out");
    auto m = spora::io::onnx::load_onnx_model(path, d);
    spora::ir::Graph g = m->graph();
    *out = new spora_model{std::move(m), spora_graph{std::move(g), {}}};
  });
}

spora_status_t spora_model_export_onnx(const char* path, const spora_graph_t* graph, spora_tensor_t* const* weights,
                                       size_t num_weights, uint32_t flags) {
  return guard([&] {
    need(path, "spora_model_export_onnx", "path");
    need(graph, "spora_model_export_onnx", "graph");
    if (num_weights) need(weights, "spora_model_export_onnx", "weights");
    if (flags & ~SPORA_ONNX_DYNAMIC_BATCH)
      fail(Code::kInvalidArgument, "[spora_model_export_onnx] unknown flags 0x{:x}", flags & ~SPORA_ONNX_DYNAMIC_BATCH);
    std::vector<const spora::Tensor*> ws;
    for (size_t i = 0; i < num_weights; ++i) ws.push_back(weights[i] ? &weights[i]->t : nullptr);
    spora::io::onnx::ExportOptions opt;
    opt.dynamic_batch = (flags & SPORA_ONNX_DYNAMIC_BATCH) != 0;
    spora::io::onnx::export_file(path, graph->g, ws, opt);
  });
}

spora_status_t spora_graph_copy(const spora_graph_t* graph, spora_graph_t** out) {
  return guard([&] {
    need(graph, "spora_graph_copy", "graph");
    need(out, "spora_graph_copy", "out");
    *out = new spora_graph{graph->g, {}};
  });
}

}  // extern "C"
