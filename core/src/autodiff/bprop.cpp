#include "autodiff/bprop.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>

#include "autodiff/bprop_decomposed.h"
#include "ops/rule_helpers.h"
#include "support/error.h"

namespace spora::autodiff {
namespace {

std::vector<void (*)()>& families() {
  static std::vector<void (*)()> v;
  return v;
}

// Rules in op family files differentiate formulas through
// rules::vjp_of (ops/rule_helpers.h), which autodiff provides.
const int g_vjp_provided = rules::set_vjp(&vjp_of);

std::map<std::string, BpropEntry>& table() {
  static std::map<std::string, BpropEntry> t;
  return t;
}

// Rules of the ops that carry their own (OpDef::bprop / differentiable),
// by name: a view of the registry, built once.
std::map<std::string, BpropEntry>& own_rules() {
  static std::map<std::string, BpropEntry> t;
  return t;
}

void ensure_loaded() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (auto fn : families()) fn();
    for (const auto& op : OpRegistry::get().ops()) {
      if (!op->bprop && op->differentiable) continue;
      if (table().count(op->name))
        fail(Code::kInternal, "[{}] has a gradient rule of its own and one registered by name", op->name);
      own_rules()[op->name] = {op->bprop, op->differentiable};
    }
  });
}

}  // namespace

int add_bprop_family(void (*fn)()) {
  families().push_back(fn);
  return 0;
}

void register_bprop(const char* op, BpropFn fn) { table()[op] = {fn, true}; }
void register_not_differentiable(const char* op) { table()[op] = {nullptr, false}; }

const BpropEntry* find_bprop(const std::string& op) {
  ensure_loaded();
  auto own = own_rules().find(op);
  if (own != own_rules().end()) return &own->second;
  auto it = table().find(op);
  return it == table().end() ? nullptr : &it->second;
}

std::vector<std::string> ops_with_bprop_rules() {
  ensure_loaded();
  std::vector<std::string> out;
  for (const auto& [k, v] : table()) out.push_back(k);
  for (const auto& [k, v] : own_rules()) out.push_back(k);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace spora::autodiff
