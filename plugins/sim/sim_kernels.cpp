// Kernels: planned by the shared plan_kernel, run by the shared reference
// implementations on the stream's worker thread, on arena memory.
//
// Launches are counted per device; with sim.fault_after_launches=N (env
// SPORA_SIM_FAULT_AFTER_LAUNCHES) the N-th one faults when the stream runs
// it, like an illegal address on a GPU: the device is failed from then on
// (sticky, sim_device.h). An exception from a reference kernel (bad data,
// e.g. an index out of range) stays an ordinary, non-sticky stream error.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "error.h"
#include "kernel_plan.h"
#include "sim_api.h"
#include "sim_state.h"
#include "trace_hooks.h"

namespace spora::sim {
namespace {

using spora::plugin::guard;
using spora::plugin::KernelPlan;
using spora::plugin::make_error;
using spora::plugin::TensorInfo;

spora_plugin_error_t* invalid(const std::string& message) {
  return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[sim] " + message);
}

// Bytes a dense tensor occupies, or an error if that overflows.
spora_plugin_error_t* tensor_bytes(const Kernel& k, const TensorInfo& t, const std::string& what, size_t* out) {
  size_t bytes = spora::plugin::dtype_size(t.dtype);
  for (int32_t i = 0; i < t.shape.rank; ++i) {
    const int64_t dim = t.shape.dims[i];
    if (dim < 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(dim), &bytes)) {
      return invalid("kernel_launch(" + k.op + "): " + what + " size overflows");
    }
  }
  *out = bytes;
  return nullptr;
}

// Translates one operand, checking it covers the bytes the plan will touch.
spora_plugin_error_t* operand(const Kernel& k, const Arena& arena, spora_devptr_t p, const TensorInfo& t,
                              const std::string& what, void** out) {
  size_t bytes = 0;
  if (auto* err = tensor_bytes(k, t, what, &bytes)) return err;
  const std::string label = "kernel_launch(" + k.op + ") " + what;
  return arena.translate(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)), bytes, label.c_str(), out);
}

// The range an operand covers (already validated by operand()), for a
// capture's replay to re-check.
Stream::Range range_of(const Kernel& k, spora_devptr_t p, const TensorInfo& t, const std::string& what) {
  size_t bytes = 0;
  if (auto* err = tensor_bytes(k, t, what, &bytes)) err->destroy(err);
  return Stream::Range{static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)), bytes,
                       "kernel " + k.op + " " + what};
}

// Ops listed in SPORA_SIM_DISABLE_OPS (comma-separated) report "no kernel",
// so tests can exercise the host's decomposition and fallback paths the
// way a vendor device with a partial op set would.
bool disabled(const std::string& op) {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> v;
    const std::string list = config_string("sim.disable_ops");
    size_t start = 0;
    while (start <= list.size()) {
      const size_t comma = list.find(',', start);
      const std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (!item.empty()) v.push_back(item);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    return v;
  }();
  for (const auto& o : ops)
    if (o == op) return true;
  return false;
}

}  // namespace

const char* const* kernel_ops() {
  try {
    return spora::plugin::reference_op_names();
  } catch (...) {
    // No error channel here: advertise no kernels rather than let it escape.
    static const char* const none[] = {nullptr};
    return none;
  }
}

spora_plugin_error_t* kernel_create(int32_t device, const spora_kernel_desc_t* desc, spora_kernel_t** out,
                                    size_t* out_workspace) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    if (!desc) return invalid("kernel_create: desc is NULL");
    if (!out) return invalid("kernel_create: out is NULL");
    // plan_kernel indexes these arrays by their counts.
    if ((desc->num_inputs && !desc->inputs) || (desc->num_outputs && !desc->outputs) ||
        (desc->num_attrs && !desc->attrs)) {
      return invalid("kernel_create: desc has a NULL inputs, outputs or attrs array with a non-zero count");
    }
    State* state = nullptr;
    Arena* arena = nullptr;
    std::shared_ptr<Device> dev;
    if (auto* err = get_arena("kernel_create", device, &arena)) return err;
    if (auto* err = get_device("kernel_create", device, &dev)) return err;
    if (auto* err = dev->sticky_error("kernel_create")) return err;
    if (auto* err = get_state(&state)) return err;
    auto kernel = std::make_shared<Kernel>();
    kernel->device = device;
    kernel->op = desc->op ? desc->op : "(null)";
    if (desc->op && disabled(desc->op))
      return make_error(SPORA_PLUGIN_UNIMPLEMENTED,
                        std::string("[sim] ") + desc->op + " is disabled by SPORA_SIM_DISABLE_OPS");
    // plan_kernel's message already says what is unsupported or malformed.
    if (auto* err = spora::plugin::plan_kernel(desc, &kernel->plan)) return err;
    const size_t workspace = kernel->plan.workspace;
    *out = static_cast<spora_kernel_t*>(state->kernels.add(std::move(kernel)));
    if (out_workspace) *out_workspace = workspace;
    return nullptr;
  });
}

