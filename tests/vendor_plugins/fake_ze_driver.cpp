// A fake Level Zero driver for tests: the Level Zero loader loads it through
// ZE_ENABLE_ALT_DRIVERS, so the ze plugin's host-side runtime (discovery,
// memory, copies, streams, events, timestamps, host callbacks, module and
// kernel objects) runs for real against it. It is NOT a device:
//   - "device memory" is host memory;
//   - each immediate command list is a host thread running its commands in
//     order (synchronous lists run them in the caller);
//   - zeModuleCreate only checks the SPIR-V header and reads the kernel
//     names of its OpEntryPoint instructions, and a launch only counts:
//     kernels never execute here (their math is checked on PoCL instead).
// Only the functions the plugin calls are filled in; the loader reports
// the rest as unsupported.
#include <level_zero/ze_api.h>
#include <level_zero/ze_ddi.h>
#include <level_zero/zes_ddi.h>
#include <level_zero/zet_ddi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

struct Driver {
  int dummy = 0;
} g_driver;
struct Device {
  int dummy = 0;
} g_device;
struct Context {
  int dummy = 0;
};

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

struct Event {
  std::mutex mu;
  std::condition_variable cv;
  bool signaled = false;
  void signal() {
    std::lock_guard<std::mutex> l(mu);
    signaled = true;
    cv.notify_all();
  }
  void reset() {
    std::lock_guard<std::mutex> l(mu);
    signaled = false;
  }
  bool wait(uint64_t timeout_ns) {
    std::unique_lock<std::mutex> l(mu);
    if (timeout_ns == UINT64_MAX) {
      cv.wait(l, [&] { return signaled; });
      return true;
    }
    return cv.wait_for(l, std::chrono::nanoseconds(timeout_ns), [&] { return signaled; });
  }
};
struct EventPool {
  int dummy = 0;
};

// An immediate command list: asynchronous ones run their commands on a
// worker thread, in append order.
struct List {
  bool sync = false;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> q;
  bool stop = false;
  std::thread worker;
  void start() {
    worker = std::thread([this] {
      for (;;) {
        std::function<void()> f;
        {
          std::unique_lock<std::mutex> l(mu);
          cv.wait(l, [&] { return stop || !q.empty(); });
          if (q.empty()) return;
          f = std::move(q.front());
          q.pop_front();
        }
        f();
      }
    });
  }
  void push(std::function<void()> f) {
    if (sync) return f();
    std::lock_guard<std::mutex> l(mu);
    q.push_back(std::move(f));
    cv.notify_one();
  }
  ~List() {
    {
      std::lock_guard<std::mutex> l(mu);
      stop = true;
    }
    cv.notify_all();
    if (worker.joinable()) worker.join();
  }
};

// Waits for the events, runs `f`, signals `signal`: one command.
void command(ze_command_list_handle_t h, ze_event_handle_t signal, uint32_t nwait, ze_event_handle_t* waits,
             std::function<void()> f) {
  std::vector<Event*> w;
  for (uint32_t i = 0; i < nwait; ++i) w.push_back(reinterpret_cast<Event*>(waits[i]));
  auto* ev = reinterpret_cast<Event*>(signal);
  reinterpret_cast<List*>(h)->push([w, ev, f = std::move(f)] {
    for (Event* e : w) e->wait(UINT64_MAX);
    if (f) f();
    if (ev) ev->signal();
  });
}

struct Module {
  std::set<std::string> kernels;
};
struct Kernel {
  std::string name;
  uint32_t args_set = 0;
};
std::atomic<uint64_t> g_launches{0};
std::atomic<int64_t> g_event_pools{0};  // live event pools

