#include "ir/serialize.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "ir/verifier.h"
#include "support/error.h"

namespace spora::ir {
namespace {

// Ordered: attributes are written in Attrs' order (sorted by name) and read
// back through Attrs::set, so the JSON text of a graph read back is the same.
using json = nlohmann::ordered_json;
constexpr int kFormatVersion = 1;

// ---- base64 ----
const char* kB64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string b64_encode(const std::vector<uint8_t>& in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  for (size_t i = 0; i < in.size(); i += 3) {
    const uint32_t n = static_cast<uint32_t>(in[i]) << 16 | (i + 1 < in.size() ? in[i + 1] << 8 : 0) |
                       (i + 2 < in.size() ? in[i + 2] : 0);
    out += kB64[n >> 18 & 63];
    out += kB64[n >> 12 & 63];
    out += i + 1 < in.size() ? kB64[n >> 6 & 63] : '=';
    out += i + 2 < in.size() ? kB64[n & 63] : '=';
  }
  return out;
}

std::vector<uint8_t> b64_decode(const std::string& s, const std::string& where) {
  if (s.size() % 4) fail(Code::kInvalidArgument, "[graph json] {}: base64 length is not a multiple of 4", where);
  std::vector<uint8_t> out;
  out.reserve(s.size() / 4 * 3);
  auto val = [&](char c) -> uint32_t {
    const char* p = std::strchr(kB64, c);
    if (!p || c == '\0') fail(Code::kInvalidArgument, "[graph json] {}: invalid base64 character", where);
    return static_cast<uint32_t>(p - kB64);
  };
  for (size_t i = 0; i < s.size(); i += 4) {
    const bool p2 = s[i + 2] == '=', p3 = s[i + 3] == '=';
    if ((p2 && !p3) || ((p2 || p3) && i + 4 != s.size()))
      fail(Code::kInvalidArgument, "[graph json] {}: misplaced base64 padding", where);
    const uint32_t n = val(s[i]) << 18 | val(s[i + 1]) << 12 | (p2 ? 0 : val(s[i + 2]) << 6) | (p3 ? 0 : val(s[i + 3]));
    out.push_back(static_cast<uint8_t>(n >> 16));
    if (!p2) out.push_back(static_cast<uint8_t>(n >> 8 & 255));
    if (!p3) out.push_back(static_cast<uint8_t>(n & 255));
  }
  return out;
}

// Non-finite doubles have no JSON number form: write them as strings.
json enc_double(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  return d;
}

double dec_double(const json& j, const std::string& where) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
  }
  fail(Code::kInvalidArgument, "[graph json] {}: expected a number", where);
}

json enc_attr(const AttrValue& v) {
  json j;
  j["type"] = attr_type_name(v.type);
  switch (v.type) {
    case AttrType::kInt: j["value"] = v.i; break;
    case AttrType::kBool: j["value"] = v.i != 0; break;
    case AttrType::kFloat: j["value"] = enc_double(v.f); break;
    case AttrType::kInts: j["value"] = v.ints; break;
    case AttrType::kFloats: {
      json a = json::array();
      for (double d : v.floats) a.push_back(enc_double(d));
      j["value"] = a;
      break;
    }
    case AttrType::kString: j["value"] = v.s; break;
  }
  return j;
}

AttrValue dec_attr(const json& j, const std::string& where) {
  if (!j.is_object() || !j.contains("type") || !j.contains("value"))
    fail(Code::kInvalidArgument, "[graph json] {}: attribute needs type and value", where);
  const std::string t = j["type"].is_string() ? j["type"].get<std::string>() : "";
  const json& v = j["value"];
  if (t == "int" && v.is_number_integer()) return AttrValue::of_int(v.get<int64_t>());
  if (t == "bool" && v.is_boolean()) return AttrValue::of_bool(v.get<bool>());
  if (t == "float") return AttrValue::of_float(dec_double(v, where));
  if (t == "string" && v.is_string()) return AttrValue::of_string(v.get<std::string>());
  if (t == "ints" && v.is_array()) {
    std::vector<int64_t> out;
    for (const json& e : v) {
      if (!e.is_number_integer()) fail(Code::kInvalidArgument, "[graph json] {}: ints holds a non-integer", where);
      out.push_back(e.get<int64_t>());
    }
    return AttrValue::of_ints(out);
  }
  if (t == "floats" && v.is_array()) {
    std::vector<double> out;
    for (const json& e : v) out.push_back(dec_double(e, where));
    return AttrValue::of_floats(out);
  }
  fail(Code::kInvalidArgument, "[graph json] {}: bad attribute of type '{}'", where, t);
}

json enc_meta(const TensorMeta& m) {
  return json{{"dtype", dtype_name(m.dtype)}, {"shape", std::vector<int64_t>(m.shape.dims, m.shape.dims + m.shape.rank)}};
}

