#include "runtime/options.h"

#include <atomic>

#include "support/error.h"

namespace spora {
namespace {

const char* const kPrecisions[] = {"highest", "high", "medium"};
std::atomic<int> g_matmul_precision{0};  // index into kPrecisions
// conv_precision takes "highest" and "high" only: cuDNN has no bf16 mode
// for f32 convolutions that would give "medium" a meaning of its own.
std::atomic<int> g_conv_precision{0};  // index into kPrecisions (0 or 1)

bool matmul_family(const std::string& op) {
  return op == "matmul" || op == "linear" || op == "linear_act" || op == "linear_add_act";
}

// The convolutions a device plans itself. conv2d_act_pool(_grad) are left
// out: devices without them run their parts (conv2d_act, ...), which carry
// the attribute on their own.
bool conv_family(const std::string& op) {
  return op == "conv2d" || op == "conv2d_bias" || op == "conv2d_act" || op == "conv2d_add_act" ||
         op == "conv2d_grad_input" || op == "conv2d_grad_weight" || op == "conv2d_transpose";
}

[[noreturn]] void unknown(const char* what, const std::string& key) {
  fail(Code::kInvalidArgument, "{}: unknown option '{}' (known: matmul_precision, conv_precision)", what, key);
}

}  // namespace

void set_option(const std::string& key, const std::string& value) {
  if (key == "matmul_precision") {
    for (int i = 0; i < 3; ++i)
      if (value == kPrecisions[i]) {
        g_matmul_precision.store(i, std::memory_order_relaxed);
        return;
      }
    fail(Code::kInvalidArgument, "set_option: matmul_precision must be \"highest\", \"high\" or \"medium\", got \"{}\"",
         value);
  }
  if (key == "conv_precision") {
    for (int i = 0; i < 2; ++i)
      if (value == kPrecisions[i]) {
        g_conv_precision.store(i, std::memory_order_relaxed);
        return;
      }
    fail(Code::kInvalidArgument, "set_option: conv_precision must be \"highest\" or \"high\", got \"{}\"", value);
  }
  unknown("set_option", key);
}

const char* get_option(const std::string& key) {
  if (key == "matmul_precision") return kPrecisions[g_matmul_precision.load(std::memory_order_relaxed)];
  if (key == "conv_precision") return kPrecisions[g_conv_precision.load(std::memory_order_relaxed)];
  unknown("get_option", key);
}

const OpCall& with_kernel_options(const OpDef& op, const OpCall& call, std::unique_ptr<OpCall>* scratch) {
  const char* attr = nullptr;
  int p = g_matmul_precision.load(std::memory_order_relaxed);
  if (p != 0 && matmul_family(op.name)) {
    attr = "matmul_precision";
  } else {
    p = g_conv_precision.load(std::memory_order_relaxed);
    if (p != 0 && conv_family(op.name)) attr = "conv_precision";
  }
  if (!attr) return call;
  *scratch = std::make_unique<OpCall>(call);
  OpCall& c = **scratch;
  c.attrs.set(attr, AttrValue::of_string(kPrecisions[p]));
  return c;
}

}  // namespace spora
