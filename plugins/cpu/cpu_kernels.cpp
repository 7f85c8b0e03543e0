// Kernel plan/launch for the cpu plugin: its own implementations first
// (oneDNN primitives), then the shared reference kernels. Plans are made once
// per (op, shapes, attrs) by the host and cached there; launch runs inline.
#include "cpu_kernels.h"

#include <pmmintrin.h>
#include <xmmintrin.h>

#include <memory>
#include <mutex>
#include <new>

#include "cpu_contention.h"
#include "cpu_parallel.h"
#include "cpu_state.h"
#include "error.h"
#include "trace_hooks.h"

struct spora_kernel {
  spora::plugin::KernelPlan plan;
  // The same implementation planned for one thread (cpu_contention.h), made
  // by the first launch that finds the cores contended; null when it
  // cannot be made or needs more workspace than `plan` got.
  std::once_flag serial_once;
  std::unique_ptr<spora::plugin::KernelPlan> serial;
};

namespace spora::cpu {

namespace {
std::vector<void (*)(plugin::KernelTable&)>& pending() {
  static std::vector<void (*)(plugin::KernelTable&)> v;
  return v;
}
}  // namespace

int add_cpu_kernels(void (*fn)(plugin::KernelTable&)) {
  pending().push_back(fn);
  return 0;
}

plugin::KernelTable& cpu_kernels() {
  static plugin::KernelTable* t = [] {
    auto* table = new plugin::KernelTable;
    for (auto fn : pending()) fn(*table);
    return table;
  }();
  return *t;
}

dnnl::engine& onednn_engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

dnnl::stream& onednn_stream() {
  thread_local dnnl::stream strm(onednn_engine());
  return strm;
}

bool onednn_dtype(int32_t dtype, dnnl::memory::data_type* out) {
  switch (dtype) {
    case SPORA_DTYPE_F32: *out = dnnl::memory::data_type::f32; return true;
    case SPORA_DTYPE_F16: *out = dnnl::memory::data_type::f16; return true;
    case SPORA_DTYPE_BF16: *out = dnnl::memory::data_type::bf16; return true;
    case SPORA_DTYPE_I32: *out = dnnl::memory::data_type::s32; return true;
    case SPORA_DTYPE_U8: *out = dnnl::memory::data_type::u8; return true;
    default: return false;
  }
}

namespace {

using plugin::guard;
using plugin::make_error;

// Denormals make long-running training loops crawl (momentum buffers decay
// into them), so kernels run with flush-to-zero and denormals-are-zero. The
// cpu device runs kernels on the caller's thread, so the caller's mode is
// restored afterwards: the plugin must not change the host program's
// floating-point environment.
class FlushDenormals {
 public:
  FlushDenormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | kFtz | kDaz); }
  ~FlushDenormals() { _mm_setcsr(saved_); }

 private:
  static constexpr unsigned kFtz = 0x8000, kDaz = 0x0040;
  unsigned saved_;
};

}  // namespace

// Union of the cpu's own ops and the reference ones.
const char* const* kernel_ops() {
  static std::vector<const char*> names = [] {
    std::vector<const char*> v;
    for (const char* const* n = plugin::reference_op_names(); *n; ++n) v.push_back(*n);
    for (const char* const* n = cpu_kernels().op_names(); *n; ++n) {
      bool seen = false;
      for (const char* m : v) seen = seen || std::string(m) == *n;
      if (!seen) v.push_back(*n);
    }
    v.push_back(nullptr);
    return v;
  }();
  return names.data();
}

spora_plugin_error_t* kernel_create(int32_t device, const spora_kernel_desc_t* desc, spora_kernel_t** out,
                                    size_t* workspace) {
  return guard("cpu", [&]() -> spora_plugin_error_t* {
    if (!out) return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[cpu] kernel_create: null output");
    if (device != 0) return make_error(SPORA_PLUGIN_NOT_FOUND, "[cpu] kernel_create: no device " + std::to_string(device));
    auto k = std::make_unique<spora_kernel>();
    std::string rejected;
    if (auto* e = plugin::plan_kernel(desc, &k->plan, &cpu_kernels(), &rejected)) return e;
    if (!rejected.empty()) log(SPORA_LOG_DEBUG, rejected + k->plan.op + ": using " + k->plan.impl);
    if (workspace) *workspace = k->plan.workspace;
    *out = k.release();
    return nullptr;
  });
}

namespace {

// The thread count kernels run on when the cores are free (SPORA_NUM_THREADS,
// set at initialize).
int configured_threads() {
  static const int n = omp_get_max_threads();
  return n;
}

// k's implementation planned again inside a SerialScope (k->serial), or
// nothing. Same implementation, so the same math; oneDNN's one-thread
// primitives may sum a reduction in another order than the parallel ones.
void plan_serial(spora_kernel& k) {
  auto s = std::make_unique<plugin::KernelPlan>(k.plan);
  s->state.reset();
  s->run = nullptr;
  s->workspace = 0;
  for (const plugin::KernelImpl* impl : plugin::implementations(k.plan.op, &cpu_kernels())) {
    if (std::string(impl->name) != k.plan.impl) continue;
    try {
      SerialScope one_thread(true);
      spora_plugin_error_t* e = impl->plan(*s);
      if (e) {
        e->destroy(e);
        return;
      }
    } catch (...) {
      return;  // no one-thread variant: the kernel keeps its threads
    }
    if (s->run && s->workspace <= k.plan.workspace) {
      log(SPORA_LOG_DEBUG, k.plan.op + ": one-thread variant planned (" + k.plan.impl + ")");
      k.serial = std::move(s);
    }
    return;
  }
}

}  // namespace

spora_plugin_error_t* kernel_destroy(spora_kernel_t* k) {
  delete k;
  return nullptr;
}

spora_plugin_error_t* kernel_launch(spora_kernel_t* k, const spora_devptr_t* inputs, const spora_devptr_t* outputs,
                                    spora_devptr_t workspace, spora_stream_t* stream) {
  if (!k || (k->plan.num_outputs > 0 && !outputs) || (k->plan.num_inputs > 0 && !inputs) || !stream)
    return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[cpu] kernel_launch: null argument");
  return guard("cpu", [&]() -> spora_plugin_error_t* {
    FlushDenormals ftz;
    // Contended cores: the one-thread variant (cpu_contention.h).
    const plugin::KernelPlan* plan = &k->plan;
    if (cores_contended(configured_threads())) {
      std::call_once(k->serial_once, [k] { plan_serial(*k); });
      if (k->serial) plan = k->serial.get();
    }
    SerialScope one_thread(plan != &k->plan);
    const uint64_t span = plugin::trace_begin(g_host, "cpu.kernel", k->plan.op.c_str());
    plugin::run_plan(*plan, inputs, outputs, workspace);
    plugin::trace_end(g_host, span);
    return nullptr;
  });
}

}  // namespace spora::cpu
