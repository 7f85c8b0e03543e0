// Helpers shared by the C++ tests of the IR, passes and executor.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/verifier.h"
#include "passes/pass.h"

namespace spora {

// A shape from a brace list: S({2, 3}).
inline Shape S(std::initializer_list<int64_t> d) {
  std::vector<int64_t> v(d);
  return Shape::from(v.data(), static_cast<int32_t>(v.size()), "test");
}

// The bytes of f32 values, for constants.
inline std::vector<uint8_t> f32(std::initializer_list<float> v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), std::data(v), b.size());
  return b;
}

// Runs only the named pass (of any level, or run only on request) and
// verifies the result.
inline bool run(const char* name, ir::Graph& g) {
  const bool changed = passes::run_pass(g, name).changed;
  ir::verify(g);
  return changed;
}

inline size_t count_ops(const ir::Graph& g, const std::string& op) {
  size_t n = 0;
  for (const auto& node : g.nodes()) n += node.kind == ir::NodeKind::kApply && node.op->name == op;
  return n;
}

}  // namespace spora
