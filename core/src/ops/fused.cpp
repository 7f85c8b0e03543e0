// fused_elementwise: a chain (or tree, or DAG) of elementwise ops evaluated
// in one pass over memory. The elementwise_fusion pass makes it; a plugin
// with a kernel for it (plugins/common/kernels/fused.cpp, the cpu plugin's
// cpu_fused.cpp) reads every input and writes the output once, and every
// other device runs its decomposition: the component ops, rebuilt from the
// program (ops/fused.h has the grammar).
//
// Inputs: 1..16 tensors broadcasting like numpy (padded with leading 1s to
// the output's rank for kernels, as binary ops are). Float inputs share one
// dtype T (f32, f64, f16, bf16), which is the output's; bool inputs feed
// logical ops and where's condition. Values inside the program are T or
// bool; constants are T. Every input and every instruction but the last
// must be used, so the output's shape is the broadcast of the inputs'.
//
// Inference validates each instruction with its own op's inference (dtype
// rules, attributes), so a program accepts exactly what the ops accept,
// and leaves the program in canonical form (one kernel cache entry per
// program, CSE-able).
//
// Kernels may keep intermediates in f32 for f16/bf16 (rounding once at the
// end, where the component ops round after every op).
#include "ops/fused.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "ops/rule_helpers.h"
#include "support/error.h"

namespace spora::fused {
namespace {

constexpr DType F32 = SPORA_DTYPE_F32, F64 = SPORA_DTYPE_F64, F16 = SPORA_DTYPE_F16, BF16 = SPORA_DTYPE_BF16,
                BOOL = SPORA_DTYPE_BOOL;

[[noreturn]] void program_error(const std::string& what) {
  throw Error(Code::kInvalidArgument, "[" + std::string(kOpName) + "] " + what);
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\n\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\n\r") - b + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  return out;
}

std::vector<std::string> tokens(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    size_t j = i;
    while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j]))) ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

bool parse_number(const std::string& s, double* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return false;
  // Overflow to inf is a number the user wrote too big: refuse it rather
  // than guess (inf itself is spelt "inf").
  if (errno == ERANGE && std::isinf(v)) return false;
  *out = v;
  return true;
}

// "in3" / "t12": the index after `prefix`, or -1.
int parse_index(const std::string& tok, const char* prefix) {
  const size_t n = std::char_traits<char>::length(prefix);
  if (tok.size() <= n || tok.compare(0, n, prefix) != 0 || tok.size() - n > 6) return -1;
  int v = 0;
  for (size_t i = n; i < tok.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(tok[i]))) return -1;
    v = v * 10 + (tok[i] - '0');
  }
  return v;
}

std::string number_text(double v) { return fmt::format("{}", v); }

std::string value_text(const AttrValue& v) {
  switch (v.type) {
    case AttrType::kFloat: return number_text(v.f);
    case AttrType::kString: return v.s;
    case AttrType::kBool: return v.i ? "true" : "false";
    case AttrType::kInt: return std::to_string(v.i);
    default: return v.str();
  }
}

std::string instr_text(const Instr& in) {
  std::string s;
  for (const Operand& a : in.args) {
    switch (a.kind) {
      case Operand::kInput: s += "in" + std::to_string(a.index); break;
      case Operand::kTemp: s += "t" + std::to_string(a.index); break;
      case Operand::kConst: s += "c:" + number_text(a.value); break;
    }
    s += ' ';
  }
  s += in.op ? in.op->name : "?";
  for (const auto& [name, v] : in.attrs.items()) {
    if (in.op) {
      auto spec = std::find_if(in.op->attrs.begin(), in.op->attrs.end(),
                               [&n = name](const AttrSpec& sp) { return sp.name == n; });
      if (spec != in.op->attrs.end() && !spec->required && spec->default_value == v) continue;
    }
    s += " " + name + "=" + value_text(v);
  }
  return s;
}

