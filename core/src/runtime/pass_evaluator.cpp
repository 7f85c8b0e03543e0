// What the runtime gives the passes (passes/evaluator.h, passes/target.h):
// compile-time evaluation of ops on the host's cpu device, for constant
// folding and inlining, and the host target's answers for fusion. Passes
// sit below the runtime and call these through the interfaces only.
#include <cstdlib>
#include <cstring>

#include "passes/evaluator.h"
#include "passes/target.h"
#include "runtime/eager.h"
#include "runtime/plugin_library.h"
#include "support/error.h"

namespace spora {
namespace {

// The first device of the loaded cpu plugin, or null when there is none.
Device* cpu_device() {
  PluginRecord* cpu = PluginRecord::find_ready("cpu");
  return cpu && !cpu->devices().empty() ? cpu->devices()[0].get() : nullptr;
}

class HostEvaluator final : public passes::Evaluator {
 public:
  bool available() const override { return cpu_device() != nullptr; }

  std::optional<std::vector<passes::HostValue>> evaluate(const OpDef& op, const std::vector<passes::HostValue>& inputs,
                                                         const Attrs& attrs, size_t num_outputs,
                                                         std::string* why) const override {
    Device* dev = cpu_device();
    if (!dev) {
      *why = "no cpu device is loaded";
      return std::nullopt;
    }
    std::vector<Tensor> in;
    std::vector<const Tensor*> ptrs;
    in.reserve(inputs.size());
    for (const passes::HostValue& v : inputs)
      in.push_back(tensor_from_host(dev, v.meta.dtype, v.meta.shape, v.bytes->data(), v.bytes->size()));
    for (const Tensor& t : in) ptrs.push_back(&t);
    std::vector<Tensor> out(num_outputs);
    try {
      eager_call(op, dev, ptrs.data(), static_cast<int>(ptrs.size()), attrs, out.data(), static_cast<int>(out.size()));
    } catch (const Error& e) {
      *why = e.what();
      return std::nullopt;
    }
    std::vector<passes::HostValue> result;
    for (const Tensor& t : out) {
      auto bytes = std::make_shared<std::vector<uint8_t>>(t.nbytes());
      tensor_read(t, bytes->data(), bytes->size());
      result.push_back({{t.dtype, t.shape}, std::move(bytes)});
    }
    return result;
  }
};

// The host (cpu) target. gelu's exact form: the cpu plugin's gelu kernel
// computes erf vectorised, its fused_elementwise kernel would call scalar
// erfc per element. Stated here, in the layer that knows devices, until the
// plugin contract lets a plugin declare it.
class HostTarget final : public passes::Target {
 public:
  bool runs_faster_alone(const OpDef& op, const Attrs& attrs) const override {
    if (op.name != "gelu") return false;
    const AttrValue* a = attrs.find("approximate");
    return !a || a->s != "tanh";
  }
  // The cpu plugin's conv2d_act_pool pools the activation in the layout
  // oneDNN's convolution writes (docs/cpu-layouts.md, measured there);
  // SPORA_CONV_POOL_FUSION=0 keeps the two ops (the path before, for A/B
  // comparisons), =infer fuses only where the activation is not kept.
  bool fuses_conv_pool(DType dtype, bool keep_activation) const override {
    if (dtype != SPORA_DTYPE_F32 && dtype != SPORA_DTYPE_BF16) return false;
    const char* env = std::getenv("SPORA_CONV_POOL_FUSION");
    if (env && std::strcmp(env, "0") == 0) return false;
    if (env && std::strcmp(env, "infer") == 0) return !keep_activation;
    return true;
  }
  // The cpu plugin's conv2d_act_pool_grad builds the activation's gradient
  // once in the backward convolutions' blocked layout (f32;
  // docs/cpu-layouts.md). SPORA_CONV_POOL_FUSION=0, =infer and =forward
  // (the forward fusion only, for A/B comparisons) keep the separate ops.
  bool fuses_conv_pool_grad(DType dtype) const override {
    if (dtype != SPORA_DTYPE_F32) return false;
    const char* env = std::getenv("SPORA_CONV_POOL_FUSION");
    return !env || (std::strcmp(env, "0") != 0 && std::strcmp(env, "infer") != 0 && std::strcmp(env, "forward") != 0);
  }
  // The cpu plugin's two kernels pass the kept activation in nChw16c /
  // nChw8c (f32; docs/cpu-layouts.md). SPORA_CONV_POOL_FUSION=unblocked
  // fuses both passes but keeps the activation NCHW (the A/B of this).
  bool blocks_kept_activation(DType dtype) const override {
    const char* env = std::getenv("SPORA_CONV_POOL_FUSION");
    return fuses_conv_pool_grad(dtype) && !(env && std::strcmp(env, "unblocked") == 0);
  }
  // The same kernels pass pooled results and input gradients between
  // layers in that layout (docs/cpu-layouts.md, Chains).
  // SPORA_CONV_POOL_FUSION=unchained keeps those NCHW and the kept
  // activation blocked (this change's A/B); =unblocked keeps all NCHW.
  bool blocks_layer_handoffs(DType dtype) const override {
    const char* env = std::getenv("SPORA_CONV_POOL_FUSION");
    return blocks_kept_activation(dtype) && !(env && std::strcmp(env, "unchained") == 0);
  }
};

const HostEvaluator g_evaluator;
const HostTarget g_target;
const int g_registered = passes::set_default_evaluator(&g_evaluator) + passes::set_default_target(&g_target);

}  // namespace
}  // namespace spora
