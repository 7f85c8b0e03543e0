// Included first by every kernels/*.cu: the toolchain's device headers,
// then the runtime shim. nvcc includes cuda_runtime.h by itself; hipcc
// needs hip_runtime.h for the launch syntax and the thread indices.
#pragma once
#if defined(SPORA_GPU_HIP)
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#include <hip/hip_runtime.h>
#endif
#include "gpu_kernel.h"
#include "gpu_runtime.h"

namespace spora::gpu {

// Enqueue result of the launch just made.
inline cudaError_t launched() { return cudaGetLastError(); }

}  // namespace spora::gpu
