// NVRTC for the CUDA plugin, loaded with dlopen at initialize: compiles
// CUDA C++ source to a loaded kernel (gpu_fused.cpp's fused_elementwise
// regions). The ROCm build does not compile this file.
//
// Code is compiled to a CUBIN for the current device's compute capability
// (PTX for the newest architecture NVRTC knows when the device is newer
// still) and loaded with the runtime API's library management
// (cudaLibraryLoadData / cudaLibraryGetKernel, CUDA 12+): cudart is linked
// statically, so no driver-API symbols need opening, and a cudaKernel_t
// launches with cudaLaunchKernel on any device of the process.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "gpu_runtime.h"

namespace spora::gpu::rtc {

// Loads libnvrtc.so.<major of the CUDA headers>; "" on success, else why not.
std::string load();
void unload();
bool available();
const std::string& why_missing();

// In-memory headers a source may #include: {include name, text}.
using Headers = std::vector<std::pair<std::string, std::string>>;

// The kernel `name` (extern "C") of `source`, compiled with `headers` for
// the current device and loaded. Compiled once per (source, name,
// architecture) for the process: later calls, from any thread, get the
// cached kernel (or the cached failure). "" on success, else why not
// (NVRTC missing, the compile log, the load error).
std::string get_kernel(const std::string& source, const std::string& name, const Headers& headers,
                       cudaKernel_t* out);

}  // namespace spora::gpu::rtc
