#include "ir/printer.h"

#include <sstream>

namespace spora::ir {
namespace {

std::string type_str(const TensorMeta& m) {
  std::string s = std::string(dtype_name(m.dtype)) + "[";
  for (int i = 0; i < m.shape.rank; ++i) s += (i ? "," : "") + std::to_string(m.shape.dims[i]);
  return s + "]";
}

std::string value_str(Value v, const Graph& g) {
  std::string s = "%" + std::to_string(v.node);
  if (g.node(v.node).outputs.size() > 1) s += "." + std::to_string(v.index);
  return s;
}

void print_graph(const Graph& g, std::ostringstream& os, const std::string& indent) {
  os << indent << "graph @" << g.name() << " {\n";
  for (size_t id = 0; id < g.nodes().size(); ++id) {
    const Node& n = g.nodes()[id];
    os << indent << "  %" << id << " = ";
    switch (n.kind) {
      case NodeKind::kInput:
      case NodeKind::kWeight:
        os << node_kind_name(n.kind) << " \"" << n.name << "\"";
        break;
      case NodeKind::kConstant:
        os << "constant";
        if (n.data && n.data->size() <= 16) {
          os << " 0x";
          static const char* hex = "0123456789abcdef";
          for (uint8_t b : *n.data) os << hex[b >> 4] << hex[b & 15];
        } else if (n.data) {
          os << " <" << n.data->size() << " bytes>";
        }
        break;
      default: {
        os << (n.kind == NodeKind::kApply && n.op ? n.op->name : node_kind_name(n.kind)) << "(";
        for (size_t i = 0; i < n.inputs.size(); ++i) os << (i ? ", " : "") << value_str(n.inputs[i], g);
        os << ")";
        if (!n.attrs.empty()) {
          os << " {";
          bool first = true;
          for (const auto& [k, v] : n.attrs.items()) {
            os << (first ? "" : ", ") << k << "=" << v.str();
            first = false;
          }
          os << "}";
        }
      }
    }
    os << " : ";
    for (size_t i = 0; i < n.outputs.size(); ++i) os << (i ? ", " : "") << type_str(n.outputs[i]);
    if (!n.device.empty()) os << " @" << n.device;
    if (!n.loc.empty()) os << "  # " << n.loc.str();
    os << "\n";
    for (const auto& sub : n.subgraphs) print_graph(*sub, os, indent + "    ");
  }
  os << indent << "  return";
  for (size_t i = 0; i < g.outputs().size(); ++i) os << (i ? ", " : " ") << value_str(g.outputs()[i], g);
  os << "\n" << indent << "}\n";
}

}  // namespace

std::string to_text(const Graph& g) {
  std::ostringstream os;
  print_graph(g, os, "");
  return os.str();
}

std::string to_dot(const Graph& g) {
  std::ostringstream os;
  os << "digraph \"" << g.name() << "\" {\n  node [shape=box, fontname=monospace];\n";
  for (size_t id = 0; id < g.nodes().size(); ++id) {
    const Node& n = g.nodes()[id];
    std::string label = n.kind == NodeKind::kApply && n.op ? n.op->name : node_kind_name(n.kind);
    if (!n.name.empty()) label += " " + n.name;
    label += "\\n";
    for (size_t i = 0; i < n.outputs.size(); ++i) label += (i ? ", " : "") + type_str(n.outputs[i]);
    os << "  n" << id << " [label=\"%" << id << " " << label << "\"";
    if (n.kind != NodeKind::kApply) os << ", style=rounded";
    os << "];\n";
    for (const Value& v : n.inputs) os << "  n" << v.node << " -> n" << id << ";\n";
  }
  for (size_t i = 0; i < g.outputs().size(); ++i)
    os << "  out" << i << " [shape=plaintext, label=\"output " << i << "\"];\n  n" << g.outputs()[i].node << " -> out"
       << i << ";\n";
  os << "}\n";
  return os.str();
}

}  // namespace spora::ir
