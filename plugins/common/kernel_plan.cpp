#include "kernel_plan.h"

#include <cstring>
#include <mutex>

#include "error.h"

namespace spora::plugin {

std::string Shape::str() const {
  std::string s = "(";
  for (int i = 0; i < rank; ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + (rank == 1 ? ",)" : ")");
}

size_t dtype_size(int32_t dtype) {
  switch (dtype) {
    case SPORA_DTYPE_F32: case SPORA_DTYPE_I32: return 4;
    case SPORA_DTYPE_F64: case SPORA_DTYPE_I64: return 8;
    case SPORA_DTYPE_F16: case SPORA_DTYPE_BF16: return 2;
    case SPORA_DTYPE_U8: case SPORA_DTYPE_BOOL: return 1;
    default: return 0;
  }
}

const char* dtype_name(int32_t dtype) {
  switch (dtype) {
    case SPORA_DTYPE_F32: return "f32";
    case SPORA_DTYPE_F64: return "f64";
    case SPORA_DTYPE_F16: return "f16";
    case SPORA_DTYPE_BF16: return "bf16";
    case SPORA_DTYPE_I32: return "i32";
    case SPORA_DTYPE_I64: return "i64";
    case SPORA_DTYPE_U8: return "u8";
    case SPORA_DTYPE_BOOL: return "bool";
    default: return "invalid";
  }
}

// ---- attributes ----

const Attr* AttrList::find(const char* name) const {
  for (const auto& a : items)
    if (a.name == name) return &a;
  return nullptr;
}
int64_t AttrList::get_int(const char* name, int64_t fallback) const {
  const Attr* a = find(name);
  return a && (a->type == SPORA_ATTR_INT || a->type == SPORA_ATTR_BOOL) ? a->i : fallback;
}
double AttrList::get_float(const char* name, double fallback) const {
  const Attr* a = find(name);
  if (!a) return fallback;
  if (a->type == SPORA_ATTR_FLOAT) return a->f;
  if (a->type == SPORA_ATTR_INT) return static_cast<double>(a->i);
  return fallback;
}
bool AttrList::get_bool(const char* name, bool fallback) const { return get_int(name, fallback ? 1 : 0) != 0; }
std::vector<int64_t> AttrList::get_ints(const char* name) const {
  const Attr* a = find(name);
  return a && a->type == SPORA_ATTR_INTS ? a->ints : std::vector<int64_t>{};
}
std::string AttrList::get_string(const char* name, const char* fallback) const {
  const Attr* a = find(name);
  return a && a->type == SPORA_ATTR_STRING ? a->s : std::string(fallback);
}

// ---- tables ----

void KernelTable::add(const KernelImpl& impl) {
  impls_.push_back(impl);
  names_.clear();
  name_ptrs_.clear();
}

std::vector<const KernelImpl*> KernelTable::find(const std::string& op) const {
  std::vector<const KernelImpl*> out;
  for (const auto& i : impls_)
    if (op == i.op) out.push_back(&i);
  return out;
}

const char* const* KernelTable::op_names() const {
  if (name_ptrs_.empty()) {
    for (const auto& i : impls_) {
      bool seen = false;
      for (const auto& n : names_) seen = seen || n == i.op;
      if (!seen) names_.push_back(i.op);
    }
    for (const auto& n : names_) name_ptrs_.push_back(n.c_str());
    name_ptrs_.push_back(nullptr);
  }
  return name_ptrs_.data();
}

namespace {
std::vector<void (*)(KernelTable&)>& pending() {
  static std::vector<void (*)(KernelTable&)> v;
  return v;
}
}  // namespace

int add_reference_kernels(void (*fn)(KernelTable&)) {
  pending().push_back(fn);
  return 0;
}

KernelTable& reference_kernels() {
  static KernelTable* t = [] {
    auto* table = new KernelTable;  // lives as long as the plugin (never unloaded)
    for (auto fn : pending()) fn(*table);
    return table;
  }();
  return *t;
}

const char* const* reference_op_names() {
  static std::once_flag once;
  static const char* const* names;
  std::call_once(once, [] { names = reference_kernels().op_names(); });
  return names;
}

// ---- planning ----

spora_plugin_error_t* invalid(const KernelPlan& p, const std::string& why) {
  return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[" + p.op + "] " + why);
}

spora_plugin_error_t* unsupported(const KernelPlan& p, const std::string& why) {
  return make_error(SPORA_PLUGIN_UNIMPLEMENTED, "[" + p.op + "] " + why);
}

spora_plugin_error_t* expect_operands(const KernelPlan& p, int inputs, int outputs) {
  if ((inputs >= 0 && p.num_inputs != inputs) || (outputs >= 0 && p.num_outputs != outputs))
    return invalid(p, "expected " + std::to_string(inputs) + " input(s) and " + std::to_string(outputs) +
                          " output(s), got " + std::to_string(p.num_inputs) + " and " + std::to_string(p.num_outputs));
  return nullptr;
}

bool broadcastable(const Shape& in, const Shape& out) {
  if (in.rank != out.rank) return false;
  for (int i = 0; i < in.rank; ++i)
    if (in.dims[i] != out.dims[i] && in.dims[i] != 1) return false;
  return true;
}

namespace {

spora_plugin_error_t* to_info(const std::string& op, const spora_tensor_desc_t& d, TensorInfo* t) {
  auto bad = [&](const std::string& why) { return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[" + op + "] " + why); };
  if (d.rank < 0 || d.rank > SPORA_MAX_RANK) return bad("rank " + std::to_string(d.rank) + " out of range");
  if (d.rank > 0 && !d.dims) return bad("tensor descriptor without dims");
  if (d.strides) return make_error(SPORA_PLUGIN_UNIMPLEMENTED, "[" + op + "] strided tensors are not supported");
  if (dtype_size(d.dtype) == 0) return bad("unknown dtype " + std::to_string(d.dtype));
  t->dtype = d.dtype;
  t->shape.rank = d.rank;
  for (int i = 0; i < d.rank; ++i) {
    if (d.dims[i] < 0) return bad("negative dimension");
    t->shape.dims[i] = d.dims[i];
  }
  return nullptr;
}

}  // namespace

spora_plugin_error_t* describe(const spora_kernel_desc_t* desc, KernelPlan* out) {
  if (!desc || !desc->op || !out) return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[kernel] null descriptor");
  KernelPlan p;
  p.op = desc->op;
  if (desc->num_inputs > static_cast<size_t>(kMaxOperands) || desc->num_outputs > static_cast<size_t>(kMaxOperands))
    return invalid(p, "too many operands");
  if ((desc->num_inputs && !desc->inputs) || (desc->num_outputs && !desc->outputs) || (desc->num_attrs && !desc->attrs))
    return invalid(p, "descriptor with null arrays");
  p.num_inputs = static_cast<int32_t>(desc->num_inputs);
  p.num_outputs = static_cast<int32_t>(desc->num_outputs);
  for (int i = 0; i < p.num_inputs; ++i)
    if (auto* e = to_info(p.op, desc->inputs[i], &p.in[i])) return e;
  for (int i = 0; i < p.num_outputs; ++i)
    if (auto* e = to_info(p.op, desc->outputs[i], &p.out[i])) return e;
  for (size_t i = 0; i < desc->num_attrs; ++i) {
    const spora_attr_t& a = desc->attrs[i];
    if (!a.name) return invalid(p, "attribute without a name");
    Attr c;
    c.name = a.name;
    c.type = a.type;
    c.i = a.i;
    c.f = a.f;
    if (a.type == SPORA_ATTR_INTS && a.count) {
      if (!a.ints) return invalid(p, "attribute '" + c.name + "' has no values");
      c.ints.assign(a.ints, a.ints + a.count);
    }
    if (a.type == SPORA_ATTR_FLOATS && a.count) {
      if (!a.floats) return invalid(p, "attribute '" + c.name + "' has no values");
      c.floats.assign(a.floats, a.floats + a.count);
    }
    if (a.type == SPORA_ATTR_STRING && a.s) c.s = a.s;
    p.attrs.items.push_back(std::move(c));
  }
  *out = std::move(p);
  return nullptr;
}

std::vector<const KernelImpl*> implementations(const std::string& op, const KernelTable* preferred) {
  std::vector<const KernelImpl*> impls;
  if (preferred) impls = preferred->find(op);
  for (const KernelImpl* i : reference_kernels().find(op)) impls.push_back(i);
  return impls;
}

spora_plugin_error_t* plan_kernel(const spora_kernel_desc_t* desc, KernelPlan* out, const KernelTable* preferred,
                                  std::string* log) {
  KernelPlan base;
  if (auto* e = describe(desc, &base)) return e;
  const std::vector<const KernelImpl*> impls = implementations(base.op, preferred);
  if (impls.empty()) return make_error(SPORA_PLUGIN_UNIMPLEMENTED, "[" + base.op + "] no kernel for this op");
  spora_plugin_error_t* last = nullptr;
  for (const KernelImpl* impl : impls) {
    KernelPlan p = base;
    p.impl = impl->name;
    spora_plugin_error_t* e = impl->plan(p);
    if (!e) {
      if (last) last->destroy(last);
      *out = std::move(p);
      return nullptr;
    }
    if (e->code != SPORA_PLUGIN_UNIMPLEMENTED) {
      if (last) last->destroy(last);
      return e;
    }
    if (log) *log += std::string(impl->name) + " rejected: " + e->message + "\n";
    if (last) last->destroy(last);
    last = e;
  }
  return last;
}

}  // namespace spora::plugin
