// ONNX import: an .onnx file (opsets 13-20 of the default domain) as a
// Spora graph plus the values of its weights. The converter of each ONNX op
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

constexpr int64_t kMinOpset = 13;
constexpr int64_t kMaxOpset = 20;

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
  // Binds output `i` of the current node; errors if the node asks for more
  // outputs than `n` the converter provides (an unsupported output).
  void out(size_t i, ir::Value v);
  void set_host(size_t i, HostTensor t);  // Constant: a value known at import time
  void max_outputs(size_t n);

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
  friend Imported convert(const Model& m, const std::string& what, const std::string& model_dir);
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
  std::vector<std::unique_ptr<HostTensor>> host_;
};

using Converter = std::function<void(Ctx&, const Node&)>;
// op_type -> converter, filled by the onnx_ops_*.cpp files.
const std::map<std::string, Converter>& converters();
void add_math_converters(std::map<std::string, Converter>& m);
void add_nn_converters(std::map<std::string, Converter>& m);

}  // namespace spora::io::onnx
