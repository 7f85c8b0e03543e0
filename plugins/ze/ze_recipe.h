// Kernel recipes: how one planned op runs as launches of the embedded
// OpenCL C kernels (kernels/*.cl): which kernel, its arguments (operand
// buffers or values), and the launch grid.
//
// A recipe depends on nothing of Level Zero, so the very code that plans
// the plugin's launches also drives the kernel-math test, which runs the
// same kernels through OpenCL on the CPU (PoCL): tests/ze/ze_kernels_test.cpp.
#pragma once
#include <spora/plugin.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernel_plan.h"

namespace spora::ze {

// One kernel argument: an operand's buffer (inputs first, then outputs, as
// kernel_launch receives them), the workspace (kWorkspace), or bytes passed
// by value.
constexpr int32_t kWorkspace = -2;
struct LaunchArg {
  int32_t operand = -1;
  std::vector<uint8_t> value;  // when operand == -1
};

struct Launch {
  std::string kernel;
  std::vector<LaunchArg> args;
  uint32_t groups[3] = {1, 1, 1};      // work-groups per dimension
  uint32_t group_size[3] = {1, 1, 1};  // work-items per group
};

struct Recipe {
  std::vector<Launch> launches;
  size_t workspace = 0;  // bytes of device memory the host passes to every launch
};

// Builds the recipe for a described plan (plugin::describe). Returns
// SPORA_PLUGIN_UNIMPLEMENTED, naming what, for ops, dtypes or attributes
// the kernels do not cover (the host then decomposes or falls back), and
// SPORA_PLUGIN_INVALID_ARGUMENT for malformed descriptors.
spora_plugin_error_t* make_recipe(const spora::plugin::KernelPlan& p, Recipe* out);

// NUL-terminated list of the ops make_recipe may accept (for some dtypes).
const char* const* recipe_ops();

// Argument helpers, shared with the test.
template <class T>
LaunchArg value_arg(const T& v) {
  LaunchArg a;
  a.value.resize(sizeof(T));
  std::memcpy(a.value.data(), &v, sizeof(T));
  return a;
}
inline LaunchArg buffer_arg(int32_t operand) {
  LaunchArg a;
  a.operand = operand;
  return a;
}

}  // namespace spora::ze
