#include "ops/decompose.h"

namespace spora {

DecomposeFn find_decomposition(const std::string& op) {
  const OpDef* d = OpRegistry::get().find(op);
  return d ? d->decompose : nullptr;
}

}  // namespace spora