DType dtype_from_name(const std::string& s, const std::string& where) {
  for (int32_t d = SPORA_DTYPE_F32; d <= SPORA_DTYPE_BOOL; ++d)
    if (s == dtype_name(static_cast<DType>(d))) return static_cast<DType>(d);
  fail(Code::kInvalidArgument, "[graph json] {}: unknown dtype '{}'", where, s);
}

TensorMeta dec_meta(const json& j, const std::string& where) {
  if (!j.is_object() || !j.contains("dtype") || !j.contains("shape") || !j["dtype"].is_string() || !j["shape"].is_array())
    fail(Code::kInvalidArgument, "[graph json] {}: expected {{dtype, shape}}", where);
  std::vector<int64_t> dims;
  for (const json& d : j["shape"]) {
    if (!d.is_number_integer()) fail(Code::kInvalidArgument, "[graph json] {}: shape holds a non-integer", where);
    dims.push_back(d.get<int64_t>());
  }
  if (dims.size() > static_cast<size_t>(kMaxRank)) fail(Code::kInvalidArgument, "[graph json] {}: rank too large", where);
  return {dtype_from_name(j["dtype"].get<std::string>(), where),
          Shape::from(dims.data(), static_cast<int32_t>(dims.size()), "graph json")};
}

json enc_graph(const Graph& g) {
  json nodes = json::array();
  for (const Node& n : g.nodes()) {
    json j;
    j["kind"] = node_kind_name(n.kind);
    if (!n.name.empty()) j["name"] = n.name;
    if (n.op) j["op"] = n.op->name;
    if (!n.inputs.empty()) {
      json in = json::array();
      for (const Value& v : n.inputs) in.push_back({v.node, v.index});
      j["inputs"] = in;
    }
    if (!n.attrs.empty()) {
      json a = json::object();
      for (const auto& [k, v] : n.attrs.items()) a[k] = enc_attr(v);
      j["attrs"] = a;
    }
    json outs = json::array();
    for (const TensorMeta& m : n.outputs) outs.push_back(enc_meta(m));
    j["outputs"] = outs;
    if (!n.device.empty()) j["device"] = n.device;
    if (!n.loc.empty()) j["loc"] = {{"file", n.loc.file}, {"line", n.loc.line}};
    if (n.data) j["data"] = b64_encode(*n.data);
    if (!n.subgraphs.empty()) {
      json subs = json::array();
      for (const auto& s : n.subgraphs) subs.push_back(enc_graph(*s));
      j["subgraphs"] = subs;
    }
    nodes.push_back(j);
  }
  json outs = json::array();
  for (const Value& v : g.outputs()) outs.push_back({v.node, v.index});
  return json{{"name", g.name()}, {"nodes", nodes}, {"outputs", outs}};
}

Value dec_value(const json& j, const std::string& where) {
  if (!j.is_array() || j.size() != 2 || !j[0].is_number_integer() || !j[1].is_number_integer())
    fail(Code::kInvalidArgument, "[graph json] {}: a value is [node, output]", where);
  const int64_t a = j[0].get<int64_t>(), b = j[1].get<int64_t>();
  if (a < 0 || a > std::numeric_limits<int32_t>::max() || b < 0 || b > kMaxOpOutputs)
    fail(Code::kInvalidArgument, "[graph json] {}: value [{}, {}] out of range", where, a, b);
  return {static_cast<int32_t>(a), static_cast<int32_t>(b)};
}

NodeKind kind_from_name(const std::string& s, const std::string& where) {
  for (int k = 0; k <= 5; ++k)
    if (s == node_kind_name(static_cast<NodeKind>(k))) return static_cast<NodeKind>(k);
  fail(Code::kInvalidArgument, "[graph json] {}: unknown node kind '{}'", where, s);
}

