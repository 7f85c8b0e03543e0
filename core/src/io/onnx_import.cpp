// The ONNX graph -> Spora IR mapping: inputs, initializers, nodes in file
// order (ONNX requires topological order), outputs.
#include "io/onnx_import.h"

#include <cctype>
#include <cstring>
#include <fstream>
#include <set>
#include <sys/stat.h>

#include "ir/verifier.h"
#include "support/error.h"

namespace spora::io::onnx {
namespace {

std::string node_label(const Node& n) { return n.name.empty() ? "#" + std::to_string(n.offset) : n.name; }

std::string dir_of(const std::string& path) {
  const size_t s = path.rfind('/');
  return s == std::string::npos ? "." : s == 0 ? "/" : path.substr(0, s);
}

std::string base_of(const std::string& path) {
  const size_t s = path.rfind('/');
  return s == std::string::npos ? path : path.substr(s + 1);
}

}  // namespace

const std::map<std::string, Converter>& converters() {
  static const std::map<std::string, Converter> m = [] {
    std::map<std::string, Converter> r;
    add_math_converters(r);
    add_nn_converters(r);
    add_shape_converters(r);
    return r;
  }();
  return m;
}

void Ctx::error(const std::string& msg) const {
  if (!node_) fail(Code::kInvalidArgument, "[onnx] '{}': {}", what_, pb::printable(msg));
  fail(Code::kInvalidArgument, "[onnx] '{}': node '{}' ({}, opset {}): {}", what_, node_label(*node_), node_->op_type,
       opset_, pb::printable(msg));
}

bool Ctx::has_in(size_t i) const { return i < node_->inputs.size() && !node_->inputs[i].empty(); }

ir::Value Ctx::materialise(const std::string& name) {
  auto it = values_.find(name);
  if (it == values_.end()) {
    auto u = unsupported_.find(name);
    if (u != unsupported_.end()) error("input '" + name + "' is " + u->second + ", which the importer does not produce");
    error("input '" + name + "' is not produced by any earlier node, input or initializer");
  }
  Entry& e = it->second;
  if (e.value.valid()) return e.value;
  const HostTensor& h = *host_.at(static_cast<size_t>(e.host));
  // Import-time data that the other size's run computed differently (a
  // Range over the sequence length, a ConstantOfShape of the batch) would
  // be a constant of the traced size: refused rather than wrong later.
  if (probe_ && !e.weight) {
    auto ps = probe_->shapes.find(name);
    auto pd = probe_->data.find(name);
    if ((ps != probe_->shapes.end() && ps->second != h.shape) || (pd != probe_->data.end() && pd->second.bytes != h.bytes))
      error("value '" + name +
            "' is computed at import time from a dynamic input dimension and would become a constant of the "
            "traced size; give the model's inputs fixed sizes (onnxruntime.tools.make_dynamic_shape_fixed) to "
            "import it");
  }
  if (e.weight) {
    e.value = imp_.graph.add_weight(name, h.dtype, h.shape);
    imp_.weights.push_back(h);
  } else {
    e.value = imp_.graph.add_constant(h.dtype, h.shape, h.bytes, loc_);
  }
  return e.value;
}

ir::Value Ctx::in(size_t i) {
  if (!has_in(i)) error("input " + std::to_string(i) + " is missing");
  return materialise(node_->inputs[i]);
}

const HostTensor* Ctx::host(size_t i) {
  if (!has_in(i)) return nullptr;
  auto it = values_.find(node_->inputs[i]);
  if (it == values_.end() || it->second.host < 0) return nullptr;
  return host_[static_cast<size_t>(it->second.host)].get();
}

void Ctx::max_outputs(size_t n) {
  // Optional outputs (Dropout's mask, BatchNormalization's statistics) are
  // often named but never read: only a use of one is an error.
  for (size_t i = n; i < node_->outputs.size(); ++i)
    if (!node_->outputs[i].empty())
      unsupported_[node_->outputs[i]] = "output " + std::to_string(i) + " of node '" + node_label(*node_) + "' (" +
                                        node_->op_type + ")";
}

void Ctx::out(size_t i, ir::Value v) {
  if (i >= node_->outputs.size() || node_->outputs[i].empty()) return;
  const std::string& name = node_->outputs[i];
  if (values_.count(name)) error("output '" + name + "' is already defined (ONNX values are assigned once)");
  values_[name].value = v;
  if (record_) record_->shapes[name] = meta(v).shape;
}

bool Ctx::is_weight(size_t i) const {
  if (!has_in(i)) return false;
  auto it = values_.find(node_->inputs[i]);
  return it != values_.end() && it->second.weight;
}

bool Ctx::follows_dynamic(size_t i) const {
  if (!probe_ || !has_in(i)) return false;
  const std::string& name = node_->inputs[i];
  auto v = values_.find(name);
  if (v == values_.end()) return false;
  const bool is_host = !v->second.value.valid() && v->second.host >= 0;
  if (!v->second.value.valid() && !is_host) return false;
  if (is_host && v->second.weight) return false;  // initializers are the same in both runs
  const Shape s = is_host ? host_[static_cast<size_t>(v->second.host)]->shape : imp_.graph.meta(v->second.value).shape;
  auto ps = probe_->shapes.find(name);
  if (ps != probe_->shapes.end() && ps->second != s) return true;
  if (!is_host) return false;
  auto pd = probe_->data.find(name);
  return pd != probe_->data.end() && pd->second.bytes != host_[static_cast<size_t>(v->second.host)]->bytes;
}

std::vector<DimSource> Ctx::dim_sources(size_t i) const {
  if (!has_in(i)) return {};
  auto it = dim_src_.find(node_->inputs[i]);
  return it == dim_src_.end() ? std::vector<DimSource>{} : it->second;
}

void Ctx::set_dim_sources(size_t out, std::vector<DimSource> s) {
  if (out >= node_->outputs.size() || node_->outputs[out].empty()) return;
  bool any = false;
  for (const DimSource& d : s) any |= d.known();
  if (any) dim_src_[node_->outputs[out]] = std::move(s);
}

Shape Ctx::shape_of(size_t i) {
  if (const HostTensor* h = host(i)) return h->shape;
  return meta(in(i)).shape;
}

bool Ctx::dynamic_dim(size_t i, int d) const {
  if (!probe_ || !has_in(i)) return false;
  const std::string& name = node_->inputs[i];
  auto p = probe_->shapes.find(name);
  auto v = values_.find(name);
  if (p == probe_->shapes.end() || v == values_.end()) return false;
  const Shape s = v->second.value.valid() ? imp_.graph.meta(v->second.value).shape
                                          : host_[static_cast<size_t>(v->second.host)]->shape;
  return d < s.rank && d < p->second.rank && (s.rank != p->second.rank || s[d] != p->second[d]);
}

std::vector<int64_t> Ctx::static_ints(size_t i, const char* what, std::vector<bool>* dynamic) {
  const HostTensor* h = host(i);
  if (!h)
    error(std::string(what) + " must be known at import time (an initializer, a Constant, or computed from "
                              "shapes); the importer does not compute it at run time");
  if (h->shape.rank > 1) error(std::string(what) + " must be 1-D, got " + h->shape.str());
  const int64_t n = h->shape.numel();
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    if (h->dtype == SPORA_DTYPE_I64) {
      std::memcpy(&v[static_cast<size_t>(k)], &h->bytes[static_cast<size_t>(8 * k)], 8);
    } else if (h->dtype == SPORA_DTYPE_I32) {
      int32_t x;
      std::memcpy(&x, &h->bytes[static_cast<size_t>(4 * k)], 4);
      v[static_cast<size_t>(k)] = x;
    } else {
      error(std::string(what) + " must be int64, got " + dtype_name(h->dtype));
    }
  }
  std::vector<bool> dyn(v.size(), false);
  bool any = false;
  if (probe_) {
    auto p = probe_->data.find(node_->inputs[i]);
    if (p != probe_->data.end()) {
      const HostTensor& o = p->second;
      for (size_t k = 0; k < v.size(); ++k) {
        const size_t es = dtype_size(h->dtype);
        dyn[k] = o.bytes.size() != h->bytes.size() || std::memcmp(&o.bytes[k * es], &h->bytes[k * es], es) != 0;
        any |= dyn[k];
      }
    }
  }
  if (dynamic) *dynamic = dyn;
  else if (any)
    error(std::string(what) + " follows a dynamic input dimension (batch or sequence), and Spora would bake the "
                              "traced size into the graph here; give the model's inputs fixed sizes to import it");
  return v;
}

