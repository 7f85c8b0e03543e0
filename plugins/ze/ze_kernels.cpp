// Kernels: kernel_create turns a descriptor into a recipe (ze_recipe.cpp) and
// fetches the recipe's kernels from the device's SPIR-V module; kernel_launch
// sets the arguments and appends zeCommandListAppendLaunchKernel to the stream.
#include <string>
#include <vector>

#include "error.h"
#include "kernel_plan.h"
#include "ze_api.h"
#include "ze_module.h"
#include "ze_recipe.h"
#include "ze_state.h"
#include "ze_stream.h"

namespace spora::ze {

struct Kernel {
  int32_t device = 0;
  std::string op;
  int32_t num_inputs = 0, num_outputs = 0;
  Recipe recipe;
  std::vector<ZeKernel*> kernels;  // one per launch, owned by the device's ModuleCache
  std::vector<size_t> bytes;       // per operand (inputs, then outputs), for range checks
};

using spora::plugin::guard;

const char* const* kernel_ops() { return recipe_ops(); }

spora_plugin_error_t* kernel_create(int32_t device, const spora_kernel_desc_t* desc, spora_kernel_t** out,
                                    size_t* out_workspace) {
  return guard("ze", [&]() -> spora_plugin_error_t* {
    if (!desc) return invalid("kernel_create: desc is NULL");
    if (!out) return invalid("kernel_create: out is NULL");
    if ((desc->num_inputs && !desc->inputs) || (desc->num_outputs && !desc->outputs) ||
        (desc->num_attrs && !desc->attrs))
      return invalid("kernel_create: desc has a NULL inputs, outputs or attrs array with a non-zero count");
    State* st = nullptr;
    Device* d = nullptr;
    if (auto* e = get_state(&st)) return e;
    if (auto* e = get_device("kernel_create", device, &d)) return e;
    spora::plugin::KernelPlan plan;
    if (auto* e = spora::plugin::describe(desc, &plan)) return e;
    auto k = std::make_shared<Kernel>();
    k->device = device;
    k->op = plan.op;
    k->num_inputs = plan.num_inputs;
    k->num_outputs = plan.num_outputs;
    if (auto* e = make_recipe(plan, &k->recipe)) return e;
    for (int i = 0; i < plan.num_inputs; ++i) k->bytes.push_back(plan.in[i].bytes());
    for (int i = 0; i < plan.num_outputs; ++i) k->bytes.push_back(plan.out[i].bytes());
    for (const Launch& l : k->recipe.launches) {
      ZeKernel* zk = nullptr;
      if (auto* e = d->modules->kernel(l.kernel, &zk)) return e;
      k->kernels.push_back(zk);
    }
    const size_t workspace = k->recipe.workspace;
    *out = static_cast<spora_kernel_t*>(st->kernels.add(std::move(k)));
    if (out_workspace) *out_workspace = workspace;
    return nullptr;
  });
}

spora_plugin_error_t* kernel_destroy(spora_kernel_t* kernel) {
  return guard("ze", [&]() -> spora_plugin_error_t* {
    State* st = nullptr;
    if (auto* e = get_state(&st)) return e;
    // Launches already appended carry their arguments; nothing else refers
    // to the recipe.
    if (!st->kernels.remove(kernel))
      return invalid(std::string("kernel_destroy: ") + (kernel ? "unknown or destroyed kernel" : "kernel is NULL"));
    return nullptr;
  });
}

spora_plugin_error_t* kernel_launch(spora_kernel_t* kernel, const spora_devptr_t* inputs,
                                    const spora_devptr_t* outputs, spora_devptr_t workspace,
                                    spora_stream_t* stream) {
  return guard("ze", [&]() -> spora_plugin_error_t* {
    State* st = nullptr;
    if (auto* e = get_state(&st)) return e;
    std::shared_ptr<Kernel> k = st->kernels.find(kernel);
    if (!k) return invalid(std::string("kernel_launch: ") + (kernel ? "unknown or destroyed kernel" : "kernel is NULL"));
    std::shared_ptr<Stream> s;
    if (auto* e = get_stream("kernel_launch", stream, &s)) return e;
    if (s->device() != k->device)
      return invalid("kernel_launch(" + k->op + "): kernel planned for device " + std::to_string(k->device) +
                     " launched on a stream of device " + std::to_string(s->device()));
    if (k->num_inputs > 0 && !inputs) return invalid("kernel_launch(" + k->op + "): inputs is NULL");
    if (k->num_outputs > 0 && !outputs) return invalid("kernel_launch(" + k->op + "): outputs is NULL");
    if (k->recipe.workspace > 0 && !workspace)
      return invalid("kernel_launch(" + k->op + "): the kernel needs a workspace of " +
                     std::to_string(k->recipe.workspace) + " bytes, got NULL");
    const std::string what = "kernel_launch(" + k->op + ")";
    // Every operand must lie inside a live allocation: a device would fault
    // asynchronously instead, far from this call.
    Device* d = nullptr;
    if (auto* e = get_device("kernel_launch", k->device, &d)) return e;
    for (int32_t i = 0; i < k->num_inputs + k->num_outputs; ++i) {
      const bool in = i < k->num_inputs;
      const void* ptr = in ? inputs[i] : outputs[i - k->num_inputs];
      const std::string operand = in ? "input " + std::to_string(i) : "output " + std::to_string(i - k->num_inputs);
      if (auto* e = check_range(d, ptr, k->bytes[static_cast<size_t>(i)], what + " " + operand)) return e;
    }
    if (k->recipe.workspace > 0)
      if (auto* e = check_range(d, workspace, k->recipe.workspace, what + " workspace")) return e;
    // The profiler sees the op's launches (a recipe may have several) as
    // one ze.kernel span; another thread's work enqueued on the same stream
    // in between would fall inside it.
    Traced traced(*s, StreamTrace::Kind::kKernel, k->op.c_str());
    for (size_t i = 0; i < k->recipe.launches.size(); ++i) {
      const Launch& l = k->recipe.launches[i];
      ZeKernel* zk = k->kernels[i];
      // Arguments are kernel-object state until the append captures them.
      std::lock_guard<std::mutex> lock(zk->mu);
      SPORA_ZE_CHECK(zeKernelSetGroupSize(zk->handle, l.group_size[0], l.group_size[1], l.group_size[2]), what);
      for (size_t a = 0; a < l.args.size(); ++a) {
        const LaunchArg& arg = l.args[a];
        const uint32_t index = static_cast<uint32_t>(a);
        if (arg.operand >= 0 || arg.operand == kWorkspace) {
          const void* ptr = arg.operand == kWorkspace         ? workspace
                            : arg.operand < k->num_inputs ? inputs[arg.operand]
                                                          : outputs[arg.operand - k->num_inputs];
          SPORA_ZE_CHECK(zeKernelSetArgumentValue(zk->handle, index, sizeof(ptr), &ptr), what + " " + l.kernel);
        } else {
          SPORA_ZE_CHECK(zeKernelSetArgumentValue(zk->handle, index, arg.value.size(), arg.value.data()),
                         what + " " + l.kernel);
        }
      }
      const ze_group_count_t groups{l.groups[0], l.groups[1], l.groups[2]};
      if (auto* e = s->enqueue(what.c_str(), [&](ze_command_list_handle_t list) {
            return zeCommandListAppendLaunchKernel(list, zk->handle, &groups, nullptr, 0, nullptr);
          }, "zeCommandListAppendLaunchKernel"))
        return e;
    }
    return nullptr;
  });
}

}  // namespace spora::ze
