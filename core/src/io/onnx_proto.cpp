// Field numbers are those of the public ONNX specification (onnx.proto);
// fields the importer has no use for are skipped.
#include "io/onnx_proto.h"

#include <limits>

#include "support/error.h"

namespace spora::io::onnx {
namespace {

// Limits far above real models, so that a hostile file cannot make us
// build huge vectors of small items.
constexpr size_t kMaxDims = 64;
constexpr size_t kMaxAttrValues = 1u << 20;

// Items of the graph's lists (nodes, their inputs, outputs and attributes,
// graph inputs, outputs and initializers): each costs ~30-200 bytes parsed
// but only 2 on the wire, so a file of empty entries would grow ~90x in
// memory. Real models have thousands to a few hundred thousand; past this
// count the file is refused. Counted per parse (parse_model resets it).
constexpr size_t kMaxItems = size_t{1} << 22;
thread_local size_t t_items = 0;

void count_item(pb::Reader& r, const char* what) {
  if (++t_items > kMaxItems)
    r.error(std::string("more than ") + std::to_string(kMaxItems) + " graph items (at a " + what +
            "): refused as hostile");
}

// Any typed-data list may hold at most as many elements as the file has
// bytes (each element takes at least one byte on the wire).
size_t data_cap(size_t file_size) { return file_size + 1; }

// external_data needs the file name for errors: parsed by a second pass.
void parse_external(pb::Reader r, TensorProto& t, const std::string* what) {
  while (r.next()) {
    if (r.field() != 13) {
      r.skip();
      continue;
    }
    pb::Reader e(r.bytes("TensorProto.external_data"), what);
    std::string k, v;
    while (e.next()) {
      if (e.field() == 1) k = e.string("StringStringEntryProto.key");
      else if (e.field() == 2) v = e.string("StringStringEntryProto.value");
      else e.skip();
    }
    if (t.external_data.size() >= 16) e.error("tensor '" + t.name + "' has too many external_data entries");
    t.external_data.emplace_back(k, v);
  }
}

void parse_tensor_full(const pb::Bytes& b, TensorProto& t, const std::string* what, size_t file_size) {
  // First the scalar and data fields, then (only if any) external_data.
  pb::Reader r(b, what);
  while (r.next()) {
    if (r.field() == 13) {
      r.skip();
      continue;
    }
    switch (r.field()) {
      case 1: r.ints("TensorProto.dims", t.dims, kMaxDims); break;
      case 2: t.data_type = r.int32("TensorProto.data_type"); break;
      case 4: r.floats("TensorProto.float_data", t.float_data, data_cap(file_size)); break;
      case 5: r.ints("TensorProto.int32_data", t.int32_data, data_cap(file_size)); break;
      case 6: t.has_string = true; r.skip(); break;
      case 7: r.ints("TensorProto.int64_data", t.int64_data, data_cap(file_size)); break;
      case 8: t.name = r.string("TensorProto.name"); break;
      case 9: t.raw_data = r.bytes("TensorProto.raw_data"); t.has_raw = true; break;
      case 10: r.doubles("TensorProto.double_data", t.double_data, data_cap(file_size)); break;
      case 11: r.ints("TensorProto.uint64_data", t.uint64_data, data_cap(file_size)); break;
      case 14: t.data_location = r.int32("TensorProto.data_location"); break;
      default: r.skip();
    }
  }
  parse_external(pb::Reader(b, what), t, what);
}

Attribute parse_attribute(const pb::Bytes& b, const std::string* what, size_t file_size) {
  Attribute a;
  pb::Reader r(b, what);
  while (r.next()) {
    switch (r.field()) {
      case 1: a.name = r.string("AttributeProto.name"); break;
      case 2: a.f = r.f32("AttributeProto.f"); break;
      case 3: a.i = r.int64("AttributeProto.i"); break;
      case 4: a.s = std::string(r.bytes("AttributeProto.s").view()); break;  // bytes, not UTF-8
      case 5:
        a.t = std::make_shared<TensorProto>();
        parse_tensor_full(r.bytes("AttributeProto.t"), *a.t, what, file_size);
        break;
      case 6: a.has_graph = true; r.skip(); break;
      case 7: r.floats("AttributeProto.floats", a.floats, kMaxAttrValues); break;
      case 8: r.ints("AttributeProto.ints", a.ints, kMaxAttrValues); break;
      case 11: a.has_graph = true; r.skip(); break;
      case 20: a.type = r.int32("AttributeProto.type"); break;
      default: r.skip();
    }
  }
  return a;
}

Node parse_node(const pb::Bytes& b, const std::string* what, size_t file_size) {
  Node n;
  n.offset = b.offset;
  pb::Reader r(b, what);
  while (r.next()) {
    switch (r.field()) {
      case 1: count_item(r, "node input"); n.inputs.push_back(r.string("NodeProto.input")); break;
      case 2: count_item(r, "node output"); n.outputs.push_back(r.string("NodeProto.output")); break;
      case 3: n.name = r.string("NodeProto.name"); break;
      case 4: n.op_type = r.string("NodeProto.op_type"); break;
      case 5:
        count_item(r, "node attribute");
        n.attributes.push_back(parse_attribute(r.bytes("NodeProto.attribute"), what, file_size));
        break;
      case 7: n.domain = r.string("NodeProto.domain"); break;
      default: r.skip();
    }
  }
  return n;
}

// TypeProto.Tensor.shape (TensorShapeProto): dims of value (1) or param (2).
void parse_shape(const pb::Bytes& b, ValueInfo& v, const std::string* what) {
  pb::Reader r(b, what);
  v.has_shape = true;
  while (r.next()) {
    if (r.field() != 1) {
      r.skip();
      continue;
    }
    if (v.dims.size() >= kMaxDims) r.error("value '" + v.name + "' has more than 64 dimensions");
    pb::Reader d(r.bytes("TensorShapeProto.dim"), what);
    int64_t value = -1;
    std::string param;
    while (d.next()) {
      if (d.field() == 1) value = d.int64("Dimension.dim_value");
      else if (d.field() == 2) param = d.string("Dimension.dim_param");
      else d.skip();
    }
    v.dims.push_back(value);
    v.dim_params.push_back(param);
  }
}

ValueInfo parse_value_info(const pb::Bytes& b, const std::string* what) {
  ValueInfo v;
  pb::Reader r(b, what);
  while (r.next()) {
    if (r.field() == 1) {
      v.name = r.string("ValueInfoProto.name");
    } else if (r.field() == 2) {
      pb::Reader type(r.bytes("ValueInfoProto.type"), what);
      while (type.next()) {
        if (type.field() != 1) {  // sequence, map, optional, sparse: not tensors
          type.skip();
          continue;
        }
        v.has_type = true;
        pb::Reader tt(type.bytes("TypeProto.tensor_type"), what);
        while (tt.next()) {
          if (tt.field() == 1) v.elem_type = tt.int32("TypeProto.Tensor.elem_type");
          else if (tt.field() == 2) parse_shape(tt.bytes("TypeProto.Tensor.shape"), v, what);
          else tt.skip();
        }
      }
    } else {
      r.skip();
    }
  }
  return v;
}

Graph parse_graph(const pb::Bytes& b, const std::string* what, size_t file_size) {
  Graph g;
  pb::Reader r(b, what);
  while (r.next()) {
    switch (r.field()) {
      case 1: count_item(r, "node"); g.nodes.push_back(parse_node(r.bytes("GraphProto.node"), what, file_size)); break;
      case 2: g.name = r.string("GraphProto.name"); break;
      case 5:
        count_item(r, "initializer");
        g.initializers.emplace_back();
        parse_tensor_full(r.bytes("GraphProto.initializer"), g.initializers.back(), what, file_size);
        break;
      case 11: count_item(r, "graph input"); g.inputs.push_back(parse_value_info(r.bytes("GraphProto.input"), what)); break;
      case 12:
        count_item(r, "graph output");
        g.outputs.push_back(parse_value_info(r.bytes("GraphProto.output"), what));
        break;
      case 15: g.has_sparse_initializers = true; r.skip(); break;
      default: r.skip();
    }
  }
  return g;
}

}  // namespace

const char* data_type_name(int32_t t) {
  static const char* const names[] = {"UNDEFINED", "FLOAT",  "UINT8",  "INT8",      "UINT16",     "INT16",
                                      "INT32",     "INT64",  "STRING", "BOOL",      "FLOAT16",    "DOUBLE",
                                      "UINT32",    "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16"};
  if (t >= 0 && t <= 16) return names[t];
  return "an unknown data type";
}

const Attribute* Node::attr(const std::string& n) const {
  for (const Attribute& a : attributes)
    if (a.name == n) return &a;
  return nullptr;
}

Model parse_model(const uint8_t* data, size_t size, const std::string& what) {
  t_items = 0;
  Model m;
  pb::Reader r(data, size, &what);
  while (r.next()) {
    switch (r.field()) {
      case 1: m.ir_version = r.int64("ModelProto.ir_version"); break;
      case 2: m.producer = r.string("ModelProto.producer_name"); break;
      case 7:
        m.graph = parse_graph(r.bytes("ModelProto.graph"), &what, size);
        m.has_graph = true;
        break;
      case 8: {
        pb::Reader o(r.bytes("ModelProto.opset_import"), &what);
        std::string domain;
        int64_t version = 0;
        while (o.next()) {
          if (o.field() == 1) domain = o.string("OperatorSetIdProto.domain");
          else if (o.field() == 2) version = o.int64("OperatorSetIdProto.version");
          else o.skip();
        }
        if (domain == "ai.onnx") domain.clear();
        m.opsets[domain] = version;
        break;
      }
      case 25: m.has_functions = true; r.skip(); break;
      default: r.skip();
    }
  }
  return m;
}

}  // namespace spora::io::onnx