void Ctx::set_host(size_t i, HostTensor t) {
  if (i >= node_->outputs.size() || node_->outputs[i].empty()) return;
  const std::string& name = node_->outputs[i];
  if (values_.count(name)) error("output '" + name + "' is already defined (ONNX values are assigned once)");
  if (record_) {
    record_->shapes[name] = t.shape;
    if (t.shape.numel() <= 4096) record_->data[name] = t;
  }
  host_.push_back(std::make_unique<HostTensor>(std::move(t)));
  values_[name].host = static_cast<int>(host_.size() - 1);
}

ir::Value Ctx::op(const std::string& name, const std::vector<ir::Value>& inputs, const Attrs& attrs) {
  return imp_.graph.add_op(name, inputs, attrs, loc_).at(0);
}

ir::Value Ctx::scalar(DType dtype, double v) {
  std::vector<uint8_t> b(dtype_size(dtype));
  if (dtype == SPORA_DTYPE_F32) {
    const float f = static_cast<float>(v);
    std::memcpy(b.data(), &f, 4);
  } else if (dtype == SPORA_DTYPE_F64) {
    std::memcpy(b.data(), &v, 8);
  } else {
    error(std::string("a scalar of dtype ") + dtype_name(dtype) + " is not supported here (float or double only)");
  }
  return imp_.graph.add_constant(dtype, Shape{}, std::move(b), loc_);
}

