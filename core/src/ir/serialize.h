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

// The lossless-JSON check of every graph the test suite builds (issue 4):
// when SPORA_CHECK_JSON_ROUNDTRIP is set to anything but "" or "0", writes
// `g` as JSON, reads it back and writes it again, and fails with
// Code::kInternal naming the graph and `where` unless both JSON texts and
// both text forms (ir/printer.h) are identical. Otherwise does nothing.
// Graph compile, run_eager, optimize and grad call it; ctest sets the
// variable for every test.
void check_json_roundtrip(const Graph& g, const char* where);

}  // namespace spora::ir
