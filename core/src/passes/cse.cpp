// Common subexpression elimination: an op node with the same op, inputs and
// attributes as an earlier one, or a constant with the same type and bytes,
// is replaced by the earlier node. Every op is deterministic (random ops are
// functions of their seed and offset), so this is always sound.
#include <map>

#include "ir/rewrite.h"
#include "passes/pass.h"

namespace spora::passes {
namespace {

std::string key_of(const ir::Rewriter& rw, const ir::Node& n) {
  std::string k;
  if (n.kind == ir::NodeKind::kConstant) {
    k = "c|" + std::to_string(n.outputs[0].dtype) + "|" + n.outputs[0].shape.str() + "|";
    k.append(reinterpret_cast<const char*>(n.data->data()), n.data->size());
    return k;
  }
  k = "a|" + n.op->name + "|";
  for (const ir::Value& v : n.inputs) {
    const ir::Value m = rw.map(v);
    k += std::to_string(m.node) + "." + std::to_string(m.index) + ",";
  }
  for (const auto& [name, v] : n.attrs.items()) k += "|" + name + "=" + v.str();
  return k;
}

bool cse(ir::Graph& g, const PassContext&) {
  ir::Rewriter rw(g);
  std::map<std::string, int32_t> seen;  // key -> node id in the new graph
  bool changed = false;
  for (size_t id = 0; id < g.nodes().size(); ++id) {
    const ir::Node& n = g.nodes()[id];
    const bool candidate = n.kind == ir::NodeKind::kConstant || n.kind == ir::NodeKind::kApply;
    if (!candidate) {
      rw.copy(static_cast<int32_t>(id));
      continue;
    }
    const std::string key = key_of(rw, n);
    auto it = seen.find(key);
    if (it != seen.end()) {
      for (size_t o = 0; o < n.outputs.size(); ++o)
        rw.set({static_cast<int32_t>(id), static_cast<int32_t>(o)}, {it->second, static_cast<int32_t>(o)});
      changed = true;
      continue;
    }
    rw.copy(static_cast<int32_t>(id));
    seen.emplace(key, rw.map({static_cast<int32_t>(id), 0}).node);
  }
  if (changed) g = rw.finish();
  return changed;
}

}  // namespace
SPORA_PASS("cse", 1, cse);
}  // namespace spora::passes
