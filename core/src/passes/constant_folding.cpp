// Constant folding: an op whose inputs are all constants is evaluated once,
// on the host's cpu device, and replaced by a constant. Outputs above a size
// limit stay as ops, so folding never bloats a model file.
#include <cstring>

#include "ir/rewrite.h"
#include "passes/pass.h"
#include "runtime/eager.h"
#include "runtime/plugin_library.h"
#include "support/error.h"
#include "support/log.h"

namespace spora::passes {
namespace {

constexpr size_t kMaxFoldedBytes = 64 * 1024;

Device* host() {
  PluginRecord* cpu = PluginRecord::find_ready("cpu");
  return cpu && !cpu->devices().empty() ? cpu->devices()[0].get() : nullptr;
}

bool foldable(const ir::Graph& g, const ir::Node& n) {
  if (n.kind != ir::NodeKind::kApply) return false;
  for (const ir::Value& v : n.inputs)
    if (g.node(v.node).kind != ir::NodeKind::kConstant) return false;
  for (const TensorMeta& m : n.outputs)
    if (static_cast<size_t>(m.shape.numel()) * dtype_size(m.dtype) > kMaxFoldedBytes) return false;
  return true;
}

bool fold(ir::Graph& g) {
  bool any = false;
  for (const ir::Node& n : g.nodes()) any = any || foldable(g, n);
  if (!any) return false;
  Device* dev = host();
  if (!dev) return false;
  ir::Rewriter rw(g);
  bool changed = false;
  for (size_t id = 0; id < g.nodes().size(); ++id) {
    const ir::Node& n = g.nodes()[id];
    if (!foldable(g, n)) {
      rw.copy(static_cast<int32_t>(id));
      continue;
    }
    std::vector<Tensor> in;
    std::vector<const Tensor*> ptrs;
    for (const ir::Value& v : n.inputs) {
      const ir::Node& c = g.node(v.node);
      in.push_back(tensor_from_host(dev, c.outputs[0].dtype, c.outputs[0].shape, c.data->data(), c.data->size()));
    }
    for (const Tensor& t : in) ptrs.push_back(&t);
    std::vector<Tensor> out(n.outputs.size());
    try {
      eager_call(*n.op, dev, ptrs.data(), static_cast<int>(ptrs.size()), n.attrs, out.data(),
                 static_cast<int>(out.size()));
    } catch (const Error& e) {
      // Leave it to run time, where the error will name the node's source.
      logger().debug("[constant_folding] not folding {}: {}", n.op->name, e.what());
      rw.copy(static_cast<int32_t>(id));
      continue;
    }
    for (size_t o = 0; o < out.size(); ++o) {
      std::vector<uint8_t> bytes(out[o].nbytes());
      tensor_read(out[o], bytes.data(), bytes.size());
      rw.set({static_cast<int32_t>(id), static_cast<int32_t>(o)},
             rw.out().add_constant(out[o].dtype, out[o].shape, std::move(bytes), n.loc));
    }
    changed = true;
  }
  if (changed) g = rw.finish();
  return changed;
}

}  // namespace
SPORA_PASS("constant_folding", 1, 300, fold);
}  // namespace spora::passes
