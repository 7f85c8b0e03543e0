// Decompositions: an op rebuilt from simpler ops, used when a device's
// plugin has no kernel for it (a vendor plugin with a partial op set still
// runs every model). Written with the graph builder, like gradient rules.
#pragma once
#include <vector>

#include "ir/builder.h"

namespace spora {

// Returns the op's outputs computed from `x` (the op's inputs in the
// builder's graph) and its validated attributes.
using DecomposeFn = std::vector<ir::Value> (*)(ir::Builder& b, const std::vector<ir::Value>& x, const Attrs& attrs);

DecomposeFn find_decomposition(const std::string& op);
void register_decomposition(const char* op, DecomposeFn fn);

int add_decomposition_family(void (*fn)());
#define SPORA_DECOMPOSITIONS(fn) static const int spora_decomp_family_##fn = ::spora::add_decomposition_family(fn)

}  // namespace spora
