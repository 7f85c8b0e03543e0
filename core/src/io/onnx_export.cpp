// ONNX export: the ModelProto around the nodes the op exporters write.
// Field numbers follow the public ONNX IR specification (onnx.proto), as
// the reader's (onnx_proto.cpp).
#include "io/onnx_export.h"

#include <cstring>

#include "io/atomic_file.h"
#include "io/onnx_proto.h"
#include "ir/verifier.h"
#include "support/error.h"

namespace spora::io::onnx {
namespace {

// IR version 8 is the one that goes with opset 17 (ONNX 1.12).
constexpr int64_t kIrVersion = 8;

pb::Writer tensor_proto(const std::string& name, const HostTensor& t) {
  pb::Writer w;
  std::vector<int64_t> dims(t.shape.dims, t.shape.dims + t.shape.rank);
  if (!dims.empty()) w.packed_ints(1, dims);
  w.int64(2, onnx_data_type(t.dtype));
  w.string(8, name);
  w.bytes(9, t.bytes.data(), t.bytes.size());
  return w;
}

// ValueInfoProto of a tensor; dimension 0 as `batch` when it is non-empty.
pb::Writer value_info(const std::string& name, const TensorMeta& m, const std::string& batch) {
  pb::Writer shape;
  for (int i = 0; i < m.shape.rank; ++i) {
    pb::Writer dim;
    if (i == 0 && !batch.empty()) dim.string(2, batch);
    else dim.int64(1, m.shape[i]);
    shape.message(1, dim);
  }
  pb::Writer tensor;
  tensor.int64(1, onnx_data_type(m.dtype));
  tensor.message(2, shape);
  pb::Writer type;
  type.message(1, tensor);
  pb::Writer v;
  v.string(1, name);
  v.message(2, type);
  return v;
}

pb::Writer attribute(const OAttr& a) {
  pb::Writer w;
  w.string(1, a.name);
  switch (a.type) {
    case kAttrFloat: w.f32(2, a.f); break;
    case kAttrInt: w.int64(3, a.i); break;
    case kAttrString: w.string(4, a.s); break;
    case kAttrFloats:
      for (float f : a.floats) w.f32(7, f);
      break;
    case kAttrInts: w.packed_ints(8, a.ints); break;
    default: fail(Code::kInternal, "[onnx export] attribute '{}' has no encodable type", a.name);
  }
  w.int64(20, a.type);
  return w;
}

// Names ONNX accepts and tools print: the binding name when it is free,
// else with a numeric suffix.
std::string unique(std::set<std::string>& taken, const std::string& want) {
  std::string base = want.empty() ? "value" : want;
  std::string n = base;
  for (int k = 1; !taken.insert(n).second; ++k) n = base + "_" + std::to_string(k);
  return n;
}

}  // namespace

int32_t onnx_data_type(DType d) {
  switch (d) {
    case SPORA_DTYPE_F32: return kFloat;
    case SPORA_DTYPE_F64: return kDouble;
    case SPORA_DTYPE_F16: return kFloat16;
    case SPORA_DTYPE_BF16: return kBfloat16;
    case SPORA_DTYPE_I32: return kInt32;
    case SPORA_DTYPE_I64: return kInt64;
    case SPORA_DTYPE_U8: return kUint8;
    case SPORA_DTYPE_BOOL: return kBool;
    default: fail(Code::kInvalidArgument, "[onnx export] dtype {} has no ONNX element type", dtype_name(d));
  }
}

OAttr OAttr::of_int(std::string n, int64_t v) {
  OAttr a;
  a.name = std::move(n);
  a.type = kAttrInt;
  a.i = v;
  return a;
}
OAttr OAttr::of_float(std::string n, float v) {
  OAttr a;
  a.name = std::move(n);
  a.type = kAttrFloat;
  a.f = v;
  return a;
}
OAttr OAttr::of_string(std::string n, std::string v) {
  OAttr a;
  a.name = std::move(n);
  a.type = kAttrString;
  a.s = std::move(v);
  return a;
}
OAttr OAttr::of_ints(std::string n, std::vector<int64_t> v) {
  OAttr a;
  a.name = std::move(n);
  a.type = kAttrInts;
  a.ints = std::move(v);
  return a;
}

void Emitter::error(const std::string& msg) const {
  const std::string op = node_ && node_->op ? node_->op->name : "graph";
  const std::string loc = node_ && !node_->loc.empty() ? " (" + node_->loc.str() + ")" : "";
  fail(Code::kInvalidArgument, "[onnx export] '{}': op '{}'{}: {}", what_, op, loc, msg);
}

const std::string& Emitter::in(size_t i) const {
  const ir::Value v = node_->inputs.at(i);
  auto it = names_.find({v.node, v.index});
  if (it == names_.end()) error("input " + std::to_string(i) + " has no ONNX value (an unexported output)");
  return it->second;
}

const TensorMeta& Emitter::in_meta(size_t i) const { return g_.meta(node_->inputs.at(i)); }

std::string Emitter::out(size_t i) const {
  auto it = names_.find({cur_, static_cast<int32_t>(i)});
  if (it == names_.end()) error("output " + std::to_string(i) + " has no name");
  return it->second;
}

void Emitter::only_outputs(size_t n) const {
  for (size_t i = n; i < node_->outputs.size(); ++i)
    if (used(i)) error("output " + std::to_string(i) + " is used, and it has no ONNX counterpart");
}

std::string Emitter::fresh(const std::string& hint) { return unique(taken_, hint + "_" + std::to_string(counter_++)); }

void Emitter::emit(const std::string& op_type, const std::vector<std::string>& inputs,
                   const std::vector<std::string>& outputs, const std::vector<OAttr>& attrs) {
  pb::Writer n;
  for (const std::string& s : inputs) n.string(1, s);
  for (const std::string& s : outputs) n.string(2, s);
  n.string(3, fresh(op_type));
  n.string(4, op_type);
  for (const OAttr& a : attrs) n.message(5, attribute(a));
  nodes_.push_back(std::move(n));
}

std::string Emitter::op(const std::string& op_type, const std::vector<std::string>& inputs,
                        const std::vector<OAttr>& attrs) {
  const std::string o = fresh("t");
  emit(op_type, inputs, {o}, attrs);
  return o;
}

std::string Emitter::initializer(const HostTensor& t, const std::string& hint) {
  const std::string name = fresh(hint);
  inits_.push_back(tensor_proto(name, t));
  return name;
}

std::string Emitter::ints(const std::vector<int64_t>& v) {
  HostTensor t;
  t.dtype = SPORA_DTYPE_I64;
  t.shape.push_back(static_cast<int64_t>(v.size()));
  t.bytes.resize(8 * v.size());
  if (!v.empty()) std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return initializer(t, "ints");
}

std::string Emitter::scalar(DType dtype, double v) {
  HostTensor t;
  t.dtype = dtype;
  switch (dtype) {
    case SPORA_DTYPE_F32: {
      const float f = static_cast<float>(v);
      t.bytes.resize(4);
      std::memcpy(t.bytes.data(), &f, 4);
      break;
    }
    case SPORA_DTYPE_F64:
      t.bytes.resize(8);
      std::memcpy(t.bytes.data(), &v, 8);
      break;
    case SPORA_DTYPE_I32: {
      const int32_t x = static_cast<int32_t>(v);
      t.bytes.resize(4);
      std::memcpy(t.bytes.data(), &x, 4);
      break;
    }
    case SPORA_DTYPE_I64: {
      const int64_t x = static_cast<int64_t>(v);
      t.bytes.resize(8);
      std::memcpy(t.bytes.data(), &x, 8);
      break;
    }
    case SPORA_DTYPE_U8:
    case SPORA_DTYPE_BOOL:
      t.bytes.assign(1, static_cast<uint8_t>(v));
      break;
    case SPORA_DTYPE_F16:
    case SPORA_DTYPE_BF16:
      return op("Cast", {scalar(SPORA_DTYPE_F32, v)}, {OAttr::of_int("to", onnx_data_type(dtype))});
    default: error(std::string("a scalar of dtype ") + dtype_name(dtype) + " cannot be written");
  }
  return initializer(t, "scalar");
}

int64_t Emitter::int_attr(const char* name) const {
  const AttrValue* a = node_->attrs.find(name);
  if (!a || (a->type != AttrType::kInt && a->type != AttrType::kBool)) error(std::string("attribute ") + name + " is missing");
  return a->i;
}
bool Emitter::bool_attr(const char* name) const { return int_attr(name) != 0; }
const std::vector<int64_t>& Emitter::ints_attr(const char* name) const {
  const AttrValue* a = node_->attrs.find(name);
  if (!a || a->type != AttrType::kInts) error(std::string("attribute ") + name + " is missing");
  return a->ints;
}
double Emitter::float_attr(const char* name) const {
  const AttrValue* a = node_->attrs.find(name);
  if (!a || a->type != AttrType::kFloat) error(std::string("attribute ") + name + " is missing");
  return a->f;
}
const std::string& Emitter::string_attr(const char* name) const {
  const AttrValue* a = node_->attrs.find(name);
  if (!a || a->type != AttrType::kString) error(std::string("attribute ") + name + " is missing");
  return a->s;
}

std::string export_bytes(const ir::Graph& graph, const std::vector<HostTensor>& weights, const ExportOptions& opt,
                         const std::string& what) {
  ir::verify(graph);
  if (graph.outputs().empty()) fail(Code::kInvalidArgument, "[onnx export] '{}': the graph has no outputs", what);
  const std::vector<int32_t> wnodes = graph.weights();
  if (weights.size() != wnodes.size())
    fail(Code::kInvalidArgument, "[onnx export] '{}': graph '{}' has {} weights, {} given", what, graph.name(),
         wnodes.size(), weights.size());
  Emitter e(graph, what);
  for (const ir::Node& n : graph.nodes())
    for (const ir::Value& v : n.inputs) e.used_.insert({v.node, v.index});
  for (const ir::Value& v : graph.outputs()) e.used_.insert({v.node, v.index});

  // The traced batch: dimension 0 of the first input.
  int64_t batch = -1;
  const std::vector<int32_t> inputs = graph.inputs();
  if (opt.dynamic_batch) {
    for (int32_t id : inputs) {
      const TensorMeta& m = graph.node(id).outputs.at(0);
      if (m.shape.rank == 0)
        fail(Code::kInvalidArgument, "[onnx export] '{}': input '{}' is a scalar: it has no batch dimension", what,
             graph.node(id).name);
      if (batch < 0) batch = m.shape[0];
      else if (m.shape[0] != batch)
        fail(Code::kInvalidArgument,
             "[onnx export] '{}': inputs disagree on the batch size ({} and {} for '{}'): a dynamic batch needs "
             "every input to have it as dimension 0",
             what, batch, m.shape[0], graph.node(id).name);
    }
  }
  std::vector<pb::Writer> graph_inputs, graph_outputs;
  size_t wi = 0;
  for (size_t id = 0; id < graph.nodes().size(); ++id) {
    const ir::Node& n = graph.nodes()[id];
    e.node_ = &n;
    e.cur_ = static_cast<int32_t>(id);
    const int32_t nid = static_cast<int32_t>(id);
    switch (n.kind) {
      case ir::NodeKind::kInput: {
        const std::string name = unique(e.taken_, n.name);
        e.names_[{nid, 0}] = name;
        graph_inputs.push_back(value_info(name, n.outputs.at(0), opt.dynamic_batch ? "batch" : ""));
        break;
      }
      case ir::NodeKind::kWeight: {
        const HostTensor& t = weights[wi++];
        const TensorMeta& m = n.outputs.at(0);
        if (t.dtype != m.dtype || t.shape != m.shape)
          fail(Code::kInvalidArgument, "[onnx export] '{}': weight '{}' must be {} {}, got {} {}", what, n.name,
               dtype_name(m.dtype), m.shape.str(), dtype_name(t.dtype), t.shape.str());
        const std::string name = unique(e.taken_, n.name);
        e.names_[{nid, 0}] = name;
        e.inits_.push_back(tensor_proto(name, t));
        break;
      }
      case ir::NodeKind::kConstant: {
        HostTensor t;
        t.dtype = n.outputs.at(0).dtype;
        t.shape = n.outputs.at(0).shape;
        if (n.data) t.bytes = *n.data;
        e.names_[{nid, 0}] = e.initializer(t, "const");
        break;
      }
      case ir::NodeKind::kApply: {
        auto it = exporters().find(n.op->name);
        if (it == exporters().end())
          e.error("has no ONNX mapping in the exporter (docs/onnx.md lists the ops that export)");
        for (size_t i = 0; i < n.outputs.size(); ++i) e.names_[{nid, static_cast<int32_t>(i)}] = e.fresh(n.op->name);
        try {
          it->second(e);
        } catch (const Error& err) {
          const std::string msg = err.what();
          if (msg.rfind("[onnx export]", 0) == 0) throw;
          e.error(msg);
        }
        break;
      }
      default: e.error(std::string("control flow (") + ir::node_kind_name(n.kind) + ") does not export to ONNX");
    }
  }
  e.node_ = nullptr;
  // Each graph output gets a node of its own (Identity), so that an input
  // or a value returned twice still has one distinct output name.
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    const ir::Value v = graph.outputs()[i];
    const std::string name = unique(e.taken_, "output" + std::to_string(i));
    e.emit("Identity", {e.names_.at({v.node, v.index})}, {name});
    const TensorMeta& m = graph.meta(v);
    const bool batched = opt.dynamic_batch && m.shape.rank > 0 && m.shape[0] == batch;
    graph_outputs.push_back(value_info(name, m, batched ? "batch" : ""));
  }

