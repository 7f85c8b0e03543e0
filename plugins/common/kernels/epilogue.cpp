// Reference kernels of the epilogue-fused ops (core/src/ops/epilogue.cpp):
// linear_act, linear_add_act, conv2d_act, conv2d_add_act, every float dtype.
//
// Composed from the other reference kernels, planned once here: the base
// op's (linear or conv2d_bias), then the elementwise add of the residual and
// the activation, run in place on the output (elementwise kernels read
// element i before writing it). Each step rounds to the output dtype exactly
// as the unfused ops do, so a fused graph gives bit-identical results to the
// unfused one on a device that runs reference kernels.
#include <string>

#include "elementwise.h"
#include "kernel_plan.h"

namespace spora::plugin {
namespace {

struct State {
  KernelPlan base, add, act;
  bool has_add = false, has_act = false;
};

void run(const KernelPlan& p, const void* const* in, void* const* out, void* workspace) {
  const State& s = p.get<State>();
  s.base.run(s.base, in, out, workspace);
  if (s.has_add) {
    const void* args[2] = {out[0], in[3]};
    s.add.run(s.add, args, out, workspace);
  }
  if (s.has_act) {
    const void* args[1] = {out[0]};
    s.act.run(s.act, args, out, workspace);
  }
}

// Plans `sub` with the first reference implementation that accepts it.
spora_plugin_error_t* plan_with_reference(const KernelPlan& p, KernelPlan& sub) {
  spora_plugin_error_t* last = nullptr;
  for (const KernelImpl* impl : reference_kernels().find(sub.op)) {
    KernelPlan trial = sub;
    trial.impl = impl->name;
    spora_plugin_error_t* e = impl->plan(trial);
    if (!e) {
      if (last) last->destroy(last);
      sub = std::move(trial);
      return nullptr;
    }
    if (last) last->destroy(last);
    last = e;
  }
  return last ? last : unsupported(p, "no reference kernel for " + sub.op);
}

// The elementwise op and attributes of an activation name; false if unknown.
bool activation_op(const std::string& act, std::string* op, AttrList* attrs) {
  if (act == "relu" || act == "sigmoid" || act == "tanh") {
    *op = act;
    return true;
  }
  if (act == "gelu" || act == "gelu_tanh") {
    *op = "gelu";
    Attr a;
    a.name = "approximate";
    a.type = SPORA_ATTR_STRING;
    a.s = act == "gelu" ? "none" : "tanh";
    attrs->items.push_back(a);
    return true;
  }
  return act == "none";
}

spora_plugin_error_t* plan(KernelPlan& p) {
  const bool conv = p.op.compare(0, 6, "conv2d") == 0;
  const bool residual = p.op.find("_add_") != std::string::npos;
  if (auto* e = expect_operands(p, residual ? 4 : 3, 1)) return e;
  const int32_t dt = p.out[0].dtype;
  if (dt != SPORA_DTYPE_F32 && dt != SPORA_DTYPE_F64 && dt != SPORA_DTYPE_F16 && dt != SPORA_DTYPE_BF16)
    return unsupported(p, std::string("dtype ") + dtype_name(dt) + " has no kernel");
  for (int i = 0; i < p.num_inputs; ++i)
    if (p.in[i].dtype != dt) return invalid(p, "operands and output differ in dtype");
  if (residual && p.in[3].shape != p.out[0].shape)
    return invalid(p, "residual " + p.in[3].shape.str() + " must have the output's shape " + p.out[0].shape.str());
  auto s = std::make_shared<State>();
  const std::string act = p.attrs.get_string("activation", "none");
  std::string act_op;
  AttrList act_attrs;
  if (!activation_op(act, &act_op, &act_attrs)) return invalid(p, "unknown activation \"" + act + "\"");

  KernelPlan& b = s->base;
  b.op = conv ? "conv2d_bias" : "linear";
  b.num_inputs = 3;
  b.num_outputs = 1;
  for (int i = 0; i < 3; ++i) b.in[i] = p.in[i];
  b.out[0] = p.out[0];
  for (const Attr& a : p.attrs.items)
    if (a.name != "activation") b.attrs.items.push_back(a);
  if (auto* e = plan_with_reference(p, b)) return e;
  p.workspace = b.workspace;

  if (residual) {
    KernelPlan& a = s->add;
    a.op = "add";
    a.num_inputs = 2;
    a.num_outputs = 1;
    a.in[0] = a.in[1] = a.out[0] = p.out[0];
    if (auto* e = ew::plan(a)) return e;
    s->has_add = true;
  }
  if (!act_op.empty()) {
    KernelPlan& a = s->act;
    a.op = act_op;
    a.num_inputs = 1;
    a.num_outputs = 1;
    a.in[0] = a.out[0] = p.out[0];
    a.attrs = act_attrs;
    if (auto* e = ew::plan(a)) return e;
    s->has_act = true;
  }
  p.state = s;
  p.run = run;
  return nullptr;
}

void register_kernels(KernelTable& t) {
  for (const char* op : {"linear_act", "linear_add_act", "conv2d_act", "conv2d_add_act"}) t.add({op, "ref", plan});
}
SPORA_REFERENCE_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::plugin