// --- global, driver, device, context ---
ze_result_t Init(ze_init_flags_t) { return ZE_RESULT_SUCCESS; }
ze_result_t DriverGet(uint32_t* count, ze_driver_handle_t* out) {
  if (out && *count >= 1) out[0] = reinterpret_cast<ze_driver_handle_t>(&g_driver);
  *count = 1;
  return ZE_RESULT_SUCCESS;
}
ze_result_t DriverGetApiVersion(ze_driver_handle_t, ze_api_version_t* v) {
  *v = ZE_API_VERSION_1_4;
  return ZE_RESULT_SUCCESS;
}
ze_result_t DriverGetProperties(ze_driver_handle_t, ze_driver_properties_t* p) {
  std::memset(&p->uuid, 0x5a, sizeof p->uuid);
  p->driverVersion = 1;
  return ZE_RESULT_SUCCESS;
}
ze_result_t DriverGetExtensionProperties(ze_driver_handle_t, uint32_t* count, ze_driver_extension_properties_t*) {
  *count = 0;
  return ZE_RESULT_SUCCESS;
}
ze_result_t DeviceGet(ze_driver_handle_t, uint32_t* count, ze_device_handle_t* out) {
  if (out && *count >= 1) out[0] = reinterpret_cast<ze_device_handle_t>(&g_device);
  *count = 1;
  return ZE_RESULT_SUCCESS;
}
ze_result_t DeviceGetProperties(ze_device_handle_t, ze_device_properties_t* p) {
  p->type = ZE_DEVICE_TYPE_VPU;
  p->vendorId = 0x5350;
  p->deviceId = 42;
  p->numSlices = 1;
  p->numSubslicesPerSlice = 2;
  p->numEUsPerSubslice = 4;
  p->timerResolution = 1000000000ull;  // ticks per second (API >= 1.1): one tick per ns
  p->timestampValidBits = 64;
  std::strncpy(p->name, "Spora fake Level Zero driver (host threads, no device)", ZE_MAX_DEVICE_NAME - 1);
  return ZE_RESULT_SUCCESS;
}
ze_result_t DeviceGetMemoryProperties(ze_device_handle_t, uint32_t* count, ze_device_memory_properties_t* p) {
  if (p && *count >= 1) p[0].totalSize = 1ull << 30;
  *count = 1;
  return ZE_RESULT_SUCCESS;
}
ze_result_t DeviceGetCommandQueueGroupProperties(ze_device_handle_t, uint32_t* count,
                                                 ze_command_queue_group_properties_t* p) {
  // Group 0 copies only, group 1 computes: the plugin must pick 1.
  if (p && *count >= 2) {
    p[0].flags = ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY;
    p[0].numQueues = 1;
    p[1].flags = ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE | ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY;
    p[1].numQueues = 1;
  }
  *count = 2;
  return ZE_RESULT_SUCCESS;
}
ze_result_t ContextCreate(ze_driver_handle_t, const ze_context_desc_t*, ze_context_handle_t* out) {
  *out = reinterpret_cast<ze_context_handle_t>(new Context);
  return ZE_RESULT_SUCCESS;
}
ze_result_t ContextDestroy(ze_context_handle_t c) {
  delete reinterpret_cast<Context*>(c);
  return ZE_RESULT_SUCCESS;
}

// --- memory ---
void* alloc(size_t size, size_t align) {
  if (align == 0) align = 64;
  if (size > (1ull << 30)) return nullptr;  // the fake's 1 GiB "device memory"
  void* p = std::aligned_alloc(align, (size + align - 1) / align * align);
  // All ones (a NaN in every float): a kernel that never ran cannot leave
  // a plausible result behind in recycled host memory.
  if (p) std::memset(p, 0xff, size);
  return p;
}
ze_result_t MemAllocDevice(ze_context_handle_t, const ze_device_mem_alloc_desc_t*, size_t size, size_t align,
                           ze_device_handle_t, void** out) {
  *out = alloc(size, align);
  return *out ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
}
ze_result_t MemAllocHost(ze_context_handle_t, const ze_host_mem_alloc_desc_t*, size_t size, size_t align, void** out) {
  *out = alloc(size, align);
  return *out ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
}
ze_result_t MemFree(ze_context_handle_t, void* p) {
  std::free(p);
  return ZE_RESULT_SUCCESS;
}

