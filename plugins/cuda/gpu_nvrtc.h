// NVRTC for the CUDA plugin, loaded with dlopen at initialize: compiles
// CUDA C++ source to a loaded kernel (gpu_fused.cpp's fused_elementwise
// regions). The ROCm build does not compile this file.
#pragma once
#include <string>

namespace spora::gpu::rtc {

// Loads libnvrtc.so.<major of the headers>; "" on success, else why not.
std::string load();
void unload();
bool available();
const std::string& why_missing();

}  // namespace spora::gpu::rtc
