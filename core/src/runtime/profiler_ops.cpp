// The profiler's op, collective and memory records (profiler.h).
#include <mutex>
#include <vector>

#include "runtime/device.h"
#include "runtime/profiler.h"
#include "runtime/tensor.h"
#include "support/error.h"

namespace spora::profiler {

namespace {

// Device memory is sampled after an op at most this often per device: a
// plugin's statistics call is cheap but not free, and a counter track needs
// no more detail than the ops around it show.
constexpr int64_t kMemorySampleNs = 100 * 1000;

struct MemorySampler {
  std::mutex mu;
  struct State {
    const Device* device;
    int64_t last = -1;
    bool unsupported = false;
  };
  std::vector<State> devices;  // a handful: searched, not hashed

  State& of(const Device* d) {
    for (State& s : devices)
      if (s.device == d) return s;
    devices.push_back({d});
    return devices.back();
  }
};

MemorySampler& sampler() {
  static auto* s = new MemorySampler;
  return *s;
}

void sample_memory(Device* device, int64_t now) {
  MemorySampler& m = sampler();
  {
    std::lock_guard<std::mutex> lock(m.mu);
    MemorySampler::State& st = m.of(device);
    if (st.unsupported || (st.last >= 0 && now - st.last < kMemorySampleNs && now >= st.last)) return;
    st.last = now;
  }
  Device::MemoryStats stats;
  try {
    stats = device->memory_stats();
  } catch (const Error&) {  // a plugin without statistics (ABI 1.0): no counter
    std::lock_guard<std::mutex> lock(m.mu);
    m.of(device).unsupported = true;
    return;
  }
  record_memory(device->name(), now, static_cast<int64_t>(stats.allocated), static_cast<int64_t>(stats.reserved));
}

}  // namespace

void record_op(const char* cat, const std::string& op, int64_t t0_ns, const IoArgs& io, Device* device,
               const char* file, int32_t line) {
  const int64_t t1 = now_ns();
  record_op_span(cat, op, t0_ns, t1, io, device ? &device->name() : nullptr, file, line);
  if (device) sample_memory(device, t1);
}

void record_op(const char* cat, const std::string& op, int64_t t0_ns, const Tensor* const* inputs, int num_inputs,
               const Tensor* outputs, int num_outputs, Device* device, const char* file, int32_t line) {
  IoArgs io;
  for (int i = 0; i < num_inputs; ++i) io.input(inputs[i]->dtype, inputs[i]->shape.dims, inputs[i]->shape.rank);
  for (int i = 0; i < num_outputs; ++i) io.output(outputs[i].dtype, outputs[i].shape.dims, outputs[i].shape.rank);
  if (!device && num_outputs > 0 && outputs[0].buffer) device = outputs[0].device();
  if (!device && num_inputs > 0 && inputs[0]->buffer) device = inputs[0]->device();
  record_op(cat, op, t0_ns, io, device, file, line);
}

void record_collective(const std::string& op, int64_t t0_ns, uint64_t bytes, const std::string& group, int32_t rank) {
  record_span(Track::kHost, "collective", op, t0_ns, now_ns(),
              "\"bytes\":" + std::to_string(bytes) + ",\"group\":\"" + json_escape(group) +
                  "\",\"rank\":" + std::to_string(rank));
}

}  // namespace spora::profiler