std::shared_ptr<Graph> dec_graph(const json& j, int depth) {
  if (depth > 64) fail(Code::kInvalidArgument, "[graph json] sub-graphs nest deeper than 64");
  if (!j.is_object() || !j.contains("nodes") || !j["nodes"].is_array())
    fail(Code::kInvalidArgument, "[graph json] a graph needs a nodes array");
  auto g = std::make_shared<Graph>(j.contains("name") && j["name"].is_string() ? j["name"].get<std::string>() : "main");
  size_t id = 0;
  for (const json& jn : j["nodes"]) {
    const std::string where = "graph '" + g->name() + "' node " + std::to_string(id++);
    if (!jn.is_object() || !jn.contains("kind") || !jn["kind"].is_string())
      fail(Code::kInvalidArgument, "[graph json] {}: node needs a kind", where);
    Node n;
    n.kind = kind_from_name(jn["kind"].get<std::string>(), where);
    if (jn.contains("name") && jn["name"].is_string()) n.name = jn["name"].get<std::string>();
    if (jn.contains("op")) {
      if (!jn["op"].is_string()) fail(Code::kInvalidArgument, "[graph json] {}: op must be a string", where);
      n.op = OpRegistry::get().find(jn["op"].get<std::string>());
      if (!n.op) fail(Code::kInvalidArgument, "[graph json] {}: unknown op '{}'", where, jn["op"].get<std::string>());
    }
    if (jn.contains("inputs")) {
      if (!jn["inputs"].is_array()) fail(Code::kInvalidArgument, "[graph json] {}: inputs must be an array", where);
      for (const json& v : jn["inputs"]) n.inputs.push_back(dec_value(v, where));
    }
    if (jn.contains("attrs")) {
      if (!jn["attrs"].is_object()) fail(Code::kInvalidArgument, "[graph json] {}: attrs must be an object", where);
      for (const auto& [k, v] : jn["attrs"].items()) n.attrs.set(k, dec_attr(v, where + " attr " + k));
    }
    if (!jn.contains("outputs") || !jn["outputs"].is_array())
      fail(Code::kInvalidArgument, "[graph json] {}: node needs outputs", where);
    for (const json& m : jn["outputs"]) n.outputs.push_back(dec_meta(m, where));
    if (jn.contains("device") && jn["device"].is_string()) n.device = jn["device"].get<std::string>();
    if (jn.contains("loc")) {
      const json& l = jn["loc"];
      if (!l.is_object() || !l.contains("file") || !l["file"].is_string() || !l.contains("line") ||
          !l["line"].is_number_integer())
        fail(Code::kInvalidArgument, "[graph json] {}: loc needs file and line", where);
      n.loc = {l["file"].get<std::string>(), l["line"].get<int32_t>()};
    }
    if (jn.contains("data")) {
      if (!jn["data"].is_string()) fail(Code::kInvalidArgument, "[graph json] {}: data must be base64", where);
      // Bound the decoded size by the declared type before decoding.
      const std::string& d = jn["data"].get_ref<const std::string&>();
      if (n.outputs.size() != 1) fail(Code::kInvalidArgument, "[graph json] {}: constant needs one output", where);
      const size_t want = static_cast<size_t>(n.outputs[0].shape.numel()) * dtype_size(n.outputs[0].dtype);
      if (d.size() / 4 * 3 > want + 2)
        fail(Code::kInvalidArgument, "[graph json] {}: constant data is larger than its type", where);
      n.data = std::make_shared<const std::vector<uint8_t>>(b64_decode(d, where));
    }
    if (jn.contains("subgraphs")) {
      if (!jn["subgraphs"].is_array()) fail(Code::kInvalidArgument, "[graph json] {}: subgraphs must be an array", where);
      for (const json& s : jn["subgraphs"]) n.subgraphs.push_back(dec_graph(s, depth + 1));
    }
    g->append(std::move(n));
  }
  std::vector<Value> outs;
  if (j.contains("outputs")) {
    if (!j["outputs"].is_array()) fail(Code::kInvalidArgument, "[graph json] graph outputs must be an array");
    for (const json& v : j["outputs"]) outs.push_back(dec_value(v, "graph '" + g->name() + "' outputs"));
  }
  g->set_outputs(outs);
  return g;
}

}  // namespace

std::string to_json(const Graph& g, int indent) {
  json j = enc_graph(g);
  j["format"] = "spora-graph";
  j["version"] = kFormatVersion;
  try {
    return j.dump(indent);
  } catch (const json::type_error& e) {
    // JSON text is UTF-8: a name or path holding other bytes cannot be written.
    fail(Code::kInvalidArgument, "[graph json] graph '{}' holds a string that is not valid UTF-8: {}", g.name(),
         e.what());
  }
}

Graph from_json(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail(Code::kInvalidArgument, "[graph json] not valid JSON: {}", e.what());
  }
  if (!j.is_object() || !j.contains("format") || !j["format"].is_string() || j["format"] != "spora-graph")
    fail(Code::kInvalidArgument, "[graph json] not a Spora graph (missing \"format\": \"spora-graph\")");
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int64_t>() > kFormatVersion)
    fail(Code::kInvalidArgument, "[graph json] unsupported format version; this Spora reads up to {}", kFormatVersion);
  std::shared_ptr<Graph> g;
  try {
    g = dec_graph(j, 0);
  } catch (const json::exception& e) {
    // Every field is type-checked before use; this is the backstop.
    fail(Code::kInvalidArgument, "[graph json] malformed: {}", e.what());
  }
  verify(*g);
  return std::move(*g);
}

}  // namespace spora::ir
