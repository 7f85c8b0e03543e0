// Op attributes: named, typed values (the C API's spora_attrs_t).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace spora {

// Values equal spora_attr_type_t of plugin.h.
enum class AttrType : int32_t { kInt = 1, kFloat = 2, kBool = 3, kInts = 4, kFloats = 5, kString = 6 };

const char* attr_type_name(AttrType t);

struct AttrValue {
  AttrType type = AttrType::kInt;
  int64_t i = 0;
  double f = 0;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::string s;

  static AttrValue of_int(int64_t v) { AttrValue a; a.type = AttrType::kInt; a.i = v; return a; }
  static AttrValue of_float(double v) { AttrValue a; a.type = AttrType::kFloat; a.f = v; return a; }
  static AttrValue of_bool(bool v) { AttrValue a; a.type = AttrType::kBool; a.i = v ? 1 : 0; return a; }
  static AttrValue of_ints(std::vector<int64_t> v) { AttrValue a; a.type = AttrType::kInts; a.ints = std::move(v); return a; }
  static AttrValue of_floats(std::vector<double> v) { AttrValue a; a.type = AttrType::kFloats; a.floats = std::move(v); return a; }
  static AttrValue of_string(std::string v) { AttrValue a; a.type = AttrType::kString; a.s = std::move(v); return a; }

  std::string str() const;  // "[1, 2]", "true", "0.5", "\"same\""
  bool operator==(const AttrValue& o) const;
};

// A small map kept sorted by name (ops have a handful of attributes, so a
// vector wins). Sorted, so that the order attributes are set in changes
// nothing: items(), hash(), ==, the IR text and the JSON form.
class Attrs {
 public:
  void set(std::string_view name, AttrValue v);
  const AttrValue* find(std::string_view name) const;
  const std::vector<std::pair<std::string, AttrValue>>& items() const { return items_; }
  bool empty() const { return items_.empty(); }
  // Same names with equal values (AttrValue's ==: NaN equals NaN).
  bool operator==(const Attrs& o) const;
  bool operator!=(const Attrs& o) const { return !(*this == o); }

  // Typed getters for attributes an op's schema guarantees exist.
  int64_t get_int(std::string_view name) const;
  bool get_bool(std::string_view name) const;
  double get_float(std::string_view name) const;
  const std::vector<int64_t>& get_ints(std::string_view name) const;

  // Stable hash of names and values, for kernel caches.
  uint64_t hash() const;

 private:
  std::vector<std::pair<std::string, AttrValue>> items_;
};

}  // namespace spora
