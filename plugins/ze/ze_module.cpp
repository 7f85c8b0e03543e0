// Builds the embedded SPIR-V module per device and hands out its kernels.
#include "ze_module.h"

#include <string>
#include <vector>

namespace spora::ze {

ModuleCache::~ModuleCache() {
  for (auto& k : kernels_) zeKernelDestroy(k.second->handle);
  if (module_) zeModuleDestroy(module_);
}

spora_plugin_error_t* ModuleCache::kernel(const std::string& name, ZeKernel** out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!module_) {
    ze_module_desc_t md{ZE_STRUCTURE_TYPE_MODULE_DESC};
    md.format = ZE_MODULE_FORMAT_IL_SPIRV;
    md.inputSize = kSpirvSize;
    md.pInputModule = kSpirv;
    md.pBuildFlags = "";
    ze_module_build_log_handle_t log = nullptr;
    const ze_result_t r = zeModuleCreate(ctx_, dev_, &md, &module_, &log);
    if (r != ZE_RESULT_SUCCESS) {
      std::string text;
      size_t size = 0;
      if (log && zeModuleBuildLogGetString(log, &size, nullptr) == ZE_RESULT_SUCCESS && size > 0) {
        std::vector<char> buf(size);
        if (zeModuleBuildLogGetString(log, &size, buf.data()) == ZE_RESULT_SUCCESS) text.assign(buf.data());
      }
      if (log) zeModuleBuildLogDestroy(log);
      module_ = nullptr;
      return ze_error(r, "building the embedded SPIR-V module" + (text.empty() ? "" : " (build log: " + text + ")"),
                      "zeModuleCreate");
    }
    if (log) zeModuleBuildLogDestroy(log);
  }
  auto it = kernels_.find(name);
  if (it == kernels_.end()) {
    auto k = std::make_unique<ZeKernel>();
    ze_kernel_desc_t kd{ZE_STRUCTURE_TYPE_KERNEL_DESC};
    kd.pKernelName = name.c_str();
    SPORA_ZE_CHECK(zeKernelCreate(module_, &kd, &k->handle), "kernel " + name);
    it = kernels_.emplace(name, std::move(k)).first;
  }
  *out = it->second.get();
  return nullptr;
}

}  // namespace spora::ze