// --- command lists ---
ze_result_t ListCreateImmediate(ze_context_handle_t, ze_device_handle_t, const ze_command_queue_desc_t* d,
                                ze_command_list_handle_t* out) {
  if (d->ordinal != 1) return ZE_RESULT_ERROR_INVALID_ARGUMENT;  // the compute group
  auto* l = new List;
  l->sync = d->mode == ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS;
  if (!l->sync) l->start();
  *out = reinterpret_cast<ze_command_list_handle_t>(l);
  return ZE_RESULT_SUCCESS;
}
ze_result_t ListDestroy(ze_command_list_handle_t h) {
  delete reinterpret_cast<List*>(h);
  return ZE_RESULT_SUCCESS;
}
std::atomic<bool> g_fail_signal_barriers{false};
ze_result_t AppendBarrier(ze_command_list_handle_t h, ze_event_handle_t sig, uint32_t n, ze_event_handle_t* w) {
  if (sig && g_fail_signal_barriers) return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;  // appends nothing
  command(h, sig, n, w, nullptr);
  return ZE_RESULT_SUCCESS;
}
ze_result_t AppendMemoryCopy(ze_command_list_handle_t h, void* dst, const void* src, size_t size,
                             ze_event_handle_t sig, uint32_t n, ze_event_handle_t* w) {
  command(h, sig, n, w, [=] { std::memcpy(dst, src, size); });
  return ZE_RESULT_SUCCESS;
}
ze_result_t AppendMemoryFill(ze_command_list_handle_t h, void* dst, const void* pattern, size_t psize, size_t size,
                             ze_event_handle_t sig, uint32_t n, ze_event_handle_t* w) {
  if (psize != 1) return ZE_RESULT_ERROR_UNSUPPORTED_SIZE;
  const auto* pat = static_cast<const unsigned char*>(pattern);  // read when the fill runs, like a device may
  command(h, sig, n, w, [=] { std::memset(dst, *pat, size); });
  return ZE_RESULT_SUCCESS;
}
ze_result_t AppendSignalEvent(ze_command_list_handle_t h, ze_event_handle_t e) {
  command(h, e, 0, nullptr, nullptr);
  return ZE_RESULT_SUCCESS;
}
ze_result_t AppendWaitOnEvents(ze_command_list_handle_t h, uint32_t n, ze_event_handle_t* w) {
  command(h, nullptr, n, w, nullptr);
  return ZE_RESULT_SUCCESS;
}
ze_result_t AppendEventReset(ze_command_list_handle_t h, ze_event_handle_t e) {
  auto* ev = reinterpret_cast<Event*>(e);
  command(h, nullptr, 0, nullptr, [ev] { ev->reset(); });
  return ZE_RESULT_SUCCESS;
}
ze_result_t AppendWriteGlobalTimestamp(ze_command_list_handle_t h, uint64_t* dst, ze_event_handle_t sig, uint32_t n,
                                       ze_event_handle_t* w) {
  command(h, sig, n, w, [dst] { *dst = now_ns(); });
  return ZE_RESULT_SUCCESS;
}
ze_result_t AppendLaunchKernel(ze_command_list_handle_t h, ze_kernel_handle_t, const ze_group_count_t* g,
                               ze_event_handle_t sig, uint32_t n, ze_event_handle_t* w) {
  if (!g || g->groupCountX == 0 || g->groupCountY == 0 || g->groupCountZ == 0) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  command(h, sig, n, w, [] { ++g_launches; });
  return ZE_RESULT_SUCCESS;
}

