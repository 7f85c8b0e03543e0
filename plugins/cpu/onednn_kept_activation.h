// The layout conv2d_act_pool and conv2d_act_pool_grad hand operands over in
// under blocked_inputs / blocked_outputs (the blocked_handoff pass;
// docs/cpu-layouts.md): the kept activation, and the values between
// layers. nChw16c where oneDNN runs AVX-512, else nChw8c -- decided here,
// from oneDNN's ISA (ONEDNN_MAX_CPU_ISA included), so that the writing and
// the reading kernels always agree. The pass blocks only values whose
// channels are a multiple of 16, so the blocked bytes fill the NCHW tensor
// exactly on either ISA.
//
// With a blocked operand the decomposition cannot stand in for a kernel (it
// would read or write the bytes as NCHW while the other kernels do not), so
// a kernel that cannot honour it fails its plan instead of declining.
#pragma once
#include <string>

#include "onednn_plan.h"

namespace spora::cpu {

inline int64_t kept_activation_block() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto avx512 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
  return (isa & avx512) == avx512 ? 16 : 8;
}

inline dnnl::memory::desc kept_activation_desc(const dnnl::memory::dims& a, dnnl::memory::data_type dt) {
  return dnnl::memory::desc(a, dt,
                            kept_activation_block() == 16 ? dnnl::memory::format_tag::nChw16c
                                                          : dnnl::memory::format_tag::nChw8c);
}

// blocked_inputs / blocked_outputs (the blocked_handoff pass): whether the
// op's operand `index` is handed over in the same layout.
inline bool blocked_port(const plugin::KernelPlan& p, const char* list, int64_t index) {
  for (int64_t i : p.attrs.get_ints(list))
    if (i == index) return true;
  return false;
}

// A blocked operand's layout, refusing shapes whose channels do not fill
// whole blocks (the pass never marks those: the memory plan sizes the
// tensor as NCHW).
inline spora_plugin_error_t* blocked_operand(const plugin::KernelPlan& p, const char* what,
                                              const dnnl::memory::dims& dims, dnnl::memory::data_type dt,
                                              dnnl::memory::desc* out) {
  *out = kept_activation_desc(dims, dt);
  dnnl::memory::dim numel = 1;
  for (auto d : dims) numel *= d;
  if (out->get_size() != static_cast<size_t>(numel) * dnnl::memory::data_type_size(dt))
    return plugin::invalid(p, std::string(what) + " is blocked but its channels do not fill whole blocks");
  return nullptr;
}

// The attributes that make operands blocked, named for an error; empty
// when the op has none.
inline std::string blocked_flags(const plugin::KernelPlan& p) {
  std::string out;
  for (const char* list : {"blocked_inputs", "blocked_outputs"})
    if (!p.attrs.get_ints(list).empty()) out += (out.empty() ? "" : ", ") + std::string(list);
  return out;
}

// A plan's UNIMPLEMENTED (the host would decompose) turned into an error
// when an operand is blocked; other results pass through.
inline spora_plugin_error_t* refuse_decomposition(const plugin::KernelPlan& p, spora_plugin_error_t* e) {
  const std::string flags = blocked_flags(p);
  if (flags.empty() || !e || e->code != SPORA_PLUGIN_UNIMPLEMENTED) return e;
  std::string why = e->message;
  e->destroy(e);
  return plugin::invalid(p, flags + " set but the kernel cannot run (" + why +
                                "), and the decomposition would read the blocked operands as NCHW "
                                "(SPORA_CONV_POOL_FUSION=unblocked keeps them NCHW)");
}

}  // namespace spora::cpu
