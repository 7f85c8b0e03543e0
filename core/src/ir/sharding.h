// The vocabulary of sharding rules: how a tensor is laid out over a device
// mesh, and what an op's rule answers. It sits in ir/ because the rules live
// with the ops (ops/*.cpp) and the pass that applies them (parallel/) sits
// above both; see docs/parallel.md.
//
// A mesh is a grid of devices with one size per axis (row-major rank order).
// A layout says, per tensor dimension, the mesh axis it is split over (in
// equal contiguous blocks, block i on the devices whose coordinate along
// that axis is i) or kReplicated; plus the mesh axes over which the tensor
// is a partial sum (the true value is the sum of every device's value along
// those axes).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/op.h"

namespace spora {

inline constexpr int kReplicated = -1;

struct TensorLayout {
  std::vector<int> dims;  // per dim: the mesh axis it is split over, or kReplicated
  uint32_t partial = 0;   // bit a: a partial sum over mesh axis a
  // Not placed yet: a weight no op has asked for. A rule chooses its layout
  // (from its other inputs); it never stays free in a rule's answer.
  bool free = false;

  static TensorLayout replicated(int rank) { return {std::vector<int>(static_cast<size_t>(rank), kReplicated), 0, false}; }
  int rank() const { return static_cast<int>(dims.size()); }
  bool is_split() const {
    for (int a : dims)
      if (a != kReplicated) return true;
    return false;
  }
  bool is_replicated() const { return !is_split() && partial == 0; }
  // Bit a set: some dim is split over axis a, or the value is partial over it.
  uint32_t axes_used() const {
    uint32_t m = partial;
    for (int a : dims)
      if (a != kReplicated) m |= 1u << a;
    return m;
  }
  bool operator==(const TensorLayout& o) const { return dims == o.dims && partial == o.partial && free == o.free; }
  bool operator!=(const TensorLayout& o) const { return !(*this == o); }
  // "[S0, R]+P{1}" (S<axis>: split over that mesh axis; names when given).
  std::string str(const std::vector<std::string>& axis_names = {}) const {
    auto axis = [&](int a) {
      return a < static_cast<int>(axis_names.size()) && !axis_names[static_cast<size_t>(a)].empty()
                 ? axis_names[static_cast<size_t>(a)]
                 : std::to_string(a);
    };
    std::string s = free ? "free" : "[";
    if (free) return s;
    for (size_t d = 0; d < dims.size(); ++d) s += (d ? ", " : "") + (dims[d] == kReplicated ? std::string("R") : "S" + axis(dims[d]));
    s += "]";
    if (partial) {
      s += "+P{";
      bool first = true;
      for (int a = 0; a < 32; ++a)
        if (partial & (1u << a)) {
          s += (first ? "" : ",") + axis(a);
          first = false;
        }
      s += "}";
    }
    return s;
  }
};

// What a rule is asked: one node's op, attributes and global (unsharded)
// input/output types, the layouts its inputs have (or the user's strategy
// asks for), and the mesh.
struct ShardQuery {
  const OpDef* op = nullptr;
  const Attrs* attrs = nullptr;
  std::vector<TensorMeta> in, out;
  std::vector<TensorLayout> in_layouts;
  std::vector<int64_t> mesh;  // size of each mesh axis
};

// A rule's answer: the layout every input must have (the pass inserts the
// redistribution: all-gather, reduce-scatter, all-reduce, local slice), the
// layout of every output, and, when the op's attributes hold shapes, the
// attributes for the local (per-device) shapes.
struct ShardPlan {
  std::vector<TensorLayout> in;
  std::vector<TensorLayout> out;
  Attrs local_attrs;
  bool attrs_changed = false;
};

}  // namespace spora
