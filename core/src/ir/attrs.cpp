#include "ir/attrs.h"

#include <algorithm>
#include <cstring>
#include <functional>

#include "support/error.h"

namespace spora {

const char* attr_type_name(AttrType t) {
  switch (t) {
    case AttrType::kInt: return "int";
    case AttrType::kFloat: return "float";
    case AttrType::kBool: return "bool";
    case AttrType::kInts: return "ints";
    case AttrType::kFloats: return "floats";
    case AttrType::kString: return "string";
  }
  return "unknown";
}

std::string AttrValue::str() const {
  switch (type) {
    case AttrType::kInt: return std::to_string(i);
    case AttrType::kFloat: return fmt::format("{}", f);
    case AttrType::kBool: return i ? "true" : "false";
    case AttrType::kInts: return fmt::format("[{}]", fmt::join(ints, ", "));
    case AttrType::kFloats: return fmt::format("[{}]", fmt::join(floats, ", "));
    case AttrType::kString: return "\"" + s + "\"";
  }
  return "?";
}

bool AttrValue::operator==(const AttrValue& o) const {
  return type == o.type && i == o.i && (f == o.f || (f != f && o.f != o.f)) && ints == o.ints &&
         floats == o.floats && s == o.s;
}

void Attrs::set(std::string_view name, AttrValue v) {
  // Kept sorted by name: the order attributes were set in must not make two
  // equal sets differ (kernel caches, CSE, the text and JSON forms).
  auto it = std::lower_bound(items_.begin(), items_.end(), name,
                             [](const std::pair<std::string, AttrValue>& item, std::string_view n) {
                               return std::string_view(item.first) < n;
                             });
  if (it != items_.end() && it->first == name) {
    it->second = std::move(v);
    return;
  }
  items_.emplace(it, std::string(name), std::move(v));
}

const AttrValue* Attrs::find(std::string_view name) const {
  for (const auto& [n, val] : items_)
    if (n == name) return &val;
  return nullptr;
}

bool Attrs::operator==(const Attrs& o) const {
  if (items_.size() != o.items_.size()) return false;
  for (size_t k = 0; k < items_.size(); ++k)
    if (items_[k].first != o.items_[k].first || !(items_[k].second == o.items_[k].second)) return false;
  return true;
}

namespace {
const AttrValue& must(const Attrs& a, std::string_view name) {
  const AttrValue* v = a.find(name);
  if (!v) fail(Code::kInternal, "[attrs] missing attribute '{}' after schema defaults", name);
  return *v;
}
}  // namespace

int64_t Attrs::get_int(std::string_view name) const { return must(*this, name).i; }
bool Attrs::get_bool(std::string_view name) const { return must(*this, name).i != 0; }
double Attrs::get_float(std::string_view name) const { return must(*this, name).f; }
const std::vector<int64_t>& Attrs::get_ints(std::string_view name) const { return must(*this, name).ints; }

uint64_t Attrs::hash() const {
  // FNV-1a over a canonical byte rendering.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t k = 0; k < n; ++k) h = (h ^ b[k]) * 1099511628211ull;
  };
  for (const auto& [n, v] : items_) {
    mix(n.data(), n.size());
    mix(&v.type, sizeof(v.type));
    mix(&v.i, sizeof(v.i));
    mix(&v.f, sizeof(v.f));
    if (!v.ints.empty()) mix(v.ints.data(), v.ints.size() * sizeof(int64_t));
    if (!v.floats.empty()) mix(v.floats.data(), v.floats.size() * sizeof(double));
    mix(v.s.data(), v.s.size());
  }
  return h;
}

}  // namespace spora