  pb::Writer g;
  for (const pb::Writer& n : e.nodes_) g.message(1, n);
  g.string(2, graph.name().empty() ? "spora" : graph.name());
  for (const pb::Writer& t : e.inits_) g.message(5, t);
  for (const pb::Writer& v : graph_inputs) g.message(11, v);
  for (const pb::Writer& v : graph_outputs) g.message(12, v);

  pb::Writer opset;
  opset.string(1, "");
  opset.int64(2, kExportOpset);
  pb::Writer m;
  m.int64(1, kIrVersion);
  m.string(2, "spora");
  m.message(7, g);
  m.message(8, opset);
  return m.data();
}

void export_file(const std::string& path, const ir::Graph& graph, const std::vector<const Tensor*>& weights,
                 const ExportOptions& opt) {
  const std::vector<int32_t> wnodes = graph.weights();
  if (weights.size() != wnodes.size())
    fail(Code::kInvalidArgument, "[onnx export] '{}': graph '{}' has {} weights, {} given", path, graph.name(),
         wnodes.size(), weights.size());
  std::vector<HostTensor> host;
  for (size_t i = 0; i < weights.size(); ++i) {
    const Tensor* t = weights[i];
    const std::string& name = graph.node(wnodes[i]).name;
    if (!t || !t->buffer) fail(Code::kInvalidArgument, "[onnx export] '{}': weight '{}' is null", path, name);
    HostTensor h;
    h.dtype = t->dtype;
    h.shape = t->shape;
    h.bytes.resize(t->nbytes());
    if (!h.bytes.empty()) tensor_read(*t, h.bytes.data(), h.bytes.size());
    host.push_back(std::move(h));
  }
  const std::string bytes = export_bytes(graph, host, opt, path);
  // Protobuf messages stop at 2 GiB; bigger models would need external
  // data files, which the exporter does not write.
  if (bytes.size() > (size_t{2} << 30) - 1)
    fail(Code::kInvalidArgument, "[onnx export] '{}': the model is {} bytes, past protobuf's 2 GiB limit", path,
         bytes.size());
  AtomicFile f(path);
  f.write_at(0, bytes.data(), bytes.size());
  f.commit();
}

}  // namespace spora::io::onnx
