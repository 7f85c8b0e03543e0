#include "ir/op.h"

#include <algorithm>

#include "support/error.h"

namespace spora {

std::string OpDef::schema() const {
  std::vector<std::string> types;
  for (DType t : dtypes) types.push_back(dtype_name(t));
  const std::string tlist = fmt::format("{}", fmt::join(types, "|"));
  std::vector<std::string> ins;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const bool typed = typed_inputs.empty() ||
                       std::find(typed_inputs.begin(), typed_inputs.end(), static_cast<int>(i)) != typed_inputs.end();
    const bool repeats = variadic && i + 1 == inputs.size();
    ins.push_back(inputs[i] + (repeats ? "..." : "") + (typed ? ": " + tlist : ""));
  }
  std::string s = fmt::format("{}({}) -> ({}{})", name, fmt::join(ins, ", "), fmt::join(outputs, ", "),
                              dynamic_outputs ? "..." : "");
  if (!attrs.empty()) {
    std::vector<std::string> as;
    for (const auto& a : attrs)
      as.push_back(fmt::format("{}: {}{}", a.name, attr_type_name(a.type),
                               a.required ? "" : " = " + a.default_value.str()));
    s += fmt::format(" attrs: {}", fmt::join(as, ", "));
  }
  return s;
}

namespace {
std::vector<void (*)(OpRegistry&)>& families() {
  static std::vector<void (*)(OpRegistry&)> v;
  return v;
}
}  // namespace

int add_op_family(void (*fn)(OpRegistry&)) {
  families().push_back(fn);
  return 0;
}

Cost OpDef::estimate(const OpCall& call) const {
  if (cost) return cost(call);
  Cost c;
  for (int i = 0; i < call.num_inputs; ++i)
    c.bytes += static_cast<double>(call.in[i].shape.numel()) * static_cast<double>(dtype_size(call.in[i].dtype));
  for (int i = 0; i < call.num_outputs; ++i) {
    const double n = static_cast<double>(call.out[i].shape.numel());
    c.flops += n;
    c.bytes += n * static_cast<double>(dtype_size(call.out[i].dtype));
  }
  return c;
}

OpRegistry::OpRegistry() {
  for (auto fn : families()) fn(*this);
  std::sort(ops_.begin(), ops_.end(), [](const auto& a, const auto& b) { return a->name < b->name; });
  for (const auto& op : ops_) by_name_.emplace(op->name, op.get());
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
  auto it = by_name_.find(name);
  return it != by_name_.end() ? it->second : nullptr;
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
  const int fixed = static_cast<int>(op.inputs.size());
  if (op.variadic) {
    if (num_inputs < fixed || num_inputs > kMaxOpInputs)
      fail(Code::kInvalidArgument, "[{}] takes {} to {} inputs, got {}", op.name, fixed, kMaxOpInputs, num_inputs);
  } else if (num_inputs != fixed) {
    fail(Code::kInvalidArgument, "[{}] takes {} input(s), got {}", op.name, fixed, num_inputs);
  }
  int first_typed = -1;
  for (int i = 0; i < num_inputs; ++i) {
    const int slot = i < fixed ? i : fixed - 1;
    if (!op.typed_inputs.empty() &&
        std::find(op.typed_inputs.begin(), op.typed_inputs.end(), slot) == op.typed_inputs.end())
      continue;
    const DType t = inputs[i].dtype;
    const std::string& input_name = op.inputs[static_cast<size_t>(slot)];
    if (std::find(op.dtypes.begin(), op.dtypes.end(), t) == op.dtypes.end()) {
      std::vector<std::string> ok;
      for (DType d : op.dtypes) ok.push_back(dtype_name(d));
      fail(Code::kInvalidArgument, "[{}] input '{}' has dtype {}, which the op does not support (supported: {})",
           op.name, input_name, dtype_name(t), fmt::join(ok, ", "));
    }
    if (first_typed < 0) first_typed = i;
    if (t != inputs[first_typed].dtype)
      fail(Code::kInvalidArgument, "[{}] inputs have different dtypes ({} and {}); cast one first", op.name,
           dtype_name(inputs[first_typed].dtype), dtype_name(t));
  }
  // Attributes: reject unknown names, check types, fill defaults.
  call.attrs = Attrs();
  for (const auto& [name, value] : attrs.items()) {
    if (name == kStrategyAttr) {  // the SPMD pass's, not the op's (op.h)
      if (value.type != AttrType::kString)
        fail(Code::kInvalidArgument, "[{}] attribute 'strategy' must be a string, got {}", op.name, value.str());
      continue;
    }
    if (name == kRecomputeAttr) {  // the recompute pass's, not the op's (op.h)
      if (value.type != AttrType::kInt && value.type != AttrType::kBool)
        fail(Code::kInvalidArgument, "[{}] attribute 'recompute' must be an int or a bool, got {}", op.name,
             value.str());
      continue;
    }
    auto spec = std::find_if(op.attrs.begin(), op.attrs.end(), [&n = name](const AttrSpec& s) { return s.name == n; });
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
  call.num_outputs = op.dynamic_outputs ? 0 : static_cast<int>(op.outputs.size());
  call.view = false;
  op.infer(op, inputs, call);
  if (call.num_outputs < 0 || call.num_outputs > kMaxOpOutputs)
    fail(Code::kInvalidArgument, "[{}] would produce {} outputs; at most {} are supported", op.name, call.num_outputs,
         kMaxOpOutputs);
}

}  // namespace spora
