// The plugin's kernels: one SPIR-V module (compiled at build time from
// kernels/*.cl, embedded in the plugin) built per device on first use with
// zeModuleCreate, and its ze_kernel objects by name.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "ze_state.h"

namespace spora::ze {

// A kernel object carries its arguments as state, so setting them and
// appending the launch must not interleave between threads: `mu` guards it.
struct ZeKernel {
  ze_kernel_handle_t handle = nullptr;
  std::mutex mu;
};

class ModuleCache {
 public:
  ModuleCache(ze_context_handle_t ctx, ze_device_handle_t dev) : ctx_(ctx), dev_(dev) {}
  ~ModuleCache();
  // The kernel `name` of the embedded module, building the module first if
  // needed (its build log goes into the error).
  spora_plugin_error_t* kernel(const std::string& name, ZeKernel** out);

 private:
  ze_context_handle_t ctx_;
  ze_device_handle_t dev_;
  std::mutex mu_;
  ze_module_handle_t module_ = nullptr;
  std::map<std::string, std::unique_ptr<ZeKernel>> kernels_;
};

// The embedded SPIR-V (generated at build time, ze_spirv.cpp).
extern const unsigned char kSpirv[];
extern const size_t kSpirvSize;

}  // namespace spora::ze
