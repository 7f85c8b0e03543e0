// Rebuilding a graph node by node: passes copy what they keep, replace what
// they change, and the rewriter remaps values. Inputs and weights are always
// kept, in order, because executables bind them by position.
#pragma once
#include <vector>

#include "ir/graph.h"

namespace spora::ir {

class Rewriter {
 public:
  explicit Rewriter(const Graph& src) : src_(src), out_(src.name()), map_(src.nodes().size()) {
    for (size_t i = 0; i < map_.size(); ++i) map_[i].resize(src.nodes()[i].outputs.size());
  }
  const Graph& src() const { return src_; }
  Graph& out() { return out_; }
  // The new value standing for `old` (which must have been copied or set).
  Value map(Value old) const { return map_[static_cast<size_t>(old.node)][static_cast<size_t>(old.index)]; }
  void set(Value old, Value now) { map_[static_cast<size_t>(old.node)][static_cast<size_t>(old.index)] = now; }
  // Copies node `id` with remapped inputs; maps its outputs.
  void copy(int32_t id) {
    Node n = src_.node(id);
    for (Value& v : n.inputs) v = map(v);
    const int32_t nid = out_.append(std::move(n));
    for (size_t o = 0; o < map_[static_cast<size_t>(id)].size(); ++o) set({id, static_cast<int32_t>(o)}, {nid, static_cast<int32_t>(o)});
  }
  Graph finish() {
    std::vector<Value> outs;
    for (const Value& v : src_.outputs()) outs.push_back(map(v));
    out_.set_outputs(std::move(outs));
    return std::move(out_);
  }

 private:
  const Graph& src_;
  Graph out_;
  std::vector<std::vector<Value>> map_;
};

}  // namespace spora::ir