// --- events ---
ze_result_t EventPoolCreate(ze_context_handle_t, const ze_event_pool_desc_t*, uint32_t, ze_device_handle_t*,
                            ze_event_pool_handle_t* out) {
  *out = reinterpret_cast<ze_event_pool_handle_t>(new EventPool);
  ++g_event_pools;
  return ZE_RESULT_SUCCESS;
}
ze_result_t EventPoolDestroy(ze_event_pool_handle_t p) {
  delete reinterpret_cast<EventPool*>(p);
  --g_event_pools;
  return ZE_RESULT_SUCCESS;
}
ze_result_t EventCreate(ze_event_pool_handle_t, const ze_event_desc_t*, ze_event_handle_t* out) {
  *out = reinterpret_cast<ze_event_handle_t>(new Event);
  return ZE_RESULT_SUCCESS;
}
ze_result_t EventDestroy(ze_event_handle_t e) {
  delete reinterpret_cast<Event*>(e);
  return ZE_RESULT_SUCCESS;
}
ze_result_t EventHostSynchronize(ze_event_handle_t e, uint64_t timeout) {
  return reinterpret_cast<Event*>(e)->wait(timeout) ? ZE_RESULT_SUCCESS : ZE_RESULT_NOT_READY;
}
ze_result_t EventHostSignal(ze_event_handle_t e) {
  reinterpret_cast<Event*>(e)->signal();
  return ZE_RESULT_SUCCESS;
}
ze_result_t EventHostReset(ze_event_handle_t e) {
  reinterpret_cast<Event*>(e)->reset();
  return ZE_RESULT_SUCCESS;
}
ze_result_t EventQueryStatus(ze_event_handle_t e) {
  return reinterpret_cast<Event*>(e)->wait(0) ? ZE_RESULT_SUCCESS : ZE_RESULT_NOT_READY;
}

// --- modules and kernels ---
// Reads the names of the SPIR-V module's OpEntryPoint instructions.
bool spirv_entry_points(const uint32_t* w, size_t words, std::set<std::string>* out) {
  if (words < 5 || w[0] != 0x07230203u) return false;
  for (size_t i = 5; i < words;) {
    const uint32_t count = w[i] >> 16, op = w[i] & 0xffffu;
    if (count == 0 || i + count > words) return false;
    if (op == 15 && count > 3) {  // OpEntryPoint: model, id, name...
      const char* s = reinterpret_cast<const char*>(&w[i + 3]);
      out->insert(std::string(s, strnlen(s, (count - 3) * 4)));
    }
    i += count;
  }
  return true;
}
ze_result_t ModuleCreate(ze_context_handle_t, ze_device_handle_t, const ze_module_desc_t* d, ze_module_handle_t* out,
                         ze_module_build_log_handle_t* log) {
  if (log) *log = nullptr;
  auto* m = new Module;
  if (d->format != ZE_MODULE_FORMAT_IL_SPIRV || d->inputSize % 4 != 0 ||
      !spirv_entry_points(reinterpret_cast<const uint32_t*>(d->pInputModule), d->inputSize / 4, &m->kernels)) {
    delete m;
    return ZE_RESULT_ERROR_MODULE_BUILD_FAILURE;
  }
  *out = reinterpret_cast<ze_module_handle_t>(m);
  return ZE_RESULT_SUCCESS;
}
ze_result_t ModuleDestroy(ze_module_handle_t m) {
  delete reinterpret_cast<Module*>(m);
  return ZE_RESULT_SUCCESS;
}
ze_result_t BuildLogDestroy(ze_module_build_log_handle_t) { return ZE_RESULT_SUCCESS; }
ze_result_t BuildLogGetString(ze_module_build_log_handle_t, size_t* size, char* s) {
  if (s && *size) s[0] = '\0';
  *size = 1;
  return ZE_RESULT_SUCCESS;
}
ze_result_t KernelCreate(ze_module_handle_t m, const ze_kernel_desc_t* d, ze_kernel_handle_t* out) {
  if (!reinterpret_cast<Module*>(m)->kernels.count(d->pKernelName)) return ZE_RESULT_ERROR_INVALID_KERNEL_NAME;
  *out = reinterpret_cast<ze_kernel_handle_t>(new Kernel{d->pKernelName});
  return ZE_RESULT_SUCCESS;
}
ze_result_t KernelDestroy(ze_kernel_handle_t k) {
  delete reinterpret_cast<Kernel*>(k);
  return ZE_RESULT_SUCCESS;
}
ze_result_t KernelSetGroupSize(ze_kernel_handle_t, uint32_t x, uint32_t y, uint32_t z) {
  return x && y && z && x * y * z <= 1024 ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION;
}
ze_result_t KernelSetArgumentValue(ze_kernel_handle_t k, uint32_t index, size_t size, const void* value) {
  // Every argument of the plugin's kernels is 4, 8 or 64 (long8) bytes.
  if (!value || (size != 4 && size != 8 && size != 64)) return ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE;
  reinterpret_cast<Kernel*>(k)->args_set |= 1u << (index & 31);
  return ZE_RESULT_SUCCESS;
}

}  // namespace

