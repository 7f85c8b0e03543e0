// A validated, parsed kernel description shared by the in-tree plugins, and
// the reference implementations that run it on host-addressable memory.
//
// The host has already inferred output shapes and normalised attributes
// (see core/src/ops): binary inputs are padded to the output's rank, matmul
// operands to equal rank >= 2, reduction axes are sorted and non-negative and
// the output keeps reduced dims as 1, softmax's axis is non-negative,
// transpose's perm is explicit. Plans re-check what memory safety depends on.
#pragma once
#include <spora/plugin.h>

#include <cstdint>
#include <memory>
#include <string>

namespace spora::plugin {

enum class OpKind : int32_t {
  // unary elementwise
  kNeg, kExp, kLog, kTanh, kRelu, kSigmoid,
  // binary elementwise
  kAdd, kSub, kMul, kDiv,
  // others
  kMatmul, kSum, kMean, kTranspose, kSoftmax, kCopy,
};

struct Shape {
  int32_t rank = 0;
  int64_t dims[SPORA_MAX_RANK] = {};
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= dims[i];
    return n;
  }
};

struct KernelPlan {
  OpKind kind{};
  int32_t dtype = SPORA_DTYPE_INVALID;
  int32_t num_inputs = 0;
  Shape in[2];
  Shape out;
  bool transpose_a = false, transpose_b = false;  // matmul
  int32_t axis = 0;                               // softmax
  bool reduce_axis[SPORA_MAX_RANK] = {};          // sum, mean
  int64_t perm[SPORA_MAX_RANK] = {};              // transpose
};

// The op names plan_kernel accepts, NUL-terminated (static storage).
const char* const* reference_op_names();

// Parses and validates `desc`. Returns NULL and fills `out`, or an error
// (SPORA_PLUGIN_UNIMPLEMENTED for an op or dtype it has no kernel for,
// SPORA_PLUGIN_INVALID_ARGUMENT for inconsistent shapes).
spora_plugin_error_t* plan_kernel(const spora_kernel_desc_t* desc, KernelPlan* out);

// Runs a plan on host-addressable buffers, on the calling thread.
void run_reference(const KernelPlan& plan, const void* const* inputs, void* const* outputs);

// The individual reference kernels (run_reference dispatches to these).
void ref_unary(const KernelPlan& p, const void* x, void* y);
void ref_binary(const KernelPlan& p, const void* a, const void* b, void* y);
void ref_matmul(const KernelPlan& p, const void* a, const void* b, void* y);
void ref_reduce(const KernelPlan& p, const void* x, void* y);
void ref_transpose(const KernelPlan& p, const void* x, void* y);
void ref_softmax(const KernelPlan& p, const void* x, void* y);

size_t dtype_size(int32_t dtype);

}  // namespace spora::plugin
