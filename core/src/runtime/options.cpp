#include "runtime/options.h"

#include <atomic>

#include "support/error.h"

namespace spora {
namespace {

const char* const kPrecisions[] = {"highest", "high", "medium"};
std::atomic<int> g_matmul_precision{0};  // index into kPrecisions

bool matmul_family(const std::string& op) {
  return op == "matmul" || op == "linear" || op == "linear_act" || op == "linear_add_act";
}

}  // namespace

void set_option(const std::string& key, const std::string& value) {
  if (key != "matmul_precision")
    fail(Code::kInvalidArgument, "set_option: unknown option '{}' (known: matmul_precision)", key);
  for (int i = 0; i < 3; ++i)
    if (value == kPrecisions[i]) {
      g_matmul_precision.store(i, std::memory_order_relaxed);
      return;
    }
  fail(Code::kInvalidArgument, "set_option: matmul_precision must be \"highest\", \"high\" or \"medium\", got \"{}\"",
       value);
}

const char* get_option(const std::string& key) {
  if (key != "matmul_precision")
    fail(Code::kInvalidArgument, "get_option: unknown option '{}' (known: matmul_precision)", key);
  return kPrecisions[g_matmul_precision.load(std::memory_order_relaxed)];
}

const OpCall& with_kernel_options(const OpDef& op, const OpCall& call, std::unique_ptr<OpCall>* scratch) {
  const int p = g_matmul_precision.load(std::memory_order_relaxed);
  if (p == 0 || !matmul_family(op.name)) return call;
  *scratch = std::make_unique<OpCall>(call);
  OpCall& c = **scratch;
  c.attrs.set("matmul_precision", AttrValue::of_string(kPrecisions[p]));
  return c;
}

}  // namespace spora
