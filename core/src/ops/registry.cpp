#include "ops/registry.h"

#include <algorithm>

#include "support/error.h"

namespace spora {

std::string OpDef::schema() const {
  std::vector<std::string> types;
  for (DType t : dtypes) types.push_back(dtype_name(t));
  const std::string tlist = fmt::format("{}", fmt::join(types, "|"));
  std::vector<std::string> ins;
  for (const auto& i : inputs) ins.push_back(i + ": " + tlist);
  std::string s = fmt::format("{}({}) -> ({})", name, fmt::join(ins, ", "), fmt::join(outputs, ", "));
  if (!attrs.empty()) {
    std::vector<std::string> as;
    for (const auto& a : attrs)
      as.push_back(fmt::format("{}: {}{}", a.name, attr_type_name(a.type),
                               a.required ? "" : " = " + a.default_value.str()));
    s += fmt::format(" attrs: {}", fmt::join(as, ", "));
  }
  return s;
}

OpRegistry::OpRegistry() {
  register_elementwise_ops(*this);
  register_matmul_ops(*this);
  register_reduce_ops(*this);
  register_layout_ops(*this);
  register_softmax_ops(*this);
  std::sort(ops_.begin(), ops_.end(), [](const auto& a, const auto& b) { return a->name < b->name; });
}

const OpRegistry& OpRegistry::get() {
  static const OpRegistry r;
  return r;
}

void OpRegistry::add(OpDef def) {
  for (const auto& o : ops_)
    if (o->name == def.name) fail(Code::kInternal, "[ops] op '{}' registered twice", def.name);
  ops_.push_back(std::make_unique<OpDef>(std::move(def)));
}

const OpDef* OpRegistry::find(std::string_view name) const {
  auto it = std::lower_bound(ops_.begin(), ops_.end(), name,
                             [](const auto& op, std::string_view n) { return op->name < n; });
  return it != ops_.end() && (*it)->name == name ? it->get() : nullptr;
}

namespace {

// Accepts a value for `spec`, converting where it is lossless (int -> float,
// int 0/1 -> bool).
AttrValue coerce(const OpDef& op, const AttrSpec& spec, const AttrValue& v) {
  if (v.type == spec.type) return v;
  if (spec.type == AttrType::kFloat && v.type == AttrType::kInt) return AttrValue::of_float(static_cast<double>(v.i));
  if (spec.type == AttrType::kBool && v.type == AttrType::kInt && (v.i == 0 || v.i == 1)) return AttrValue::of_bool(v.i);
  if (spec.type == AttrType::kInts && v.type == AttrType::kInt) return AttrValue::of_ints({v.i});
  if (spec.type == AttrType::kFloats && v.type == AttrType::kInts)
    return AttrValue::of_floats(std::vector<double>(v.ints.begin(), v.ints.end()));
  fail(Code::kInvalidArgument, "[{}] attribute '{}' must be {}, got {} {}", op.name, spec.name,
       attr_type_name(spec.type), attr_type_name(v.type), v.str());
}

}  // namespace

void infer_call(const OpDef& op, const TensorMeta* inputs, int num_inputs, const Attrs& attrs, OpCall& call) {
  if (num_inputs != static_cast<int>(op.inputs.size()))
    fail(Code::kInvalidArgument, "[{}] takes {} input(s), got {}", op.name, op.inputs.size(), num_inputs);
  for (int i = 0; i < num_inputs; ++i) {
    const DType t = inputs[i].dtype;
    if (std::find(op.dtypes.begin(), op.dtypes.end(), t) == op.dtypes.end()) {
      std::vector<std::string> ok;
      for (DType d : op.dtypes) ok.push_back(dtype_name(d));
      fail(Code::kInvalidArgument, "[{}] input '{}' has dtype {}, which the op does not support (supported: {})",
           op.name, op.inputs[i], dtype_name(t), fmt::join(ok, ", "));
    }
    if (t != inputs[0].dtype)
      fail(Code::kInvalidArgument, "[{}] inputs have different dtypes ({} and {}); cast one first", op.name,
           dtype_name(inputs[0].dtype), dtype_name(t));
  }
  // Attributes: reject unknown names, check types, fill defaults.
  call.attrs = Attrs();
  for (const auto& [name, value] : attrs.items()) {
    auto spec = std::find_if(op.attrs.begin(), op.attrs.end(), [&](const AttrSpec& s) { return s.name == name; });
    if (spec == op.attrs.end()) {
      std::vector<std::string> known;
      for (const auto& s : op.attrs) known.push_back(s.name);
      fail(Code::kInvalidArgument, "[{}] unknown attribute '{}' (the op takes: {})", op.name, name,
           known.empty() ? std::string("none") : fmt::format("{}", fmt::join(known, ", ")));
    }
    call.attrs.set(name, coerce(op, *spec, value));
  }
  for (const auto& spec : op.attrs) {
    if (call.attrs.find(spec.name)) continue;
    if (spec.required) fail(Code::kInvalidArgument, "[{}] attribute '{}' ({}) is required", op.name, spec.name,
                            attr_type_name(spec.type));
    call.attrs.set(spec.name, spec.default_value);
  }
  call.num_inputs = num_inputs;
  for (int i = 0; i < num_inputs; ++i) call.in[i] = inputs[i];
  call.num_outputs = static_cast<int>(op.outputs.size());
  call.view = false;
  op.infer(op, inputs, call);
}

}  // namespace spora