spora_plugin_error_t* kernel_destroy(spora_kernel_t* kernel) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    State* state = nullptr;
    if (auto* err = get_state(&state)) return err;
    // Launches still queued hold their own reference to the kernel.
    if (!state->kernels.remove(kernel)) {
      return invalid(std::string("kernel_destroy: ") + (kernel ? "unknown or destroyed kernel" : "kernel is NULL"));
    }
    return nullptr;
  });
}

spora_plugin_error_t* kernel_launch(spora_kernel_t* kernel, const spora_devptr_t* inputs,
                                    const spora_devptr_t* outputs, spora_devptr_t workspace,
                                    spora_stream_t* stream) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    State* state = nullptr;
    if (auto* err = get_state(&state)) return err;
    std::shared_ptr<const Kernel> k = state->kernels.find(kernel);
    if (!k) return invalid(std::string("kernel_launch: ") + (kernel ? "unknown or destroyed kernel" : "kernel is NULL"));
    std::shared_ptr<Stream> s;
    if (auto* err = get_stream("kernel_launch", stream, &s)) return err;
    if (s->device() != k->device) {
      return invalid("kernel_launch(" + k->op + "): kernel planned for device " + std::to_string(k->device) +
                     " launched on a stream of device " + std::to_string(s->device()));
    }
    Device& dev = s->device_state();
    if (auto* err = dev.sticky_error("kernel_launch")) return err;
    const KernelPlan& plan = k->plan;
    if (plan.num_inputs > 0 && !inputs) return invalid("kernel_launch(" + k->op + "): inputs is NULL");
    if (!outputs) return invalid("kernel_launch(" + k->op + "): outputs is NULL");

    // Translate (and so validate) every buffer now, so a bad address is
    // reported by this call rather than later by the stream.
    Arena* arena = nullptr;
    if (auto* err = get_arena("kernel_launch", s->device(), &arena)) return err;
    std::vector<Stream::Range> ranges;  // what a replay of a capture re-checks
    std::vector<const void*> in(static_cast<size_t>(plan.num_inputs));
    std::vector<void*> out(static_cast<size_t>(plan.num_outputs));
    for (int32_t i = 0; i < plan.num_inputs; ++i) {
      void* p = nullptr;
      if (auto* err = operand(*k, *arena, inputs[i], plan.in[i], "input " + std::to_string(i), &p)) return err;
      in[static_cast<size_t>(i)] = p;
      if (s->capturing()) ranges.push_back(range_of(*k, inputs[i], plan.in[i], "input " + std::to_string(i)));
    }
    for (int32_t i = 0; i < plan.num_outputs; ++i) {
      if (auto* err = operand(*k, *arena, outputs[i], plan.out[i], "output " + std::to_string(i), &out[static_cast<size_t>(i)]))
        return err;
      if (s->capturing()) ranges.push_back(range_of(*k, outputs[i], plan.out[i], "output " + std::to_string(i)));
    }
    void* ws = nullptr;
    if (plan.workspace > 0) {
      spora::plugin::TensorInfo w;
      w.dtype = SPORA_DTYPE_U8;
      w.shape.rank = 1;
      w.shape.dims[0] = static_cast<int64_t>(plan.workspace);
      if (auto* err = operand(*k, *arena, workspace, w, "workspace", &ws)) return err;
      if (s->capturing()) ranges.push_back(range_of(*k, workspace, w, "workspace"));
    }

    const uint64_t launch = dev.count_launch();
    const uint64_t fault_at = dev.config().fault_after_launches;
    if (fault_at != 0 && launch == fault_at) {
      Device* failing = &dev;  // the stream keeps its device alive
      const std::string message = "[sim] illegal memory access in kernel " + k->op +
                                  " (injected by SPORA_SIM_FAULT_AFTER_LAUNCHES=" + std::to_string(fault_at) +
                                  "); the device is unusable";
      return s->enqueue(
          [failing, message](const spora_plugin_error_t*) -> spora_plugin_error_t* {
            failing->fail(message);
            return make_error(SPORA_PLUGIN_UNAVAILABLE, message);
          },
          Stream::Where::kWorker);
    }
    // Exceptions thrown while running become the stream's error (Stream::run).
    const auto min_time = std::chrono::microseconds(dev.config().kernel_us);
    // For the host's profiler: queued here, run on the stream's worker
    // (trace_hooks.h). A captured kernel runs at each replay instead, with
    // no launch of its own to point back to.
    const spora_host_t* host = g_host.load(std::memory_order_acquire);
    uint64_t queued = spora::plugin::trace_begin(host, "sim.launch", k->op.c_str());
    if (queued && s->capturing()) queued = 0;
    return s->enqueue(
        [k, in = std::move(in), out = std::move(out), ws, min_time, host,
         queued](const spora_plugin_error_t*) -> spora_plugin_error_t* {
          spora::plugin::trace_end(host, queued);
          const uint64_t span = spora::plugin::trace_begin(host, "sim.kernel", k->op.c_str());
          const auto start = std::chrono::steady_clock::now();
          spora::plugin::run_plan(k->plan, in.data(), out.data(), ws);
          if (min_time.count() > 0) std::this_thread::sleep_until(start + min_time);
          spora::plugin::trace_end(host, span);
          return nullptr;
        },
        Stream::Where::kWorker, false, nullptr, std::move(ranges));
  });
}

}  // namespace spora::sim