int64_t Ctx::attr_int(const char* name, int64_t dflt) const {
  const Attribute* a = node_->attr(name);
  if (!a) return dflt;
  if (a->type != kAttrInt && a->type != kAttrUndefined) error(std::string("attribute ") + name + " must be an int");
  return a->i;
}

float Ctx::attr_float(const char* name, float dflt) const {
  const Attribute* a = node_->attr(name);
  if (!a) return dflt;
  if (a->type != kAttrFloat && a->type != kAttrUndefined) error(std::string("attribute ") + name + " must be a float");
  return a->f;
}

std::string Ctx::attr_string(const char* name, const std::string& dflt) const {
  const Attribute* a = node_->attr(name);
  if (!a) return dflt;
  if (a->type != kAttrString && a->type != kAttrUndefined) error(std::string("attribute ") + name + " must be a string");
  return a->s;
}

std::vector<int64_t> Ctx::attr_ints(const char* name, std::vector<int64_t> dflt) const {
  const Attribute* a = node_->attr(name);
  if (!a) return dflt;
  if (a->type != kAttrInts && a->type != kAttrUndefined) error(std::string("attribute ") + name + " must be ints");
  return a->ints;
}

Imported convert(const Model& m, const std::string& what, const std::string& model_dir, int64_t dyn_size,
                 const Probe* probe, Probe* record) {
  if (!m.has_graph) fail(Code::kInvalidArgument, "[onnx] '{}': not an ONNX model (no graph)", what);
  auto it = m.opsets.find("");
  if (it == m.opsets.end())
    fail(Code::kInvalidArgument, "[onnx] '{}': the model imports no default-domain (ai.onnx) opset", what);
  const int64_t opset = it->second;
  if (opset < kMinOpset || opset > kMaxOpset)
    fail(Code::kInvalidArgument,
         "[onnx] '{}': opset {} is not supported (the importer takes ai.onnx opsets {} to {}; convert the model "
         "with onnx.version_converter)",
         what, opset, kMinOpset, kMaxOpset);
  const Graph& g = m.graph;
  if (g.has_sparse_initializers)
    fail(Code::kInvalidArgument, "[onnx] '{}': sparse initializers are not supported", what);
  Ctx c(what, model_dir, opset);
  c.probe_ = probe;
  c.record_ = record;
  c.imp_.graph = ir::Graph(g.name.empty() ? "onnx" : g.name);
  for (const TensorProto& t : g.initializers) {
    if (t.name.empty()) fail(Code::kInvalidArgument, "[onnx] '{}': an initializer has no name", what);
    if (c.values_.count(t.name))
      fail(Code::kInvalidArgument, "[onnx] '{}': two initializers named '{}'", what, t.name);
    c.host_.push_back(std::make_unique<HostTensor>(decode_tensor(t, what, model_dir)));
    auto& e = c.values_[t.name];
    e.host = static_cast<int>(c.host_.size() - 1);
    // Float initializers are the model's weights; integer ones (shapes,
    // indices) are constants the passes may fold.
    const DType d = c.host_.back()->dtype;
    e.weight = d == SPORA_DTYPE_F32 || d == SPORA_DTYPE_F64 || d == SPORA_DTYPE_F16 || d == SPORA_DTYPE_BF16;
  }
  for (const ValueInfo& v : g.inputs) {
    if (c.values_.count(v.name)) continue;  // an initializer listed as an input (IR < 4)
    if (v.name.empty()) fail(Code::kInvalidArgument, "[onnx] '{}': a graph input has no name", what);
    if (!v.has_type || !v.has_shape)
      fail(Code::kInvalidArgument, "[onnx] '{}': input '{}' has no tensor type and shape", what, v.name);
    const DType d = spora_dtype(v.elem_type);
    if (d == SPORA_DTYPE_INVALID)
      fail(Code::kInvalidArgument, "[onnx] '{}': input '{}' has element type {}, which Spora does not support", what,
           v.name, data_type_name(v.elem_type));
    if (v.dims.size() > static_cast<size_t>(kMaxRank))
      fail(Code::kInvalidArgument, "[onnx] '{}': input '{}' has rank {} (at most {})", what, v.name, v.dims.size(),
           kMaxRank);
    // A symbolic or unknown dimension (a batch) becomes 1: the model runs
    // other sizes through the plan cache (the probe run uses another size).
    std::vector<int64_t> dims = v.dims;
    for (int64_t& d : dims)
      if (d < 0) d = dyn_size;
    c.values_[v.name].value = c.imp_.graph.add_input(v.name, d, Shape::from(dims.data(), static_cast<int32_t>(dims.size()), "onnx"));
    if (record) record->shapes[v.name] = c.imp_.graph.meta(c.values_[v.name].value).shape;
  }
  int32_t index = 0;
  for (const Node& n : g.nodes) {
    c.node_ = &n;
    c.loc_ = ir::SourceLoc{base_of(what), ++index};
    if (!n.domain.empty() && n.domain != "ai.onnx")
      c.error("domain '" + n.domain + "' is not supported (only the default ai.onnx domain)");
    auto conv = converters().find(n.op_type);
    for (const Attribute& a : n.attributes)
      if (a.has_graph) c.error("attribute '" + a.name + "' is a subgraph; control flow is not supported");
    try {
      if (try_fold(c, n)) continue;
      if (conv == converters().end()) c.error("op type '" + n.op_type + "' is not supported by the importer");
      conv->second(c, n);
    } catch (const Error& e) {
      const std::string msg = e.what();
      if (msg.rfind("[onnx]", 0) == 0) throw;
      c.error(msg);  // an op's inference error, e.g. shapes that do not fit
    }
  }
  std::vector<ir::Value> outs;
  for (const ValueInfo& v : g.outputs) {
    c.node_ = nullptr;
    auto o = c.values_.find(v.name);
    if (o == c.values_.end())
      fail(Code::kInvalidArgument, "[onnx] '{}': graph output '{}' is not produced by any node", what, v.name);
    outs.push_back(c.materialise(v.name));
  }
  if (outs.empty()) fail(Code::kInvalidArgument, "[onnx] '{}': the graph has no outputs", what);
  c.imp_.graph.set_outputs(outs);
  ir::verify(c.imp_.graph);
  return std::move(c.imp_);
}

