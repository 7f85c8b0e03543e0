// Process-wide options that change how kernels are planned
// (spora_set_option). Each is read where the core builds a kernel
// descriptor, so it applies to kernels planned after the change; kernels
// already planned (cached eager kernels, compiled executables) keep theirs.
#pragma once
#include <memory>
#include <string>

#include "ir/op.h"

namespace spora {

// Sets option `key` to `value`; an unknown key or value is an
// InvalidArgument error naming the accepted ones.
//   matmul_precision: "highest" (default: f32 matmuls in exact FP32),
//   "high" (TF32 allowed), "medium" (bf16 or TF32 allowed).
//   conv_precision: "highest" (default: f32 convolutions in exact FP32),
//   "high" (TF32 allowed).
void set_option(const std::string& key, const std::string& value);
// The option's current value (its default when never set).
const char* get_option(const std::string& key);

// The call as the kernel sees it: matmul, linear, linear_act and
// linear_add_act carry the attribute "matmul_precision" when it is not
// "highest", and conv2d, conv2d_bias, conv2d_act, conv2d_add_act,
// conv2d_grad_input, conv2d_grad_weight and conv2d_transpose carry
// "conv_precision" when it is not "highest" (so the kernel cache keys them,
// and descriptors stay unchanged in the default case). Returns `call`
// itself, or *scratch holding the copy (left null otherwise: the eager path
// pays two atomic loads). A pointer, not a std::optional<OpCall>: GCC zeroes
// an empty optional's 15 KB of storage, which was a memset on every eager op.
const OpCall& with_kernel_options(const OpDef& op, const OpCall& call, std::unique_ptr<OpCall>* scratch);

}  // namespace spora
