#include "autodiff/bprop.h"

namespace spora::autodiff {

std::optional<BpropEntry> find_bprop(const OpDef& op) {
  if (!op.bprop && op.differentiable) return std::nullopt;
  return BpropEntry{op.bprop, op.differentiable};
}

std::optional<BpropEntry> find_bprop(const std::string& op) {
  const OpDef* def = OpRegistry::get().find(op);
  if (!def) return std::nullopt;
  return find_bprop(*def);
}

}  // namespace spora::autodiff