// The loader's driver interface: one exported getter per function table.
#define FAKE_TABLE(Getter, Type) FAKE_EXPORT ze_result_t Getter(ze_api_version_t, Type* t)
FAKE_TABLE(zeGetGlobalProcAddrTable, ze_global_dditable_t) {
  t->pfnInit = Init;
  return ZE_RESULT_SUCCESS;
}
FAKE_TABLE(zeGetDriverProcAddrTable, ze_driver_dditable_t) {
  t->pfnGet = DriverGet;
  t->pfnGetApiVersion = DriverGetApiVersion;
  t->pfnGetProperties = DriverGetProperties;
  t->pfnGetExtensionProperties = DriverGetExtensionProperties;
  return ZE_RESULT_SUCCESS;
}
FAKE_TABLE(zeGetDeviceProcAddrTable, ze_device_dditable_t) {
  t->pfnGet = DeviceGet;
  t->pfnGetProperties = DeviceGetProperties;
  t->pfnGetMemoryProperties = DeviceGetMemoryProperties;
  t->pfnGetCommandQueueGroupProperties = DeviceGetCommandQueueGroupProperties;
  return ZE_RESULT_SUCCESS;
}
FAKE_TABLE(zeGetContextProcAddrTable, ze_context_dditable_t) {
  t->pfnCreate = ContextCreate;
  t->pfnDestroy = ContextDestroy;
  return ZE_RESULT_SUCCESS;
}
FAKE_TABLE(zeGetCommandListProcAddrTable, ze_command_list_dditable_t) {
  t->pfnCreateImmediate = ListCreateImmediate;
  t->pfnDestroy = ListDestroy;
  t->pfnAppendBarrier = AppendBarrier;
  t->pfnAppendMemoryCopy = AppendMemoryCopy;
  t->pfnAppendMemoryFill = AppendMemoryFill;
  t->pfnAppendSignalEvent = AppendSignalEvent;
  t->pfnAppendWaitOnEvents = AppendWaitOnEvents;
  t->pfnAppendEventReset = AppendEventReset;
  t->pfnAppendWriteGlobalTimestamp = AppendWriteGlobalTimestamp;
  t->pfnAppendLaunchKernel = AppendLaunchKernel;
  return ZE_RESULT_SUCCESS;
}
FAKE_TABLE(zeGetEventPoolProcAddrTable, ze_event_pool_dditable_t) {
  t->pfnCreate = EventPoolCreate;
  t->pfnDestroy = EventPoolDestroy;
  return ZE_RESULT_SUCCESS;
}
FAKE_TABLE(zeGetEventProcAddrTable, ze_event_dditable_t) {
  t->pfnCreate = EventCreate;
  t->pfnDestroy = EventDestroy;
  t->pfnHostSynchronize = EventHostSynchronize;
  t->pfnHostSignal = EventHostSignal;
  t->pfnHostReset = EventHostReset;
  t->pfnQueryStatus = EventQueryStatus;
  return ZE_RESULT_SUCCESS;
}
FAKE_TABLE(zeGetMemProcAddrTable, ze_mem_dditable_t) {
  t->pfnAllocDevice = MemAllocDevice;
  t->pfnAllocHost = MemAllocHost;
  t->pfnFree = MemFree;
  return ZE_RESULT_SUCCESS;
}
FAKE_TABLE(zeGetModuleProcAddrTable, ze_module_dditable_t) {
  t->pfnCreate = ModuleCreate;
  t->pfnDestroy = ModuleDestroy;
  return ZE_RESULT_SUCCESS;
}
FAKE_TABLE(zeGetModuleBuildLogProcAddrTable, ze_module_build_log_dditable_t) {
  t->pfnDestroy = BuildLogDestroy;
  t->pfnGetString = BuildLogGetString;
  return ZE_RESULT_SUCCESS;
}
FAKE_TABLE(zeGetKernelProcAddrTable, ze_kernel_dditable_t) {
  t->pfnCreate = KernelCreate;
  t->pfnDestroy = KernelDestroy;
  t->pfnSetGroupSize = KernelSetGroupSize;
  t->pfnSetArgumentValue = KernelSetArgumentValue;
  return ZE_RESULT_SUCCESS;
}
// Tables the plugin never uses: present (the loader asks for them) and empty.
FAKE_TABLE(zeGetCommandQueueProcAddrTable, ze_command_queue_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zeGetFenceProcAddrTable, ze_fence_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zeGetImageProcAddrTable, ze_image_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zeGetSamplerProcAddrTable, ze_sampler_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zeGetPhysicalMemProcAddrTable, ze_physical_mem_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zeGetVirtualMemProcAddrTable, ze_virtual_mem_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }

