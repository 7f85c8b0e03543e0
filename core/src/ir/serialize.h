// Lossless JSON (de)serialisation of graphs (nlohmann/json). Constants are
// stored inline as base64. Loading treats the text as untrusted: every field
// is type-checked, sizes are bounded before allocation, and the result is
// verified.
#pragma once
#include <string>

#include "ir/graph.h"

namespace spora::ir {

std::string to_json(const Graph& g, int indent = -1);
// Throws Code::kInvalidArgument naming what is wrong ("[graph json] node 3:
// unknown op 'frob'").
Graph from_json(const std::string& text);

}  // namespace spora::ir
