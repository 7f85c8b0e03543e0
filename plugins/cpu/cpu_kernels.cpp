// Kernel plan/launch for the cpu plugin: a oneDNN primitive where one fits,
// else the shared reference kernels. Plans are made once per (op, shapes,
// attrs) by the host and cached there.
#include "cpu_kernels.h"

#include <xmmintrin.h>
#include <pmmintrin.h>

#include <new>

#include "cpu_state.h"
#include "error.h"

struct spora_kernel {
  spora::plugin::KernelPlan plan;
  std::unique_ptr<spora::cpu::FastKernel> fast;
};

namespace spora::cpu {
namespace {

using plugin::guard;
using plugin::make_error;

// Denormals make long-running training loops crawl (momentum buffers decay
// into them), so flush them on every thread that runs kernels.
inline void enable_ftz() {
  static thread_local bool done = false;
  if (!done) {
    _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
    _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
    done = true;
  }
}

const char* const* kernel_ops() { return plugin::reference_op_names(); }

spora_plugin_error_t* kernel_create(int32_t device, const spora_kernel_desc_t* desc, spora_kernel_t** out,
                                    size_t* workspace) {
  return guard("cpu", [&]() -> spora_plugin_error_t* {
    if (!out) return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[cpu] kernel_create: null output");
    if (device != 0) return make_error(SPORA_PLUGIN_NOT_FOUND, "[cpu] kernel_create: no device " + std::to_string(device));
    auto k = std::make_unique<spora_kernel>();
    if (auto* e = plugin::plan_kernel(desc, &k->plan)) return e;
    if (k->plan.kind == plugin::OpKind::kMatmul) {
      std::string why;
      k->fast = make_onednn_matmul(k->plan, &why);
      if (!k->fast) log(SPORA_LOG_DEBUG, "matmul: reference kernel (" + why + ")");
    }
    if (workspace) *workspace = 0;
    *out = k.release();
    return nullptr;
  });
}

spora_plugin_error_t* kernel_destroy(spora_kernel_t* k) {
  delete k;
  return nullptr;
}

spora_plugin_error_t* kernel_launch(spora_kernel_t* k, const spora_devptr_t* inputs, const spora_devptr_t* outputs,
                                    spora_devptr_t, spora_stream_t* stream) {
  if (!k || !outputs || (k->plan.num_inputs > 0 && !inputs) || !stream)
    return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[cpu] kernel_launch: null argument");
  return guard("cpu", [&]() -> spora_plugin_error_t* {
    enable_ftz();
    if (k->fast) k->fast->run(inputs, outputs);
    else plugin::run_reference(k->plan, inputs, outputs);
    return nullptr;
  });
}

}  // namespace

void fill_kernel_api(spora_device_api_t* t) {
  t->kernel_ops = kernel_ops;
  t->kernel_create = kernel_create;
  t->kernel_destroy = kernel_destroy;
  t->kernel_launch = kernel_launch;
}

}  // namespace spora::cpu
