// The cpu plugin's own kernel implementations (oneDNN primitives, tuned
// loops). They are tried before the shared reference kernels; each family
// file registers itself with SPORA_CPU_KERNELS.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

#include "kernel_plan.h"

namespace spora::cpu {

plugin::KernelTable& cpu_kernels();
int add_cpu_kernels(void (*fn)(plugin::KernelTable&));
#define SPORA_CPU_KERNELS(fn) static const int spora_cpu_kernels_##fn = ::spora::cpu::add_cpu_kernels(fn)

// The process's oneDNN cpu engine.
dnnl::engine& onednn_engine();
// The calling thread's oneDNN stream on that engine, made once per thread
// (a cpu stream only orders work on its thread; building one per launch
// cost about 0.1 us).
dnnl::stream& onednn_stream();
// oneDNN data type for a Spora dtype; false when oneDNN has none.
bool onednn_dtype(int32_t dtype, dnnl::memory::data_type* out);

}  // namespace spora::cpu