// For the test: kernel launches the fake has executed (counted) so far.
FAKE_EXPORT uint64_t spora_fake_ze_launches() { return g_launches.load(); }
// For the test: event pools created and not yet destroyed (the plugin adds
// one per 64 events it holds, so leaked events show as new pools).
FAKE_EXPORT int64_t spora_fake_ze_event_pools() { return g_event_pools.load(); }
// For the test: while set, a barrier that would signal an event fails.
FAKE_EXPORT void spora_fake_ze_fail_signal_barriers(int fail) { g_fail_signal_barriers = fail != 0; }
FAKE_TABLE(zeGetDeviceExpProcAddrTable, ze_device_exp_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zeGetEventExpProcAddrTable, ze_event_exp_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zeGetImageExpProcAddrTable, ze_image_exp_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zeGetKernelExpProcAddrTable, ze_kernel_exp_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zeGetFabricVertexExpProcAddrTable, ze_fabric_vertex_exp_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zeGetFabricEdgeExpProcAddrTable, ze_fabric_edge_exp_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
// Tools (zet) and sysman (zes) tables: the loader asks every driver for
// them during zeInit; empty is enough.
FAKE_TABLE(zesGetDeviceProcAddrTable, zes_device_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zesGetDiagnosticsProcAddrTable, zes_diagnostics_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zesGetDriverProcAddrTable, zes_driver_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zesGetEngineProcAddrTable, zes_engine_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zesGetFabricPortProcAddrTable, zes_fabric_port_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zesGetFanProcAddrTable, zes_fan_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zesGetFirmwareProcAddrTable, zes_firmware_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zesGetFrequencyProcAddrTable, zes_frequency_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zesGetLedProcAddrTable, zes_led_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zesGetMemoryProcAddrTable, zes_memory_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zesGetPerformanceFactorProcAddrTable, zes_performance_factor_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zesGetPowerProcAddrTable, zes_power_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zesGetPsuProcAddrTable, zes_psu_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zesGetRasProcAddrTable, zes_ras_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zesGetSchedulerProcAddrTable, zes_scheduler_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zesGetStandbyProcAddrTable, zes_standby_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zesGetTemperatureProcAddrTable, zes_temperature_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zetGetCommandListProcAddrTable, zet_command_list_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zetGetContextProcAddrTable, zet_context_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zetGetDebugProcAddrTable, zet_debug_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zetGetDeviceProcAddrTable, zet_device_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zetGetKernelProcAddrTable, zet_kernel_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zetGetMetricGroupExpProcAddrTable, zet_metric_group_exp_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zetGetMetricGroupProcAddrTable, zet_metric_group_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zetGetMetricProcAddrTable, zet_metric_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zetGetMetricQueryPoolProcAddrTable, zet_metric_query_pool_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zetGetMetricQueryProcAddrTable, zet_metric_query_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zetGetMetricStreamerProcAddrTable, zet_metric_streamer_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zetGetModuleProcAddrTable, zet_module_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
FAKE_TABLE(zetGetTracerExpProcAddrTable, zet_tracer_exp_dditable_t) { (void)t; return ZE_RESULT_SUCCESS; }
