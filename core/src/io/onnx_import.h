// ONNX import: an .onnx file (opsets 7-21 of the default domain; ops whose
// form changed are read as their opset defines them) as a Spora graph plus
// the values of its weights. The converter of each ONNX op
// lives in onnx_ops_*.cpp; this header is what they share.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/onnx_proto.h"
#include "io/onnx_tensor.h"
#include "io/model.h"
#include "ir/graph.h"

namespace spora::io::onnx {

constexpr int64_t kMinOpset = 7;
constexpr int64_t kMaxOpset = 21;

struct Imported {
  ir::Graph graph;
  std::vector<HostTensor> weights;  // bind graph.weights() in order
};

// Reads and converts `path`. Errors (kInvalidArgument, kNotFound, kIo) name
// the file, and the node (name, op type, opset) or tensor where there is
// one. Hostile files fail before any allocation sized by their claims.
Imported import_file(const std::string& path);
// The same over bytes already in memory; external data is refused unless
// `model_dir` is given.
Imported import_bytes(const uint8_t* data, size_t size, const std::string& what, const std::string& model_dir);

// import_file, as a runnable Model with its weights on `device`.
std::unique_ptr<io::Model> load_onnx_model(const std::string& path, Device* device);

// True when `path` names an ONNX file (ends in ".onnx", any case).
bool is_onnx_path(const std::string& path);

// What a first conversion with the dynamic input dimensions at another
// size saw: every value's shape and its data when known at import time
// (small ones). Comparing with it tells which dimensions and which
// import-time numbers follow a dynamic dimension.
struct Probe {
  std::map<std::string, Shape> shapes;
  std::map<std::string, HostTensor> data;
};

// Where an element of an import-time integer value came from: dimension
// `dim` of the value named `value`, read by Shape. Kept through Gather,
// Slice, Concat, Unsqueeze, Squeeze, Reshape, Flatten, Cast and Identity, so
// that a Range or a Slice end at a dynamic size (position ids up to the
// sequence length) can be rebuilt from that dimension in the graph.
struct DimSource {
  std::string value;
  int dim = -1;
  bool known() const { return dim >= 0; }
};

// What a converter sees.
class Ctx {
 public:
  Ctx(const std::string& what, const std::string& model_dir, int64_t opset)
      : what_(what), dir_(model_dir), opset_(opset) {}

  int64_t opset() const { return opset_; }
  const std::string& what() const { return what_; }
  const ir::SourceLoc& loc() const { return loc_; }
  ir::Graph& graph() { return imp_.graph; }

  // Input `i` of the current node as a graph value (initializers and
  // constants are added to the graph on first use). Missing or empty: error.
  ir::Value in(size_t i);
  bool has_in(size_t i) const;
  // Input `i`'s data when it is known at import time (an initializer or a
  // Constant's output), else nullptr.
  const HostTensor* host(size_t i);
  const TensorMeta& meta(ir::Value v) const { return imp_.graph.meta(v); }
  // Input `i`'s shape (known at import time, also for import-time data,
  // which it does not add to the graph).
  Shape shape_of(size_t i);
  // Input `i`'s data as int64s (a shape, axes, pads), which must be known at
  // import time. Elements that follow a dynamic input dimension (batch,
  // sequence) are flagged in `*dynamic`; without it they are an error (the
  // traced size would be baked into the graph).
  std::vector<int64_t> static_ints(size_t i, const char* what, std::vector<bool>* dynamic = nullptr);
  // Whether dimension `d` of input `i` follows a dynamic input dimension.
  bool dynamic_dim(size_t i, int d) const;
  // Binds output `i` of the current node.
  void out(size_t i, ir::Value v);
  void set_host(size_t i, HostTensor t);  // Constant: a value known at import time
  // The converter provides the first `n` outputs; a later node or graph
  // output that reads another one fails naming it.
  void max_outputs(size_t n);
  // Whether input `i` is an initializer that becomes a weight.
  bool is_weight(size_t i) const;
  // Whether input `i` (shape or import-time data) differs in the run at the
  // other size: it follows a dynamic input dimension.
  bool follows_dynamic(size_t i) const;
  // The DimSource of each element of input `i` (flat order); empty when
  // none is known.
  std::vector<DimSource> dim_sources(size_t i) const;
  void set_dim_sources(size_t out, std::vector<DimSource> s);
  // The graph value named `name` (materialised if it is import-time data).
  ir::Value value_named(const std::string& name) { return materialise(name); }

  ir::Value op(const std::string& name, const std::vector<ir::Value>& inputs, const Attrs& attrs = {});
  ir::Value scalar(DType dtype, double v);  // a rank-0 constant

  // Attributes of the current node, with defaults.
  int64_t attr_int(const char* name, int64_t dflt) const;
  float attr_float(const char* name, float dflt) const;
  std::string attr_string(const char* name, const std::string& dflt) const;
  std::vector<int64_t> attr_ints(const char* name, std::vector<int64_t> dflt) const;
  bool has_attr(const char* name) const { return node_->attr(name) != nullptr; }
  // An error about the current node: "[onnx] 'file': node 'n' (Op, opset
  // 17): msg".
  [[noreturn]] void error(const std::string& msg) const;

 private:
  friend Imported convert(const Model& m, const std::string& what, const std::string& model_dir, int64_t dyn_size,
                          const Probe* probe, Probe* record);
  struct Entry {
    ir::Value value;         // invalid until materialised
    int host = -1;           // index into host_ when known at import time
    bool weight = false;     // an initializer becomes a weight when used
  };
  ir::Value materialise(const std::string& name);

  std::string what_, dir_;
  int64_t opset_;
  const Node* node_ = nullptr;
  ir::SourceLoc loc_;
  Imported imp_;
  std::map<std::string, Entry> values_;
  std::map<std::string, std::string> unsupported_;  // output name -> which optional output it is
  std::vector<std::unique_ptr<HostTensor>> host_;
  std::map<std::string, std::vector<DimSource>> dim_src_;  // host value name -> its elements' sources
  const Probe* probe_ = nullptr;  // the other size's run, when there is one
  Probe* record_ = nullptr;       // filled during that run
};

using Converter = std::function<void(Ctx&, const Node&)>;
// op_type -> converter, filled by the onnx_ops_*.cpp files.
const std::map<std::string, Converter>& converters();
void add_math_converters(std::map<std::string, Converter>& m);
void add_nn_converters(std::map<std::string, Converter>& m);
void add_shape_converters(std::map<std::string, Converter>& m);

// Import-time evaluation (onnx_fold.cpp): true when the current node was
// computed as host data (all its inputs known, or Shape/Size of any value).
bool try_fold(Ctx& c, const Node& n);
// 0, 1, ..., n - 1 as a 1-D graph value of `dtype`, n being dimension
// src.dim of src.value at run time (onnx_ops_shape.cpp): a Range or a
// Slice end over a dynamic size stays symbolic.
ir::Value dynamic_arange(Ctx& c, const DimSource& src, DType dtype);
// A node's axes: input `input` from opset `since` on, the attribute before.
std::vector<int64_t> axes_input_or_attr(Ctx& c, size_t input, int64_t since);

}  // namespace spora::io::onnx
