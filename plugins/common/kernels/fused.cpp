// Reference fused_elementwise kernel: the program planned into per-block
// instructions (fused.h), run on the calling thread. The cpu plugin plans
// the same Program and runs it across threads with faster instructions.
#include "kernels/fused.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

namespace spora::plugin::fused {
namespace {

constexpr int32_t F32 = SPORA_DTYPE_F32, F64 = SPORA_DTYPE_F64, F16 = SPORA_DTYPE_F16, BF16 = SPORA_DTYPE_BF16,
                  BOOL = SPORA_DTYPE_BOOL;

void f16_to_f32(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = ew::half_to_float(x[i]);
}
void f32_to_f16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = ew::float_to_half(x[i]);
}
void bf16_to_f32(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = ew::bf16_to_float(x[i]);
}
void f32_to_bf16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = ew::float_to_bf16(x[i]);
}

bool is_half(int32_t dt) { return dt == F16 || dt == BF16; }

std::vector<std::string> split_tokens(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      if (!cur.empty()) out.push_back(std::move(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

bool number(const std::string& s, double* v) {
  if (s.empty()) return false;
  char* end = nullptr;
  *v = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

// "in3" / "t12" -> 3 / 12, else -1.
int index_of(const std::string& tok, const char* prefix) {
  const size_t n = std::strlen(prefix);
  if (tok.size() <= n || tok.compare(0, n, prefix) != 0 || tok.size() - n > 6) return -1;
  int v = 0;
  for (size_t i = n; i < tok.size(); ++i) {
    if (tok[i] < '0' || tok[i] > '9') return -1;
    v = v * 10 + (tok[i] - '0');
  }
  return v;
}

bool to_bool_op(ew::Op op) { return op >= ew::Op::kEqual && op <= ew::Op::kLogicalXor; }
bool logical_op(ew::Op op) { return op >= ew::Op::kLogicalAnd && op <= ew::Op::kLogicalXor; }
bool any_kind_compare(ew::Op op) { return op == ew::Op::kEqual || op == ew::Op::kNotEqual; }

struct Parsed {
  const ew::OpInfo* info = nullptr;
  ew::Params prm;
  // Operands: {kind, index or value}: 0 input, 1 temp, 2 constant.
  int nargs = 0;
  int kind[3] = {};
  int index[3] = {};
  double value[3] = {};
};

// Parses the host's (validated, canonical) program; returns an error text
// or "" on success.
std::string parse(const std::string& text, std::vector<Parsed>* out) {
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i != text.size() && text[i] != ';') continue;
    const std::vector<std::string> toks = split_tokens(text.substr(start, i - start));
    start = i + 1;
    if (toks.empty()) {
      if (i == text.size() && !out->empty()) break;  // a trailing ';'
      return "empty instruction";
    }
    Parsed ins;
    ins.prm.alpha = 0.01;
    ins.prm.beta = 1.0;
    ins.prm.threshold = 20.0;
    ins.prm.lo = -HUGE_VAL;
    ins.prm.hi = HUGE_VAL;
    ins.prm.gelu_tanh = false;
    size_t t = 0;
    const int k = static_cast<int>(out->size());
    for (; t < toks.size(); ++t) {
      const std::string& tok = toks[t];
      int kind, idx = 0;
      double v = 0;
      if (tok.compare(0, 2, "c:") == 0) {
        if (!number(tok.substr(2), &v)) return "bad constant " + tok;
        kind = 2;
      } else if ((idx = index_of(tok, "in")) >= 0) {
        kind = 0;
      } else if ((idx = index_of(tok, "t")) >= 0) {
        if (idx >= k) return "operand " + tok + " is not an earlier result";
        kind = 1;
      } else {
        break;
      }
      if (ins.nargs == 3) return "more than 3 operands";
      ins.kind[ins.nargs] = kind;
      ins.index[ins.nargs] = idx;
      ins.value[ins.nargs] = v;
      ++ins.nargs;
    }
    if (t == toks.size()) return "instruction without an op";
    for (int o = 0; o < ew::kNumOps; ++o)
      if (toks[t] == ew::kOps[o].name && (ew::kOps[o].flags & SPORA_EW_F_FUSIBLE)) ins.info = &ew::kOps[o];
    if (!ins.info) return "unknown op " + toks[t];
    if (ins.info->inputs != ins.nargs) return toks[t] + " with " + std::to_string(ins.nargs) + " operands";
    for (++t; t < toks.size(); ++t) {
      const size_t eq = toks[t].find('=');
      if (eq == std::string::npos) return "bad attribute " + toks[t];
      const std::string name = toks[t].substr(0, eq), val = toks[t].substr(eq + 1);
      double v = 0;
      if (name == "approximate") {
        ins.prm.gelu_tanh = val == "tanh";
        continue;
      }
      if (!number(val, &v)) return "bad attribute " + toks[t];
      if (name == "alpha") ins.prm.alpha = v;
      else if (name == "beta") ins.prm.beta = v;
      else if (name == "threshold") ins.prm.threshold = v;
      else if (name == "min") ins.prm.lo = v;
      else if (name == "max") ins.prm.hi = v;
      else return "unknown attribute " + name;
    }
    out->push_back(ins);
  }
  if (out->empty()) return "empty program";
  return "";
}

// A constant as the compute type sees it: rounded to the storage dtype
// first, as the component ops' scalar constant would be.
double round_to(double v, int32_t dtype) {
  switch (dtype) {
    case F32: return static_cast<float>(v);
    case F16: return ew::half_to_float(ew::float_to_half(static_cast<float>(v)));
    case BF16: return ew::bf16_to_float(ew::float_to_bf16(static_cast<float>(v)));
    default: return v;
  }
}

void run_all(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  const Program& g = p.get<Program>();
  eval_range(g, in, out[0], 0, g.numel);
}

}  // namespace

spora_plugin_error_t* plan(KernelPlan& p) {
  if (p.num_inputs < 1 || p.num_inputs > 16 || p.num_outputs != 1)
    return invalid(p, "takes 1 to 16 inputs and one output");
  const TensorInfo& y = p.out[0];
  const int32_t dt = y.dtype;
  if (dt != F32 && dt != F64 && !is_half(dt)) return unsupported(p, std::string("dtype ") + dtype_name(dt));
  const Attr* prog = p.attrs.find("program");
  if (!prog || prog->type != SPORA_ATTR_STRING) return invalid(p, "attribute program (a string) is missing");
  std::vector<Parsed> code;
  const std::string err = parse(prog->s, &code);
  if (!err.empty()) return invalid(p, "program: " + err);

  auto g = std::make_shared<Program>();
  g->dtype = dt;
  g->cdtype = dt == F64 ? F64 : F32;
  g->numel = y.shape.numel();
  g->block = kSlotBytes / (g->cdtype == F64 ? 8 : 4);
  if (dt == F16) {
    g->to_f32 = f16_to_f32;
    g->from_f32 = f32_to_f16;
  } else if (dt == BF16) {
    g->to_f32 = bf16_to_f32;
    g->from_f32 = f32_to_bf16;
  }
  const int n_in = p.num_inputs;
  for (int i = 0; i < n_in; ++i) {
    const TensorInfo& x = p.in[i];
    if (x.dtype != dt && x.dtype != BOOL) return invalid(p, "inputs must have the output's dtype or be bool");
    if (!broadcastable(x.shape, y.shape)) return invalid(p, "inputs do not broadcast to the output (pad them to its rank)");
    Input inp;
    inp.dtype = x.dtype;
    if (x.shape.numel() == 1) inp.mode = Input::kUniform;
    else if (x.shape != y.shape) inp.mode = Input::kGather;
    else if (is_half(x.dtype)) inp.mode = Input::kConvert;
    else inp.mode = Input::kDirect;
    if (inp.mode == Input::kGather) inp.bc = ew::make_bcast(y.shape, &x.shape, 1);
    g->inputs.push_back(inp);
    Value v;
    v.is_bool = x.dtype == BOOL;
    v.uniform = inp.mode == Input::kUniform;
    v.input = i;
    g->values.push_back(v);
  }
  const int32_t first_instr = n_in;
  for (size_t k = 0; k < code.size(); ++k) g->values.push_back(Value{});
  std::vector<int> uses(g->values.size(), 0);
  // Instructions, with kinds checked (the host validated dtypes; a plan
  // still refuses what would read a buffer as the wrong type).
  for (size_t k = 0; k < code.size(); ++k) {
    const Parsed& c = code[k];
    Instr ins;
    ins.nargs = c.nargs;
    bool all_uniform = true;
    bool kinds[3] = {};
    for (int a = 0; a < c.nargs; ++a) {
      int32_t id;
      if (c.kind[a] == 0) {
        if (c.index[a] >= n_in) return invalid(p, "program reads input " + std::to_string(c.index[a]) + " of " + std::to_string(n_in));
        id = c.index[a];
      } else if (c.kind[a] == 1) {
        id = first_instr + c.index[a];
      } else {
        Value v;
        v.uniform = true;
        v.is_const = true;
        v.constant = round_to(c.value[a], dt);
        id = static_cast<int32_t>(g->values.size());
        g->values.push_back(v);
        uses.push_back(0);
      }
      ins.args[a] = id;
      ++uses[static_cast<size_t>(id)];
      kinds[a] = g->values[static_cast<size_t>(id)].is_bool;
      all_uniform = all_uniform && g->values[static_cast<size_t>(id)].uniform;
    }
    const ew::Op op = c.info->op;
    const int32_t cd = g->cdtype;
    bool result_bool = false;
    ew::RangeFn fn = nullptr;
    if (c.nargs == 1) {
      if ((op == ew::Op::kLogicalNot) != kinds[0]) return invalid(p, std::string("program: wrong operand type for ") + c.info->name);
      fn = ew::pick_unary(op, kinds[0] ? BOOL : cd);
      result_bool = kinds[0];
    } else if (c.nargs == 2) {
      if (kinds[0] != kinds[1] || (logical_op(op) != kinds[0] && !any_kind_compare(op)))
        return invalid(p, std::string("program: wrong operand types for ") + c.info->name);
      fn = ew::pick_binary(op, kinds[0] ? BOOL : cd);
      result_bool = to_bool_op(op);
    } else {
      if (!kinds[0] || kinds[1] != kinds[2]) return invalid(p, "program: wrong operand types for where");
      fn = ew::pick_where(kinds[1] ? BOOL : cd);
      result_bool = kinds[1];
    }
    if (!fn) return unsupported(p, std::string("program: no kernel for ") + c.info->name);
    ins.st.info = c.info;
    ins.st.prm = c.prm;
    ins.st.range = fn;
    ins.st.bc.rank = 1;
    ins.st.bc.dims[0] = g->block;
    for (int a = 0; a < c.nargs; ++a)
      ins.st.bc.strides[a][0] = g->values[static_cast<size_t>(ins.args[a])].uniform ? 0 : 1;
    ins.result = first_instr + static_cast<int32_t>(k);
    ins.cost = c.info->cost;
    Value& r = g->values[static_cast<size_t>(ins.result)];
    r.is_bool = result_bool;
    r.uniform = all_uniform;
    (all_uniform ? g->prologue : g->body).push_back(ins);
  }
  g->out_value = first_instr + static_cast<int32_t>(code.size()) - 1;
  const Value& outv = g->values[static_cast<size_t>(g->out_value)];
  if (outv.is_bool) return invalid(p, "program: the result is bool");
  g->out_direct = !outv.uniform && !is_half(dt);

  // Block buffers: an input that is converted or gathered, and every body
  // result, gets a slot from its definition to its last use. Results never
  // share their operands' slots, so no loop runs in place.
  std::vector<int> last(g->values.size(), -1);
  for (size_t k = 0; k < g->body.size(); ++k)
    for (int a = 0; a < g->body[k].nargs; ++a) last[static_cast<size_t>(g->body[k].args[a])] = static_cast<int>(k);
  std::vector<int32_t> free_slots;
  auto take = [&]() {
    if (free_slots.empty()) return g->num_slots++;
    const int32_t s = free_slots.back();
    free_slots.pop_back();
    return s;
  };
  for (int i = 0; i < n_in; ++i) {
    const Input::Mode m = g->inputs[static_cast<size_t>(i)].mode;
    if ((m == Input::kConvert || m == Input::kGather) && last[static_cast<size_t>(i)] >= 0)
      g->values[static_cast<size_t>(i)].slot = take();
  }
  for (size_t k = 0; k < g->body.size(); ++k) {
    const Instr& ins = g->body[k];
    const bool direct = g->out_direct && ins.result == g->out_value;
    if (!direct) g->values[static_cast<size_t>(ins.result)].slot = take();
    for (int a = 0; a < ins.nargs; ++a) {
      const int32_t id = ins.args[a];
      Value& v = g->values[static_cast<size_t>(id)];
      if (v.slot >= 0 && last[static_cast<size_t>(id)] == static_cast<int>(k)) {
        free_slots.push_back(v.slot);
        last[static_cast<size_t>(id)] = -1;  // freed once even if an instruction reads it twice
      }
    }
    g->cost += ins.cost;
  }
  p.state = g;
  p.run = run_all;
  return nullptr;
}

void eval_range(const Program& g, const void* const* in, void* out, int64_t begin, int64_t end) {
  if (begin >= end) return;
  const size_t nv = g.values.size();
  // Uniform values, one 8-byte cell each (compute type or a bool byte).
  uint64_t small_cells[64];
  std::unique_ptr<uint64_t[]> big_cells;
  uint64_t* cells = small_cells;
  if (nv > 64) {
    big_cells.reset(new uint64_t[nv]);
    cells = big_cells.get();
  }
  const bool f64 = g.cdtype == F64;
  for (size_t v = 0; v < nv; ++v) {
    const Value& val = g.values[v];
    if (!val.uniform) continue;
    void* cell = &cells[v];
    if (val.is_const) {
      if (f64) *static_cast<double*>(cell) = val.constant;
      else *static_cast<float*>(cell) = static_cast<float>(val.constant);
    } else if (val.input >= 0) {
      const void* src = in[val.input];
      switch (g.inputs[static_cast<size_t>(val.input)].dtype) {
        case F32: std::memcpy(cell, src, 4); break;
        case F64: std::memcpy(cell, src, 8); break;
        case F16: *static_cast<float*>(cell) = ew::half_to_float(*static_cast<const uint16_t*>(src)); break;
        case BF16: *static_cast<float*>(cell) = ew::bf16_to_float(*static_cast<const uint16_t*>(src)); break;
        default: *static_cast<uint8_t*>(cell) = *static_cast<const uint8_t*>(src) != 0; break;
      }
    }
  }
  for (const Instr& ins : g.prologue) {
    const void* args[3];
    for (int a = 0; a < ins.nargs; ++a) args[a] = &cells[ins.args[a]];
    void* o = &cells[ins.result];
    ins.st.range(ins.st, args, &o, 0, 1);
  }
  const size_t out_size = dtype_size(g.dtype);
  const Value& outv = g.values[static_cast<size_t>(g.out_value)];
  if (outv.uniform) {
    // Every input is a single element: so is the output.
    const void* cell = &cells[g.out_value];
    uint8_t bytes[8];
    if (g.from_f32) g.from_f32(static_cast<const float*>(cell), reinterpret_cast<uint16_t*>(bytes), 1);
    else std::memcpy(bytes, cell, out_size);
    for (int64_t i = begin; i < end; ++i) std::memcpy(static_cast<char*>(out) + i * out_size, bytes, out_size);
    return;
  }

  alignas(64) unsigned char small_slots[8 * kSlotBytes];
  std::unique_ptr<unsigned char[]> big_slots;
  unsigned char* slots = small_slots;
  if (g.num_slots > 8) {
    big_slots.reset(new unsigned char[static_cast<size_t>(g.num_slots) * kSlotBytes + 64]);
    slots = big_slots.get() + (64 - reinterpret_cast<uintptr_t>(big_slots.get()) % 64) % 64;
  }
  const void* small_ptrs[64];
  std::unique_ptr<const void*[]> big_ptrs;
  const void** ptr = small_ptrs;
  if (nv > 64) {
    big_ptrs.reset(new const void*[nv]);
    ptr = big_ptrs.get();
  }
  for (size_t v = 0; v < nv; ++v) {
    const Value& val = g.values[v];
    ptr[v] = val.uniform ? static_cast<const void*>(&cells[v])
                         : val.slot >= 0 ? slots + static_cast<size_t>(val.slot) * kSlotBytes : nullptr;
  }
  const size_t csize = f64 ? 8 : 4;
  for (int64_t pos = begin; pos < end; pos += g.block) {
    const int64_t len = std::min(g.block, end - pos);
    // Inputs: in place, converted or gathered into their slots.
    for (size_t i = 0; i < g.inputs.size(); ++i) {
      const Input& inp = g.inputs[i];
      const Value& val = g.values[i];
      const size_t esize = dtype_size(inp.dtype);
      const char* src = static_cast<const char*>(in[i]);
      if (inp.mode == Input::kDirect) {
        ptr[i] = src + pos * static_cast<int64_t>(esize);
      } else if (val.slot < 0) {
        continue;  // uniform, or unused by the body
      } else if (inp.mode == Input::kConvert) {
        g.to_f32(reinterpret_cast<const uint16_t*>(src) + pos, static_cast<float*>(const_cast<void*>(ptr[i])), len);
      } else {
        unsigned char* dst = static_cast<unsigned char*>(const_cast<void*>(ptr[i]));
        const bool conv = is_half(inp.dtype);
        const size_t dsize = inp.dtype == BOOL ? 1 : csize;
        ew::for_each_run<1>(inp.bc, pos, pos + len, [&](const int64_t* off, int64_t p, int64_t l) {
          unsigned char* d = dst + (p - pos) * static_cast<int64_t>(dsize);
          const char* s = src + off[0] * static_cast<int64_t>(esize);
          if (inp.bc.inner(0) == 0) {
            uint8_t one[8];
            if (conv) g.to_f32(reinterpret_cast<const uint16_t*>(s), reinterpret_cast<float*>(one), 1);
            else std::memcpy(one, s, dsize);
            for (int64_t j = 0; j < l; ++j) std::memcpy(d + j * static_cast<int64_t>(dsize), one, dsize);
          } else if (conv) {
            g.to_f32(reinterpret_cast<const uint16_t*>(s), reinterpret_cast<float*>(d), l);
          } else {
            std::memcpy(d, s, static_cast<size_t>(l) * dsize);
          }
        });
      }
    }
    for (const Instr& ins : g.body) {
      const void* args[3];
      for (int a = 0; a < ins.nargs; ++a) args[a] = ptr[ins.args[a]];
      void* o = g.out_direct && ins.result == g.out_value ? static_cast<char*>(out) + pos * static_cast<int64_t>(out_size)
                                                          : const_cast<void*>(ptr[ins.result]);
      ins.st.range(ins.st, args, &o, 0, len);
    }
    if (!g.out_direct)
      g.from_f32(static_cast<const float*>(ptr[g.out_value]), static_cast<uint16_t*>(out) + pos, len);
  }
}

namespace {
void register_kernels(KernelTable& t) { t.add({"fused_elementwise", "ref", plan}); }
SPORA_REFERENCE_KERNELS(register_kernels);
}  // namespace

}  // namespace spora::plugin::fused