AttrValue parse_attr(const Instr& in, const std::string& name, const std::string& text, const std::string& where) {
  auto spec = std::find_if(in.op->attrs.begin(), in.op->attrs.end(), [&](const AttrSpec& sp) { return sp.name == name; });
  // Unknown names pass through; the op's own inference names what it takes.
  if (spec == in.op->attrs.end()) return AttrValue::of_string(text);
  switch (spec->type) {
    case AttrType::kFloat: {
      double v;
      if (!parse_number(text, &v)) program_error(where + ": attribute " + name + "=" + text + " is not a number");
      return AttrValue::of_float(v);
    }
    case AttrType::kInt: {
      double v;
      if (!parse_number(text, &v) || v != std::floor(v) || std::fabs(v) > 9e15)
        program_error(where + ": attribute " + name + "=" + text + " is not an integer");
      return AttrValue::of_int(static_cast<int64_t>(v));
    }
    case AttrType::kBool:
      if (text != "true" && text != "false") program_error(where + ": attribute " + name + "=" + text + " is not true or false");
      return AttrValue::of_bool(text == "true");
    case AttrType::kString: return AttrValue::of_string(text);
    default: program_error(where + ": attribute " + name + " has a type a program cannot spell");
  }
}

std::string allowed_list() {
  std::string s;
  for (const auto& op : OpRegistry::get().ops())
    if (op->fusible) s += std::string(s.empty() ? "" : ", ") + op->name;
  return s;
}

}  // namespace

bool allowed_op(const std::string& op) {
  // OpDef::fusible comes from the elementwise op table (ops/elementwise.cpp).
  const OpDef* d = OpRegistry::get().find(op);
  return d && d->fusible;
}

Program parse(const std::string& text) {
  Program p;
  std::vector<std::string> parts = split(text, ';');
  if (!parts.empty() && trim(parts.back()).empty()) parts.pop_back();  // one trailing ';'
  if (parts.empty()) program_error("the program is empty");
  if (static_cast<int>(parts.size()) > kMaxInstructions)
    program_error(fmt::format("the program has {} instructions; at most {} are supported", parts.size(),
                              kMaxInstructions));
  const OpRegistry& reg = OpRegistry::get();
  for (size_t k = 0; k < parts.size(); ++k) {
    const std::string where = fmt::format("instruction {} ('{}')", k, trim(parts[k]));
    const std::vector<std::string> toks = tokens(parts[k]);
    if (toks.empty()) program_error(fmt::format("instruction {} is empty", k));
    Instr in;
    size_t t = 0;
    for (; t < toks.size(); ++t) {
      const std::string& tok = toks[t];
      Operand a;
      if (tok.compare(0, 2, "c:") == 0) {
        a.kind = Operand::kConst;
        if (!parse_number(tok.substr(2), &a.value)) program_error(where + ": constant '" + tok + "' is not a number");
      } else if (int i = parse_index(tok, "in"); i >= 0) {
        a.kind = Operand::kInput;
        a.index = i;
      } else if (int j = parse_index(tok, "t"); j >= 0) {
        a.kind = Operand::kTemp;
        a.index = j;
        if (j >= static_cast<int>(k))
          program_error(where + ": operand " + tok + " is not the result of an earlier instruction" +
                        (k == 0 ? std::string(" (this is the first)") : fmt::format(" (t0..t{} exist here)", k - 1)));
      } else {
        break;
      }
      in.args.push_back(a);
    }
    if (t == toks.size()) program_error(where + ": no op after the operands");
    const std::string& name = toks[t];
    if (name.find('=') != std::string::npos) program_error(where + ": attribute '" + name + "' before the op");
    if (!allowed_op(name)) {
      if (reg.find(name))
        program_error(where + ": '" + name + "' is not an elementwise op a program may use (" + allowed_list() + ")");
      program_error(where + ": unknown op '" + name + "' (operands are inK, tK and c:NUM)");
    }
    in.op = reg.find(name);
    if (!in.op) program_error(where + ": op '" + name + "' is not registered");
    if (in.args.empty()) program_error(where + ": " + name + " has no operands");
    for (++t; t < toks.size(); ++t) {
      const size_t eq = toks[t].find('=');
      if (eq == std::string::npos || eq == 0)
        program_error(where + ": '" + toks[t] + "' after the op is not an attribute (name=value); operands come first");
      const std::string aname = toks[t].substr(0, eq);
      if (in.attrs.find(aname)) program_error(where + ": attribute " + aname + " is given twice");
      in.attrs.set(aname, parse_attr(in, aname, toks[t].substr(eq + 1), where));
    }
    p.instrs.push_back(std::move(in));
  }
  return p;
}

