// Text and Graphviz renderings of a graph, for humans (SPORA_DUMP_IR, error
// reports, tests of passes).
#pragma once
#include <string>

#include "ir/graph.h"

namespace spora::ir {

// graph @main(%0: f32[2,3] input "x", ...) {
//   %2 = add(%0, %1) : f32[2,3]   # model.py:3
//   return %2
// }
std::string to_text(const Graph& g);
std::string to_dot(const Graph& g);

}  // namespace spora::ir
