// Structural and type checks of a graph. Passes run it between steps in
// debug builds; deserialisation always runs it on untrusted files.
#pragma once
#include "ir/graph.h"

namespace spora::ir {

// Throws Code::kInvalidArgument naming the first broken node and why:
// inputs that are not earlier outputs, op outputs that disagree with
// re-running the op's inference, constants whose bytes do not match their
// type, duplicate input names, bad graph outputs, malformed control flow.
void verify(const Graph& g);

}  // namespace spora::ir
