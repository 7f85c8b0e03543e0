// Dead code elimination: drops op and constant nodes no output depends on.
// Inputs and weights stay (executables bind them by position).
#include <algorithm>

#include "ir/rewrite.h"
#include "passes/pass.h"

namespace spora::passes {
namespace {

bool dce(ir::Graph& g, const PassContext&) {
  const auto& nodes = g.nodes();
  std::vector<bool> live(nodes.size(), false);
  for (const ir::Value& v : g.outputs()) live[static_cast<size_t>(v.node)] = true;
  for (size_t id = nodes.size(); id-- > 0;) {
    const ir::Node& n = nodes[id];
    if (n.kind == ir::NodeKind::kInput || n.kind == ir::NodeKind::kWeight) live[id] = true;
    if (!live[id]) continue;
    for (const ir::Value& v : n.inputs) live[static_cast<size_t>(v.node)] = true;
  }
  if (std::find(live.begin(), live.end(), false) == live.end()) return false;
  ir::Rewriter rw(g);
  for (size_t id = 0; id < nodes.size(); ++id)
    if (live[id]) rw.copy(static_cast<int32_t>(id));
  g = rw.finish();
  return true;
}

}  // namespace
SPORA_PASS("dce", 1, dce);
}  // namespace spora::passes
