// See cast_remat.h.
#include "passes/cast_remat.h"

#include <map>
#include <utility>
#include <vector>

#include "ir/rewrite.h"
#include "support/log.h"

namespace spora::passes {
namespace {

using ir::Graph;
using ir::Node;
using ir::NodeKind;
using ir::Value;

bool exact_upcast(const Graph& g, const Node& n) {
  if (n.kind != NodeKind::kApply || n.op->name != "cast" || n.outputs.size() != 1) return false;
  const DType from = g.meta(n.inputs[0]).dtype, to = n.outputs[0].dtype;
  return to == SPORA_DTYPE_F32 && (from == SPORA_DTYPE_BF16 || from == SPORA_DTYPE_F16);
}

}  // namespace

bool rematerialize_upcasts(Graph& g) {
  const auto& nodes = g.nodes();
  // Readers of each large exact up-cast, in node order.
  std::map<int32_t, std::vector<int32_t>> readers;
  for (size_t id = 0; id < nodes.size(); ++id) {
    const Node& n = nodes[id];
    if (exact_upcast(g, n) && n.outputs[0].shape.numel() * 4 >= kMinRematBytes) readers[static_cast<int32_t>(id)];
  }
  if (readers.empty()) return false;
  for (size_t id = 0; id < nodes.size(); ++id)
    for (const Value& v : nodes[id].inputs) {
      auto it = readers.find(v.node);
      if (it != readers.end() && (it->second.empty() || it->second.back() != static_cast<int32_t>(id)))
        it->second.push_back(static_cast<int32_t>(id));
    }
  // For each reader far from the previous one: a fresh cast just before it,
  // which it and the readers close after it use.
  std::map<int32_t, std::vector<int32_t>> recast_before;  // reader -> casts to make there
  std::map<std::pair<int32_t, int32_t>, int32_t> use;     // (reader, cast) -> group leader
  // The cast itself counts as the first: a cast whose readers all come much
  // later is moved to them (the original is then dead and dropped).
  for (const auto& [cast, rs] : readers) {
    int32_t leader = -1, prev = cast;
    for (int32_t r : rs) {
      if (r - prev > kRematGap) {
        leader = r;
        recast_before[leader].push_back(cast);
      }
      if (leader >= 0) use[{r, cast}] = leader;
      prev = r;
    }
  }
  if (recast_before.empty()) return false;
  ir::Rewriter rw(g);
  Graph& out = rw.out();
  std::map<std::pair<int32_t, int32_t>, Value> made;  // (leader, cast) -> its new cast
  for (size_t i = 0; i < nodes.size(); ++i) {
    const int32_t id = static_cast<int32_t>(i);
    auto rb = recast_before.find(id);
    if (rb != recast_before.end()) {
      for (int32_t cast : rb->second) {
        const Node& c = nodes[static_cast<size_t>(cast)];
        const Value v = out.add_op("cast", {rw.map(c.inputs[0])}, c.attrs, c.loc)[0];
        out.mutable_node(v.node).device = c.device;
        made[{id, cast}] = v;
      }
    }
    Node n = nodes[i];
    for (Value& v : n.inputs) {
      auto u = use.find({id, v.node});
      v = u == use.end() ? rw.map(v) : made.at({u->second, v.node});
    }
    const int32_t nid = out.append(std::move(n));
    for (size_t o = 0; o < nodes[i].outputs.size(); ++o)
      rw.set({id, static_cast<int32_t>(o)}, {nid, static_cast<int32_t>(o)});
  }
  logger().debug("[graph {}] mixed precision: {} f32 copies cast again for late readers", g.name(), made.size());
  g = rw.finish();
  return true;
}

}  // namespace spora::passes