std::string format(const Program& p) {
  std::string s;
  for (size_t k = 0; k < p.instrs.size(); ++k) s += (k ? "; " : "") + instr_text(p.instrs[k]);
  return s;
}

namespace {

// Validates the program against the inputs; returns it with each
// instruction's attributes as its op's inference normalised them, and
// the float dtype.
Program check(const TensorMeta* in, int n, const std::string& text, DType* float_dtype) {
  DType T = SPORA_DTYPE_INVALID;
  for (int i = 0; i < n; ++i) {
    const DType d = in[i].dtype;
    if (d == BOOL) continue;
    if (d != F32 && d != F64 && d != F16 && d != BF16)
      program_error(fmt::format("input {} has dtype {}; inputs are float (f32, f64, f16, bf16) or bool", i,
                                dtype_name(d)));
    if (T == SPORA_DTYPE_INVALID) T = d;
    if (d != T)
      program_error(fmt::format("float inputs have different dtypes ({} and {}); cast one first", dtype_name(T),
                                dtype_name(d)));
  }
  if (T == SPORA_DTYPE_INVALID) program_error("needs at least one float input (it gives the output's dtype)");
  Program p = parse(text);
  std::vector<DType> result(p.instrs.size());
  std::vector<bool> input_used(static_cast<size_t>(n), false), temp_used(p.instrs.size(), false);
  for (size_t k = 0; k < p.instrs.size(); ++k) {
    Instr& ins = p.instrs[k];
    const std::string where = fmt::format("instruction {} ('{}')", k, instr_text(ins));
    TensorMeta metas[kMaxOpInputs];
    const int nargs = static_cast<int>(ins.args.size());
    if (nargs > 3) program_error(fmt::format("{}: {} takes {} operand(s), got {}", where, ins.op->name, ins.op->inputs.size(), nargs));
    for (int a = 0; a < nargs; ++a) {
      const Operand& o = ins.args[static_cast<size_t>(a)];
      if (o.kind == Operand::kInput) {
        if (o.index >= n)
          program_error(fmt::format("{}: operand in{} does not exist (the op has {} input{})", where, o.index, n,
                                    n == 1 ? "" : "s"));
        metas[a].dtype = in[o.index].dtype;
        input_used[static_cast<size_t>(o.index)] = true;
      } else if (o.kind == Operand::kTemp) {
        metas[a].dtype = result[static_cast<size_t>(o.index)];
        temp_used[static_cast<size_t>(o.index)] = true;
      } else {
        metas[a].dtype = T;
      }
    }
    if (nargs != static_cast<int>(ins.op->inputs.size()))
      program_error(fmt::format("{}: {} takes {} operand(s), got {}", where, ins.op->name, ins.op->inputs.size(), nargs));
    // The op's own inference on scalars: its dtype rules and attributes.
    OpCall call;
    try {
      infer_call(*ins.op, metas, nargs, ins.attrs, call);
    } catch (const Error& e) {
      program_error(where + ": " + e.what());
    }
    ins.attrs = call.attrs;
    result[k] = call.out[0].dtype;
  }
  for (int i = 0; i < n; ++i)
    if (!input_used[static_cast<size_t>(i)]) program_error(fmt::format("input {} is not used by the program", i));
  for (size_t k = 0; k + 1 < p.instrs.size(); ++k)
    if (!temp_used[k])
      program_error(fmt::format("the result of instruction {} ('{}') is not used", k, instr_text(p.instrs[k])));
  if (result.back() != T)
    program_error(fmt::format("the program's result (instruction {}) is {}; it must be the float dtype {}",
                              p.instrs.size() - 1, dtype_name(result.back()), dtype_name(T)));
  *float_dtype = T;
  return p;
}

void infer_fused(const OpDef&, const TensorMeta* in, OpCall& call) {
  const int n = call.num_inputs;
  if (n > kMaxInputs) program_error(fmt::format("takes 1 to {} inputs, got {}", kMaxInputs, n));
  const AttrValue* prog = call.attrs.find("program");
  DType T;
  const Program p = check(in, n, prog ? prog->s : std::string(), &T);
  Shape out = in[0].shape;
  for (int i = 1; i < n; ++i) {
    try {
      out = broadcast_shapes(out, in[i].shape, kOpName);
    } catch (const Error&) {
      std::string shapes;
      for (int k = 0; k < n; ++k) shapes += (k ? " and " : "") + in[k].shape.str();
      program_error("shapes " + shapes + " do not broadcast");
    }
  }
  out = Shape::from(out.dims, out.rank, kOpName);
  for (int i = 0; i < n; ++i) call.in[i].shape = pad_to_rank(in[i].shape, out.rank);
  call.out[0] = {T, out};
  call.result[0] = out;
  call.attrs.set("program", AttrValue::of_string(format(p)));
}

Cost fused_cost(const OpCall& call) {
  Cost c;
  for (int i = 0; i < call.num_inputs; ++i)
    c.bytes += static_cast<double>(call.in[i].shape.numel()) * static_cast<double>(dtype_size(call.in[i].dtype));
  const double numel = static_cast<double>(call.out[0].shape.numel());
  c.bytes += numel * static_cast<double>(dtype_size(call.out[0].dtype));
  const AttrValue* prog = call.attrs.find("program");
  const double instrs = prog ? static_cast<double>(std::count(prog->s.begin(), prog->s.end(), ';') + 1) : 1;
  c.flops = numel * instrs;
  return c;
}

// The component ops, rebuilt: what every device without a kernel runs.
std::vector<ir::Value> decompose_fused(ir::Builder& b, const std::vector<ir::Value>& x, const Attrs& attrs) {
  const AttrValue* prog = attrs.find("program");
  const Program p = parse(prog ? prog->s : std::string());
  DType T = SPORA_DTYPE_INVALID;
  for (const ir::Value& v : x)
    if (b.meta(v).dtype != BOOL) T = b.meta(v).dtype;
  std::vector<ir::Value> t;
  for (const Instr& ins : p.instrs) {
    std::vector<ir::Value> args;
    for (const Operand& o : ins.args) {
      if (o.kind == Operand::kInput) args.push_back(x.at(static_cast<size_t>(o.index)));
      else if (o.kind == Operand::kTemp) args.push_back(t.at(static_cast<size_t>(o.index)));
      else args.push_back(b.scalar(o.value, T));
    }
    t.push_back(b.op(ins.op->name.c_str(), args, ins.attrs));
  }
  return {t.back()};
}

// Gradient: exactly the decomposition's, differentiated (rules::vjp_of);
// the result is made of the component ops, which have rules of their own.
std::vector<ir::Value> fused_bp(ir::Builder& b, const ir::Node& node, const std::vector<ir::Value>& x,
                                const std::vector<ir::Value>& y, const std::vector<ir::Value>& dy) {
  const Attrs attrs = node.attrs;
  return rules::vjp_of(b, node, x, y, dy, [attrs](ir::Builder& sb, const std::vector<ir::Value>& sx) {
    return decompose_fused(sb, sx, attrs);
  });
}

void register_fused(OpRegistry& r) {
  OpDef d;
  d.name = kOpName;
  d.inputs = {"x"};
  d.outputs = {"y"};
  d.variadic = true;
  d.attrs = {{"program", AttrType::kString, true, {}}};
  d.dtypes = {F32, F64, F16, BF16, BOOL};
  // No input follows the dtype list as a group (float and bool inputs mix):
  // inference checks every input (index 1 names no input slot).
  d.typed_inputs = {1};
  d.infer = infer_fused;
  d.cost = fused_cost;
  d.in_place = true;  // blocks read every input before writing the output block
  d.decompose = decompose_fused;
  d.bprop = fused_bp;
  d.doc =
      "elementwise ops fused into one pass: program is a list of instructions \"operands op [attr=value]\" "
      "separated by ';', operands inK (input K), tK (result of instruction K), c:NUM (scalar constant); the "
      "last instruction's result is the output, e.g. \"in0 sigmoid; t0 in0 mul; t1 c:1 add\". Inputs broadcast "
      "like numpy; float inputs share one dtype (the output's), bool inputs feed logical ops and where";
  r.add(std::move(d));
}
SPORA_OP_FAMILY(register_fused);

}  // namespace
}  // namespace spora::fused
