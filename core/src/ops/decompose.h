// Decompositions: an op rebuilt from simpler ops, used when a device's
// plugin has no kernel for it (a vendor plugin with a partial op set still
// runs every model). Written with the graph builder, like gradient rules,
// and registered with the op by its family file (OpDef::decompose).
#pragma once
#include <string>

#include "ir/builder.h"
#include "ir/op.h"

namespace spora {

// The op's decomposition (DecomposeFn, ir/op.h); nullptr when it has none
// or is unknown.
DecomposeFn find_decomposition(const std::string& op);

}  // namespace spora
