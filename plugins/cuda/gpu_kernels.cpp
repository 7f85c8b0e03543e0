// Kernels: every descriptor is first validated by the reference planner
// (plugins/common), so shapes, dtypes and attributes are checked by the same
// code as on cpu and sim; then the op's GPU family plans its launch.
#include <string>
#include <vector>

#include "error.h"
#include "gpu_api.h"
#include "gpu_state.h"
#include "gpu_trace.h"

namespace spora::gpu {
namespace {

using spora::plugin::guard;

const std::vector<GpuKernelEntry>& entries() {
  static const std::vector<GpuKernelEntry> all = [] {
    std::vector<GpuKernelEntry> v;
    add_elementwise_kernels(v);
    add_reduce_kernels(v);
    add_softmax_kernels(v);
    add_matmul_kernels(v);
    add_optim_kernels(v);
    add_loss_kernels(v);
    add_layout_kernels(v);
    add_indexing_kernels(v);
    add_dnn_kernels(v);
    add_norm_kernels(v);
    add_scan_kernels(v);
    add_random_kernels(v);
    add_pad_kernels(v);
    add_creation_kernels(v);
#if !defined(SPORA_GPU_HIP)
    add_fused_kernels(v);  // NVRTC: CUDA only
#endif
    return v;
  }();
  return all;
}

const GpuKernelEntry* find_entry(const std::string& op) {
  for (const auto& e : entries())
    if (op == e.op) return &e;
  return nullptr;
}

}  // namespace

const char* const* kernel_ops() {
  try {
    static const std::vector<const char*> names = [] {
      std::vector<const char*> v;
      for (const auto& e : entries()) v.push_back(e.op);
      v.push_back(nullptr);
      return v;
    }();
    return names.data();
  } catch (...) {
    static const char* const none[] = {nullptr};  // no error channel here
    return none;
  }
}

spora_plugin_error_t* kernel_create(int32_t device, const spora_kernel_desc_t* desc, spora_kernel_t** out,
                                    size_t* out_workspace) {
  return guard(kPluginName, [&]() -> spora_plugin_error_t* {
    if (!desc) return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, "kernel_create: desc is NULL");
    if (!out) return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, "kernel_create: out is NULL");
    State* state = nullptr;
    if (auto* err = get_state(&state)) return err;
    if (auto* err = use_device("kernel_create", device)) return err;
    const std::string op = desc->op ? desc->op : "";
    const GpuKernelEntry* entry = find_entry(op);
    if (!entry) return plugin_error(SPORA_PLUGIN_UNIMPLEMENTED, "no kernel for op '" + op + "'");
    auto kernel = std::make_shared<Kernel>();
    kernel->device = device;
    // The reference planner's message names the op and what is wrong.
    if (auto* err = spora::plugin::plan_kernel(desc, &kernel->plan.desc)) return err;
    if (auto* err = entry->plan(kernel->plan)) return err;
    const size_t workspace = kernel->plan.workspace;
    *out = static_cast<spora_kernel_t*>(state->kernels.add(std::move(kernel)));
    if (out_workspace) *out_workspace = workspace;
    return nullptr;
  });
}

spora_plugin_error_t* kernel_destroy(spora_kernel_t* kernel) {
  return guard(kPluginName, [&]() -> spora_plugin_error_t* {
    State* state = nullptr;
    if (auto* err = get_state(&state)) return err;
    // Launches already queued captured their parameters by value.
    if (!state->kernels.remove(kernel))
      return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT,
                          std::string("kernel_destroy: ") + (kernel ? "unknown or destroyed kernel" : "kernel is NULL"));
    return nullptr;
  });
}

spora_plugin_error_t* kernel_launch(spora_kernel_t* kernel, const spora_devptr_t* inputs,
                                    const spora_devptr_t* outputs, spora_devptr_t workspace,
                                    spora_stream_t* stream) {
  return guard(kPluginName, [&]() -> spora_plugin_error_t* {
    State* state = nullptr;
    if (auto* err = get_state(&state)) return err;
    std::shared_ptr<const Kernel> k = state->kernels.find(kernel);
    if (!k)
      return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT,
                          std::string("kernel_launch: ") + (kernel ? "unknown or destroyed kernel" : "kernel is NULL"));
    const std::string& op = k->plan.desc.op;
    std::shared_ptr<Stream> s;
    if (auto* err = get_stream("kernel_launch", stream, &s)) return err;
    if (s->device != k->device)
      return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, "kernel_launch(" + op + "): kernel planned for device " +
                                                             std::to_string(k->device) + " launched on a stream of device " +
                                                             std::to_string(s->device));
    const auto& d = k->plan.desc;
    if (d.num_inputs > 0 && !inputs) return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, "kernel_launch(" + op + "): inputs is NULL");
    if (!outputs) return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, "kernel_launch(" + op + "): outputs is NULL");
    if (k->plan.workspace > 0 && !workspace)
      return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, "kernel_launch(" + op + "): workspace is NULL");
    // On the stack: an eager op's launch allocates nothing on the host.
    const void* in[spora::plugin::kMaxOperands];
    void* outp[spora::plugin::kMaxOperands];
    for (int i = 0; i < d.num_inputs; ++i) {
      in[i] = inputs[i];
      if (!in[i] && d.in[i].bytes() > 0)
        return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, "kernel_launch(" + op + "): input " + std::to_string(i) + " is NULL");
    }
    for (int i = 0; i < d.num_outputs; ++i) {
      outp[i] = outputs[i];
      if (!outp[i] && d.out[i].bytes() > 0)
        return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, "kernel_launch(" + op + "): output " + std::to_string(i) + " is NULL");
    }
    // The kernels check cudaGetLastError after launching: clear what an
    // earlier call left there first.
    if (const cudaError_t prior = take_stale_error("kernel_launch"); prior != cudaSuccess)
      return runtime_error("kernel_launch(" + op + "): the device failed before this launch", prior);
    StreamTrace::Mark mark;
    if (s->trace) mark = s->trace->before(s->stream, StreamTrace::Kind::kKernel, op.c_str());
    const cudaError_t e = k->plan.launch(k->plan, in, outp, workspace, s->stream);
    if (s->trace) s->trace->after(mark, s->stream);
    if (e != cudaSuccess) return runtime_error("kernel_launch(" + op + ")", e);
    return nullptr;
  });
}

}  // namespace spora::gpu