Imported import_bytes(const uint8_t* data, size_t size, const std::string& what, const std::string& model_dir) {
  const Model m = parse_model(data, size, what);
  bool dynamic = false;
  for (const ValueInfo& v : m.graph.inputs)
    for (int64_t d : v.dims) dynamic |= d < 0;
  if (!dynamic) return convert(m, what, model_dir, 1, nullptr, nullptr);
  // With dynamic dimensions, a first run at size 2 shows which shapes and
  // import-time numbers follow them (Probe). A model that cannot convert at
  // that size is imported as before, at size 1 without that knowledge.
  Probe probe;
  try {
    convert(m, what, model_dir, 2, nullptr, &probe);
  } catch (const Error&) {
    return convert(m, what, model_dir, 1, nullptr, nullptr);
  }
  return convert(m, what, model_dir, 1, &probe, nullptr);
}

Imported import_file(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0)
    fail(Code::kNotFound, "[onnx] '{}': cannot open ({})", path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail(Code::kInvalidArgument, "[onnx] '{}': not a regular file", path);
  // Protobuf messages are limited to 2 GiB; bigger models keep their
  // weights in external data files.
  if (static_cast<uint64_t>(st.st_size) > (uint64_t{2} << 30))
    fail(Code::kInvalidArgument, "[onnx] '{}': {} bytes is past protobuf's 2 GiB limit", path, st.st_size);
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(Code::kIo, "[onnx] '{}': cannot open ({})", path, std::strerror(errno));
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  if (!bytes.empty() && !f.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size())))
    fail(Code::kIo, "[onnx] '{}': read error", path);
  return import_bytes(bytes.data(), bytes.size(), path, dir_of(path));
}

std::unique_ptr<io::Model> load_onnx_model(const std::string& path, Device* device) {
  Imported imp = import_file(path);
  std::vector<Tensor> weights;
  for (const HostTensor& h : imp.weights)
    weights.push_back(tensor_from_host(device, h.dtype, h.shape, h.bytes.data(), h.bytes.size()));
  return std::make_unique<io::Model>(path, std::move(imp.graph), std::move(weights), device);
}

bool is_onnx_path(const std::string& path) {
  if (path.size() < 5) return false;
  std::string ext = path.substr(path.size() - 5);
  for (char& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return ext == ".onnx";
}

}  // namespace spora::io::onnx
