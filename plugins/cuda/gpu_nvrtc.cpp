// SCAFFOLD: NVRTC not wired yet.
#include "gpu_nvrtc.h"

namespace spora::gpu::rtc {
namespace {
const std::string kWhy = "NVRTC support not built yet";
}
std::string load() { return kWhy; }
void unload() {}
bool available() { return false; }
const std::string& why_missing() { return kWhy; }
}  // namespace spora::gpu::rtc
