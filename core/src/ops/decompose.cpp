#include "ops/decompose.h"

#include <map>
#include <mutex>

namespace spora {
namespace {

std::vector<void (*)()>& families() {
  static std::vector<void (*)()> v;
  return v;
}
std::map<std::string, DecomposeFn>& table() {
  static std::map<std::string, DecomposeFn> t;
  return t;
}

}  // namespace

int add_decomposition_family(void (*fn)()) {
  families().push_back(fn);
  return 0;
}

void register_decomposition(const char* op, DecomposeFn fn) { table()[op] = fn; }

DecomposeFn find_decomposition(const std::string& op) {
  if (const OpDef* d = OpRegistry::get().find(op); d && d->decompose) return d->decompose;
  static std::once_flag once;
  std::call_once(once, [] {
    for (auto fn : families()) fn();
  });
  auto it = table().find(op);
  return it == table().end() ? nullptr : it->second;
}

}  // namespace spora
