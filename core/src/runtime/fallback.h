// What eager dispatch does when a device has no kernel for an op: run the
// op's decomposition on the same device, or else run it on the cpu device
// with copies in and out.
#pragma once
#include <string>

#include "ir/op.h"
#include "runtime/tensor.h"

namespace spora {

// `why` is the plugin's reason for having no kernel, reported if nothing
// else works.
void eager_fallback(const OpDef& op, Device* device, const Tensor* const* inputs, int num_inputs, const OpCall& call,
                    Tensor* outputs, const std::string& why);

}  // namespace spora
