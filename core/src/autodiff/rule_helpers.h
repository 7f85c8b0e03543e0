// The rule helpers, for the gradient rules still registered by name in
// autodiff/bprop_*.cpp (families not yet moved into their op files). The
// helpers themselves live in ops/rule_helpers.h, where family files use them.
#pragma once
#include "autodiff/bprop.h"
#include "ops/rule_helpers.h"

namespace spora::autodiff {

// The same helpers under their old names.
using rules::add;
using rules::add_opt;
using rules::cast;
using rules::div;
using rules::dims_of;
using rules::dt;
using rules::k;
using rules::mul;
using rules::neg;
using rules::product;
using rules::shape_of;
using rules::sub;
using rules::V;
using rules::zeros;

}  // namespace spora::autodiff
