// Decompositions: an op rebuilt from simpler ops, used when a device's
// plugin has no kernel for it (a vendor plugin with a partial op set still
// runs every model). Written with the graph builder, like gradient rules.
#pragma once
#include <vector>

#include "ir/builder.h"
#include "ir/op.h"

namespace spora {

// The op's decomposition (DecomposeFn, ir/op.h): its own
// (OpDef::decompose, registered by its family file), else one registered by
// name below (families not yet moved); nullptr when it has none.
DecomposeFn find_decomposition(const std::string& op);
// For families not yet moved into their op files.
void register_decomposition(const char* op, DecomposeFn fn);

int add_decomposition_family(void (*fn)());
#define SPORA_DECOMPOSITIONS(fn) static const int spora_decomp_family_##fn = ::spora::add_decomposition_family(fn)

}  // namespace spora
