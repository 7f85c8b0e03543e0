// The layout conv2d_act_pool hands its kept activation to
// conv2d_act_pool_grad in when both carry activation_blocked
// (conv_pool_grad_fusion sets it; docs/cpu-layouts.md): nChw16c where
// oneDNN runs AVX-512, else nChw8c -- decided here, from oneDNN's ISA
// (ONEDNN_MAX_CPU_ISA included), so that the writing and the reading kernel
// always agree. The pass sets the flag only with channels a multiple of 16,
// so the blocked bytes fill the NCHW tensor exactly on either ISA.
//
// With the flag the decomposition cannot stand in for either kernel (it
// would read or write the bytes as NCHW while the other kernel does not),
// so a kernel that cannot honour it fails its plan instead of declining.
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

// A plan's UNIMPLEMENTED (the host would decompose) turned into an error
// when the flag is set; other results pass through.
inline spora_plugin_error_t* refuse_decomposition(const plugin::KernelPlan& p, bool blocked,
                                                   spora_plugin_error_t* e) {
  if (!blocked || !e || e->code != SPORA_PLUGIN_UNIMPLEMENTED) return e;
  std::string why = e->message;
  e->destroy(e);
  return plugin::invalid(p, "activation_blocked is set but the kernel cannot run (" + why +
                                "), and the decomposition would read the activation as NCHW "
                                "(SPORA_CONV_POOL_FUSION=unblocked keeps it NCHW)");
}

}  // namespace spora::cpu
