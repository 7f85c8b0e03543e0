// ONNX export: a Spora graph and the values of its weights as an ONNX model
// (ai.onnx opset 17, IR version 8) that onnxruntime and other ONNX tools
// run. Weights and constants become initializers; each op of the graph
// becomes one ONNX node or a few (onnx_export_ops.cpp); an op with no
// mapping is an error naming it and its source line.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "io/onnx_tensor.h"
#include "io/protobuf_wire.h"
#include "ir/graph.h"
#include "runtime/tensor.h"

namespace spora::io::onnx {

constexpr int64_t kExportOpset = 17;

struct ExportOptions {
  // Dimension 0 of every input, and of every output whose dimension 0 is
  // the inputs' (the traced batch size), is written as the symbolic "batch".
  // The file then takes any batch size when the graph's reshapes infer that
  // dimension (-1); a reshape to the traced size pins it.
  bool dynamic_batch = false;
};

// The model's bytes. `weights` bind graph.weights() in order (dtype and
// shape checked); `what` names the model in errors.
std::string export_bytes(const ir::Graph& graph, const std::vector<HostTensor>& weights, const ExportOptions& opt,
                         const std::string& what);
// export_bytes written to `path` atomically; the weights are read from their
// devices.
void export_file(const std::string& path, const ir::Graph& graph, const std::vector<const Tensor*>& weights,
                 const ExportOptions& opt);

// One ONNX attribute of a node being written.
struct OAttr {
  std::string name;
  int32_t type = 0;  // AttrKind (onnx_proto.h)
  int64_t i = 0;
  float f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  static OAttr of_int(std::string n, int64_t v);
  static OAttr of_float(std::string n, float v);
  static OAttr of_string(std::string n, std::string v);
  static OAttr of_ints(std::string n, std::vector<int64_t> v);
};

// What an op's exporter sees: the Spora node being written and helpers that
// append ONNX nodes and initializers.
class Emitter {
 public:
  Emitter(const ir::Graph& g, std::string what) : g_(g), what_(std::move(what)) {}

  const ir::Node& node() const { return *node_; }
  const Attrs& attrs() const { return node_->attrs; }
  size_t num_inputs() const { return node_->inputs.size(); }
  // The ONNX name of the current node's input `i`, and its type.
  const std::string& in(size_t i) const;
  const TensorMeta& in_meta(size_t i) const;
  const TensorMeta& out_meta(size_t i) const { return node_->outputs.at(i); }
  // The name output `i` of the current node must be written under.
  std::string out(size_t i) const;
  // Whether anything reads output `i` (a graph output or a later node).
  bool used(size_t i) const { return used_.count({cur_, static_cast<int32_t>(i)}) > 0; }
  // Refuses (naming the op) when an output past the first `n` is used.
  void only_outputs(size_t n) const;

  // Appends an ONNX node with these outputs.
  void emit(const std::string& op_type, const std::vector<std::string>& inputs,
            const std::vector<std::string>& outputs, const std::vector<OAttr>& attrs = {});
  // Appends an ONNX node with one fresh output, returned.
  std::string op(const std::string& op_type, const std::vector<std::string>& inputs,
                 const std::vector<OAttr>& attrs = {});
  // A 1-D int64 initializer.
  std::string ints(const std::vector<int64_t>& v);
  // A rank-0 initializer of `dtype` holding `v` (f16/bf16: cast from f32).
  std::string scalar(DType dtype, double v);
  // An initializer of any supported dtype.
  std::string initializer(const HostTensor& t, const std::string& hint = "const");

  int64_t int_attr(const char* name) const;
  const std::vector<int64_t>& ints_attr(const char* name) const;
  double float_attr(const char* name) const;
  const std::string& string_attr(const char* name) const;
  bool bool_attr(const char* name) const;
  bool has_attr(const char* name) const { return node_->attrs.find(name) != nullptr; }

  [[noreturn]] void error(const std::string& msg) const;
  // A value name no other value has.
  std::string fresh(const std::string& hint);

 private:
  friend std::string export_bytes(const ir::Graph&, const std::vector<HostTensor>&, const ExportOptions&,
                                  const std::string&);

  const ir::Graph& g_;
  std::string what_;
  const ir::Node* node_ = nullptr;
  int32_t cur_ = -1;
  std::map<std::pair<int32_t, int32_t>, std::string> names_;
  std::set<std::pair<int32_t, int32_t>> used_;
  std::set<std::string> taken_;
  std::vector<pb::Writer> nodes_, inits_;
  int64_t counter_ = 0;
};

using Exporter = std::function<void(Emitter&)>;
// Spora op name -> exporter (onnx_export_ops.cpp).
const std::map<std::string, Exporter>& exporters();

// The ONNX element type of a Spora dtype.
int32_t onnx_data_type(DType d);

}  // namespace spora::io::onnx
