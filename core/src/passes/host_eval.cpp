#include "passes/host_eval.h"

#include "runtime/eager.h"
#include "runtime/plugin_library.h"
#include "support/error.h"
#include "support/log.h"

namespace spora::passes {

Device* host_device() {
  PluginRecord* cpu = PluginRecord::find_ready("cpu");
  return cpu && !cpu->devices().empty() ? cpu->devices()[0].get() : nullptr;
}

std::optional<std::vector<HostValue>> evaluate_on_host(const ir::Node& n, const std::vector<HostValue>& inputs,
                                                       Device* dev, const char* pass) {
  std::vector<Tensor> in;
  std::vector<const Tensor*> ptrs;
  in.reserve(inputs.size());
  for (const HostValue& v : inputs)
    in.push_back(tensor_from_host(dev, v.meta.dtype, v.meta.shape, v.bytes->data(), v.bytes->size()));
  for (const Tensor& t : in) ptrs.push_back(&t);
  std::vector<Tensor> out(n.outputs.size());
  try {
    eager_call(*n.op, dev, ptrs.data(), static_cast<int>(ptrs.size()), n.attrs, out.data(),
               static_cast<int>(out.size()));
  } catch (const Error& e) {
    logger().debug("[{}] not evaluating {}: {}", pass, n.op->name, e.what());
    return std::nullopt;
  }
  std::vector<HostValue> result;
  for (const Tensor& t : out) {
    auto bytes = std::make_shared<std::vector<uint8_t>>(t.nbytes());
    tensor_read(t, bytes->data(), bytes->size());
    result.push_back({{t.dtype, t.shape}, std::move(bytes)});
  }
  return result;
}

}  // namespace spora::passes
