// The parts of an ONNX model file the importer uses, decoded from the
// protobuf wire format (io/protobuf_wire.h) into plain structs. Field
// numbers follow the public ONNX IR specification. Tensor payloads stay
// views into the file's bytes (OnnxFile::bytes), so nothing is allocated by
// a size the file merely claims.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/protobuf_wire.h"

namespace spora::io::onnx {

// TensorProto.DataType values.
enum DataType : int32_t {
  kUndefined = 0, kFloat = 1, kUint8 = 2, kInt8 = 3, kUint16 = 4, kInt16 = 5, kInt32 = 6, kInt64 = 7,
  kString = 8, kBool = 9, kFloat16 = 10, kDouble = 11, kUint32 = 12, kUint64 = 13, kComplex64 = 14,
  kComplex128 = 15, kBfloat16 = 16,
};
const char* data_type_name(int32_t t);

struct TensorProto {
  std::string name;
  int32_t data_type = kUndefined;
  std::vector<int64_t> dims;
  pb::Bytes raw_data;  // size 0 when absent
  bool has_raw = false;
  std::vector<float> float_data;
  std::vector<int64_t> int32_data;  // int32, int16, int8, uint8, uint16, bool, float16, bfloat16
  std::vector<int64_t> int64_data;
  std::vector<double> double_data;
  std::vector<int64_t> uint64_data;  // uint32, uint64
  bool has_string = false;
  std::vector<std::pair<std::string, std::string>> external_data;  // key, value
  int32_t data_location = 0;                                       // 1 = external
};

// AttributeProto.AttributeType values.
enum AttrKind : int32_t {
  kAttrUndefined = 0, kAttrFloat = 1, kAttrInt = 2, kAttrString = 3, kAttrTensor = 4, kAttrGraph = 5,
  kAttrFloats = 6, kAttrInts = 7, kAttrStrings = 8, kAttrTensors = 9, kAttrGraphs = 10,
};

struct Attribute {
  std::string name;
  int32_t type = kAttrUndefined;
  float f = 0;
  int64_t i = 0;
  std::string s;
  std::shared_ptr<TensorProto> t;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  bool has_graph = false;  // subgraphs are not imported; only noticed
};

struct Node {
  std::string name, op_type, domain;
  std::vector<std::string> inputs, outputs;  // "" = an omitted optional input
  std::vector<Attribute> attributes;
  size_t offset = 0;  // in the file, for errors
  const Attribute* attr(const std::string& n) const;
};

// A graph input or output: name, element type and dims (-1 for a symbolic
// or unknown dimension); has_type false when the file gives none.
struct ValueInfo {
  std::string name;
  bool has_type = false;
  int32_t elem_type = kUndefined;
  bool has_shape = false;
  std::vector<int64_t> dims;
  std::vector<std::string> dim_params;  // per dim: the symbolic name or ""
};

struct Graph {
  std::string name;
  std::vector<Node> nodes;
  std::vector<TensorProto> initializers;
  std::vector<ValueInfo> inputs, outputs;
  bool has_sparse_initializers = false;
};

struct Model {
  int64_t ir_version = 0;
  std::map<std::string, int64_t> opsets;  // domain ("" = ai.onnx) -> version
  std::string producer;
  Graph graph;
  bool has_graph = false;
  bool has_functions = false;
};

// Decodes a whole ModelProto from `data` (the file's bytes). `what` names
// the file in errors.
Model parse_model(const uint8_t* data, size_t size, const std::string& what);

}  // namespace spora::io::onnx
