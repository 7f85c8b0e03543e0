// Tests of the sim device plugin through its C table only: the test dlopens
// libspora-device-sim.so (SPORA_SIM_PLUGIN_PATH) and plays a minimal host,
// the way libspora's loader does.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <spora/plugin.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#ifndef SPORA_SIM_PLUGIN_PATH
#error "compile with -DSPORA_SIM_PLUGIN_PATH=\"/path/to/libspora-device-sim.so\""
#endif

namespace {

// ---- a minimal host ----

int64_t config_get(void*, const char*, char*, size_t) { return -1; }  // nothing configured: defaults

std::mutex g_log_mu;
std::vector<std::string> g_log;
void log_sink(void*, int32_t, const char* plugin, const char* message) {
  std::lock_guard<std::mutex> lock(g_log_mu);
  g_log.push_back(std::string(plugin) + ": " + message);
}

spora_host_services_t make_services() {
  spora_host_services_t s{};
  s.struct_size = sizeof s;
  s.log = log_sink;
  s.error_create = nullptr;  // the plugin makes its own errors
  s.config_get = config_get;
  return s;
}
const spora_host_services_t g_services = make_services();

spora_host_t make_host(uint32_t major) {
  spora_host_t h{};
  h.struct_size = sizeof h;
  h.abi_major = major;
  h.abi_minor = SPORA_PLUGIN_ABI_MINOR;
  h.abi_minor_floor = 0;
  h.host_version = "test";
  h.services = &g_services;
  return h;
}
const spora_host_t g_host = make_host(SPORA_PLUGIN_ABI_MAJOR);

void* g_handle = nullptr;
spora_plugin_probe_fn g_probe = nullptr;
spora_plugin_entry_fn g_entry = nullptr;
spora_plugin_info_t g_info{};
const spora_device_api_t* api = nullptr;
std::string g_setup_error;

// Loads and initializes the plugin once per process (the host never unloads
// a plugin) and shuts it down at the end.
class SimEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    g_handle = dlopen(SPORA_SIM_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!g_handle) {
      g_setup_error = std::string("dlopen: ") + dlerror();
      return;
    }
    g_probe = reinterpret_cast<spora_plugin_probe_fn>(dlsym(g_handle, SPORA_PLUGIN_PROBE_SYMBOL));
    g_entry = reinterpret_cast<spora_plugin_entry_fn>(dlsym(g_handle, SPORA_PLUGIN_ENTRY_SYMBOL));
    if (!g_entry) {
      g_setup_error = "no spora_plugin_entry_v1";
      return;
    }
    g_info.struct_size = sizeof g_info;
    if (spora_plugin_error_t* err = g_entry(&g_host, &g_info)) {
      g_setup_error = std::string("entry: ") + err->message;
      err->destroy(err);
      return;
    }
    const auto* table = static_cast<const spora_device_api_t*>(g_info.api);
    if (spora_plugin_error_t* err = table->initialize()) {
      g_setup_error = std::string("initialize: ") + err->message;
      err->destroy(err);
      return;
    }
    api = table;
  }
  void TearDown() override {
    if (api && api->shutdown) api->shutdown();
  }
};
::testing::Environment* const g_env = ::testing::AddGlobalTestEnvironment(new SimEnvironment);

// ---- helpers ----

// The error's message ("" for success); frees the error.
std::string take(spora_plugin_error_t* err) {
  if (!err) return "";
  std::string message = err->message ? err->message : "(NULL message)";
  if (message.empty()) message = "(empty message)";
  err->destroy(err);
  return message;
}

#define SIM_OK(expr) ASSERT_EQ(take(expr), "")

// Checks `err` is an error with `code` and a "[sim]" message; frees it.
// Returns the message for further checks.
std::string expect_error(spora_plugin_error_t* err, int32_t code) {
  EXPECT_NE(err, nullptr);
  if (!err) return "";
  EXPECT_EQ(err->code, code) << err->message;
  std::string message = err->message;
  EXPECT_EQ(message.rfind("[sim]", 0), 0u) << message;
  err->destroy(err);
  return message;
}

spora_devptr_t offset(spora_devptr_t p, size_t bytes) { return static_cast<char*>(p) + bytes; }

spora_tensor_desc_t tensor(const std::vector<int64_t>& dims, int32_t dtype = SPORA_DTYPE_F32) {
  spora_tensor_desc_t t{};
  t.struct_size = sizeof t;
  t.dtype = dtype;
  t.rank = static_cast<int32_t>(dims.size());
  t.dims = dims.empty() ? nullptr : dims.data();
  return t;
}

spora_attr_t bool_attr(const char* name, bool value) {
  spora_attr_t a{};
  a.struct_size = sizeof a;
  a.name = name;
  a.type = SPORA_ATTR_BOOL;
  a.i = value ? 1 : 0;
  return a;
}

// Plans `op` on device 0 with f32 tensors of the given shapes.
spora_plugin_error_t* create_kernel(const char* op, const std::vector<std::vector<int64_t>>& in_shapes,
                                    const std::vector<int64_t>& out_shape, spora_kernel_t** out,
                                    const std::vector<spora_attr_t>& attrs = {}) {
  std::vector<spora_tensor_desc_t> ins;
  for (const auto& s : in_shapes) ins.push_back(tensor(s));
  const spora_tensor_desc_t outs[1] = {tensor(out_shape)};
  spora_kernel_desc_t d{};
  d.struct_size = sizeof d;
  d.op = op;
  d.num_inputs = ins.size();
  d.inputs = ins.data();
  d.num_outputs = 1;
  d.outputs = outs;
  d.num_attrs = attrs.size();
  d.attrs = attrs.empty() ? nullptr : attrs.data();
  size_t workspace = 123;
  spora_plugin_error_t* err = api->kernel_create(0, &d, out, &workspace);
  if (!err) {
    EXPECT_EQ(workspace, 0u);
  }
  return err;
}

class SimPlugin : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NE(api, nullptr) << g_setup_error; }

  spora_devptr_t alloc(size_t size) {
    spora_devptr_t p = nullptr;
    EXPECT_EQ(take(api->mem_alloc(0, size, &p)), "");
    return p;
  }
  void release(spora_devptr_t p) { EXPECT_EQ(take(api->mem_free(0, p)), ""); }
  std::vector<float> read(spora_devptr_t p, size_t n) {
    std::vector<float> v(n);
    EXPECT_EQ(take(api->copy_d2h(0, v.data(), p, n * sizeof(float))), "");
    return v;
  }
  void write(spora_devptr_t p, const std::vector<float>& v) {
    EXPECT_EQ(take(api->copy_h2d(0, p, v.data(), v.size() * sizeof(float))), "");
  }
};

// ---- entry, probe, properties ----

TEST_F(SimPlugin, ProbeEntryAndProperties) {
  ASSERT_NE(g_probe, nullptr);
  spora_probe_result_t probe{};
  probe.struct_size = sizeof probe;
  std::strcpy(probe.reason, "stale");
  g_probe(&probe);
  EXPECT_EQ(probe.score, 50);
  EXPECT_STREQ(probe.reason, "");

  EXPECT_EQ(g_info.abi_major, static_cast<uint32_t>(SPORA_PLUGIN_ABI_MAJOR));
  EXPECT_EQ(g_info.abi_minor, static_cast<uint32_t>(SPORA_PLUGIN_ABI_MINOR));
  EXPECT_EQ(g_info.kind, SPORA_PLUGIN_KIND_DEVICE);
  EXPECT_STREQ(g_info.name, "sim");
  EXPECT_STREQ(g_info.version, "0.1.0");
  ASSERT_NE(g_info.build, nullptr);
  EXPECT_EQ(api->struct_size, sizeof(spora_device_api_t));
  EXPECT_EQ(api->graph_compile, nullptr);
  EXPECT_EQ(api->stream_native_handle, nullptr);

  const spora_host_t future = make_host(SPORA_PLUGIN_ABI_MAJOR + 1);
  spora_plugin_info_t info{};
  info.struct_size = sizeof info;
  const std::string message = expect_error(g_entry(&future, &info), SPORA_PLUGIN_UNIMPLEMENTED);
  EXPECT_EQ(message, "[sim] host ABI major 2, plugin built for 1");

  {
    std::lock_guard<std::mutex> lock(g_log_mu);
    ASSERT_FALSE(g_log.empty());
    EXPECT_NE(g_log.front().find("sim: [sim] initialized 1 simulated device"), std::string::npos) << g_log.front();
  }

  int32_t count = 0;
  SIM_OK(api->device_count(&count));
  EXPECT_EQ(count, 1);
  spora_device_properties_t props{};
  props.struct_size = sizeof props;
  SIM_OK(api->device_properties(0, &props));
  EXPECT_STREQ(props.name, "Spora simulated accelerator");
  EXPECT_STREQ(props.vendor, "Spora");
  EXPECT_STREQ(props.arch, "sim");
  EXPECT_EQ(props.memory_bytes, uint64_t{1} << 30);
  EXPECT_EQ(props.compute_units, 1);
  EXPECT_EQ(props.unified_memory, 0);
  EXPECT_EQ(props.max_streams, 0);
  EXPECT_EQ(props.alignment, 256u);
  expect_error(api->device_properties(1, &props), SPORA_PLUGIN_INVALID_ARGUMENT);
}

// ---- memory ----

TEST_F(SimPlugin, HostDeviceRoundTrip) {
  std::vector<float> data(1000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i) * 0.5f - 7.f;
  spora_devptr_t p = alloc(data.size() * sizeof(float));
  ASSERT_NE(p, nullptr);
  const auto addr = reinterpret_cast<uintptr_t>(p);
  EXPECT_EQ(addr % 256, 0u);
  EXPECT_EQ(addr >> 56, 0x51u);  // tagged, non-canonical
  write(p, data);
  EXPECT_EQ(read(p, data.size()), data);

  // A sub-buffer address (base + offset) is accepted.
  std::vector<float> part(50);
  SIM_OK(api->copy_d2h(0, part.data(), offset(p, 100 * sizeof(float)), part.size() * sizeof(float)));
  EXPECT_EQ(part, std::vector<float>(data.begin() + 100, data.begin() + 150));
  release(p);
}

TEST_F(SimPlugin, MemsetAndDeviceToDevice) {
  spora_devptr_t a = alloc(4096);
  spora_devptr_t b = alloc(4096);
  SIM_OK(api->memset(0, a, 0xAB, 4096));
  SIM_OK(api->memset(0, offset(a, 1000), 0x1CD, 24));  // only the low byte counts
  std::vector<unsigned char> host(4096);
  SIM_OK(api->copy_d2d(0, b, a, 4096));
  SIM_OK(api->copy_d2h(0, host.data(), b, host.size()));
  for (size_t i = 0; i < host.size(); ++i) {
    ASSERT_EQ(host[i], (i >= 1000 && i < 1024) ? 0xCD : 0xAB) << "byte " << i;
  }
  release(a);
  release(b);
}

TEST_F(SimPlugin, AllocationErrorsAreReported) {
  spora_devptr_t p = alloc(1024);
  spora_devptr_t q = alloc(1024);  // allocated first, so it cannot reuse p's block
  // Double free, a pointer inside an allocation, and garbage.
  release(p);
  EXPECT_NE(expect_error(api->mem_free(0, p), SPORA_PLUGIN_INVALID_ARGUMENT).find("double free"), std::string::npos);
  expect_error(api->mem_free(0, offset(q, 16)), SPORA_PLUGIN_INVALID_ARGUMENT);
  expect_error(api->mem_free(0, reinterpret_cast<spora_devptr_t>(uintptr_t{0x1234})), SPORA_PLUGIN_INVALID_ARGUMENT);
  SIM_OK(api->mem_free(0, nullptr));

  // Copies outside a live allocation, past its end, or with bad arguments.
  std::vector<char> host(2048);
  expect_error(api->copy_h2d(0, p, host.data(), 16), SPORA_PLUGIN_INVALID_ARGUMENT);  // freed
  expect_error(api->copy_h2d(0, q, host.data(), 1025), SPORA_PLUGIN_INVALID_ARGUMENT);
  expect_error(api->copy_d2h(0, host.data(), offset(q, 1000), 100), SPORA_PLUGIN_INVALID_ARGUMENT);
  expect_error(api->copy_d2h(0, host.data(), reinterpret_cast<spora_devptr_t>(host.data()), 16),
               SPORA_PLUGIN_INVALID_ARGUMENT);  // a host pointer is not a device address
  expect_error(api->copy_h2d(0, q, nullptr, 16), SPORA_PLUGIN_INVALID_ARGUMENT);
  expect_error(api->copy_d2h(0, nullptr, q, 16), SPORA_PLUGIN_INVALID_ARGUMENT);
  expect_error(api->copy_h2d(3, q, host.data(), 16), SPORA_PLUGIN_INVALID_ARGUMENT);
  expect_error(api->memset(0, offset(q, 1024), 0, 1), SPORA_PLUGIN_INVALID_ARGUMENT);
  expect_error(api->mem_alloc(-1, 16, &p), SPORA_PLUGIN_INVALID_ARGUMENT);

  // Out of memory names the request and what is free.
  spora_devptr_t huge = nullptr;
  const std::string oom = expect_error(api->mem_alloc(0, size_t{1} << 40, &huge), SPORA_PLUGIN_OUT_OF_MEMORY);
  EXPECT_NE(oom.find(std::to_string(size_t{1} << 40)), std::string::npos) << oom;
  EXPECT_NE(oom.find("free"), std::string::npos) << oom;
  expect_error(api->mem_alloc(0, SIZE_MAX, &huge), SPORA_PLUGIN_OUT_OF_MEMORY);
  release(q);
}

TEST_F(SimPlugin, ZeroSizeAllocationsAreUnique) {
  spora_devptr_t a = alloc(0);
  spora_devptr_t b = alloc(0);
  EXPECT_NE(a, nullptr);
  EXPECT_NE(a, b);
  SIM_OK(api->copy_h2d(0, a, nullptr, 0));
  expect_error(api->copy_h2d(0, a, "x", 1), SPORA_PLUGIN_INVALID_ARGUMENT);
  release(a);
  release(b);
}

TEST_F(SimPlugin, FreedBlocksCoalesce) {
  // Three 300 MiB blocks of the 1 GiB arena: 900 MiB fits again only if
  // freeing merges them back into one block.
  const size_t block = size_t{300} << 20;
  spora_devptr_t a = alloc(block), b = alloc(block), c = alloc(block);
  release(b);  // lone hole
  release(a);  // merges with the following hole
  release(c);  // merges with the preceding hole (and the tail)
  spora_devptr_t all = alloc(3 * block);
  EXPECT_EQ(all, a);  // first fit
  release(all);
}

TEST_F(SimPlugin, ConcurrentAllocations) {
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        spora_devptr_t p = nullptr;
        const size_t size = static_cast<size_t>((i * 37 + t * 101) % 5000);
        if (!take(api->mem_alloc(0, size, &p)).empty()) {
          ++failures;
          continue;
        }
        std::vector<char> v(size, static_cast<char>(t));
        if (!take(api->copy_h2d(0, p, v.data(), size)).empty()) ++failures;
        if (!take(api->mem_free(0, p)).empty()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(SimPlugin, DeviceAddressIsNotAHostPointer) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // the plugin runs threads
  spora_devptr_t p = alloc(64);
  EXPECT_DEATH({ (void)*(volatile char*)p; }, "");
  release(p);
}

// ---- kernels ----

TEST_F(SimPlugin, UnknownOpIsUnimplemented) {
  spora_kernel_t* k = nullptr;
  spora_plugin_error_t* err = create_kernel("frobnicate", {{4}}, {4}, &k);
  ASSERT_NE(err, nullptr);
  EXPECT_EQ(err->code, SPORA_PLUGIN_UNIMPLEMENTED) << err->message;
  err->destroy(err);
  const char* const* ops = api->kernel_ops();
  ASSERT_NE(ops, nullptr);
  bool has_add = false;
  for (; *ops; ++ops) has_add |= std::strcmp(*ops, "add") == 0;
  EXPECT_TRUE(has_add);
}

TEST_F(SimPlugin, AddBroadcasts) {
  spora_kernel_t* k = nullptr;
  SIM_OK(create_kernel("add", {{2, 3}, {1, 3}}, {2, 3}, &k));
  spora_devptr_t a = alloc(6 * sizeof(float)), b = alloc(3 * sizeof(float)), y = alloc(6 * sizeof(float));
  write(a, {1, 2, 3, 4, 5, 6});
  write(b, {10, 20, 30});
  spora_stream_t* s = nullptr;
  SIM_OK(api->stream_create(0, &s));
  const spora_devptr_t ins[2] = {a, b};
  SIM_OK(api->kernel_launch(k, ins, &y, nullptr, s));
  SIM_OK(api->stream_synchronize(s));
  EXPECT_EQ(read(y, 6), (std::vector<float>{11, 22, 33, 14, 25, 36}));

  // Buffers too small for the planned shapes are rejected at launch.
  const spora_devptr_t swapped[2] = {b, a};
  expect_error(api->kernel_launch(k, swapped, &y, nullptr, s), SPORA_PLUGIN_INVALID_ARGUMENT);
  const spora_devptr_t garbage[2] = {a, reinterpret_cast<spora_devptr_t>(uintptr_t{64})};
  expect_error(api->kernel_launch(k, garbage, &y, nullptr, s), SPORA_PLUGIN_INVALID_ARGUMENT);
  SIM_OK(api->stream_synchronize(s));

  SIM_OK(api->stream_destroy(s));
  SIM_OK(api->kernel_destroy(k));
  expect_error(api->kernel_destroy(k), SPORA_PLUGIN_INVALID_ARGUMENT);
  release(a);
  release(b);
  release(y);
}

// ---- streams, events, callbacks ----

// An n x n matmul with small integer entries, so float results are exact.
struct Matmul {
  static constexpr int64_t n = 256;
  std::vector<float> a, b, expected;
  spora_kernel_t* kernel = nullptr;
  spora_devptr_t da = nullptr, db = nullptr, dy = nullptr;

  Matmul() : a(n * n), b(n * n), expected(n * n, 0.f) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        a[i * n + j] = static_cast<float>((i + j) % 7);
        b[i * n + j] = static_cast<float>((i * j) % 5);
      }
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < n; ++k)
        for (int64_t j = 0; j < n; ++j) expected[i * n + j] += a[i * n + k] * b[k * n + j];
  }
};

class SimStreams : public SimPlugin {
 protected:
  void SetUp() override {
    SimPlugin::SetUp();
    if (HasFatalFailure()) return;
    SIM_OK(create_kernel("matmul", {{mm.n, mm.n}, {mm.n, mm.n}}, {mm.n, mm.n}, &mm.kernel,
                         {bool_attr("transpose_a", false), bool_attr("transpose_b", false)}));
    const size_t bytes = mm.n * mm.n * sizeof(float);
    mm.da = alloc(bytes);
    mm.db = alloc(bytes);
    mm.dy = alloc(bytes);
    write(mm.da, mm.a);
    write(mm.db, mm.b);
    SIM_OK(api->memset(0, mm.dy, 0, bytes));
  }
  void TearDown() override {
    if (!api) return;
    EXPECT_EQ(take(api->kernel_destroy(mm.kernel)), "");
    release(mm.da);
    release(mm.db);
    release(mm.dy);
  }
  // Enqueues the matmul several times (same result) to keep a stream busy.
  void launch_matmul(spora_stream_t* s, int times = 1) {
    const spora_devptr_t ins[2] = {mm.da, mm.db};
    for (int i = 0; i < times; ++i) SIM_OK(api->kernel_launch(mm.kernel, ins, &mm.dy, nullptr, s));
  }
  Matmul mm;
};

TEST_F(SimStreams, WorkRunsInStreamOrder) {
  spora_stream_t* s = nullptr;
  SIM_OK(api->stream_create(0, &s));
  std::vector<float> result(mm.n * mm.n, -1.f);
  launch_matmul(s);
  SIM_OK(api->copy_d2h_async(s, result.data(), mm.dy, result.size() * sizeof(float)));
  SIM_OK(api->stream_synchronize(s));
  EXPECT_EQ(result, mm.expected);
  int32_t done = 0;
  SIM_OK(api->stream_query(s, &done));
  EXPECT_EQ(done, 1);
  SIM_OK(api->stream_destroy(s));
}

TEST_F(SimStreams, AsyncCopiesAndMemset) {
  spora_stream_t* s = nullptr;
  SIM_OK(api->stream_create(0, &s));
  std::vector<float> in(64), out(64, 0.f);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i);
  spora_devptr_t x = alloc(64 * sizeof(float)), y = alloc(64 * sizeof(float));
  SIM_OK(api->copy_h2d_async(s, x, in.data(), 64 * sizeof(float)));
  SIM_OK(api->memset_async(s, y, 0, 64 * sizeof(float)));
  SIM_OK(api->copy_d2d_async(s, y, x, 32 * sizeof(float)));
  SIM_OK(api->copy_d2h_async(s, out.data(), y, 64 * sizeof(float)));
  expect_error(api->copy_d2h_async(s, out.data(), y, 65 * sizeof(float)), SPORA_PLUGIN_INVALID_ARGUMENT);
  expect_error(api->copy_h2d_async(s, x, nullptr, 4), SPORA_PLUGIN_INVALID_ARGUMENT);
  SIM_OK(api->stream_synchronize(s));
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], i < 32 ? in[i] : 0.f) << i;
  SIM_OK(api->stream_destroy(s));
  release(x);
  release(y);
}

TEST_F(SimStreams, SyncCopyWaitsForQueuedWork) {
  spora_stream_t* s = nullptr;
  SIM_OK(api->stream_create(0, &s));
  launch_matmul(s, 3);
  EXPECT_EQ(read(mm.dy, mm.n * mm.n), mm.expected);  // copy_d2h drains the device first
  SIM_OK(api->stream_destroy(s));
}

TEST_F(SimStreams, EventOrdersTwoStreams) {
  spora_stream_t *sa = nullptr, *sb = nullptr;
  spora_event_t* done = nullptr;
  SIM_OK(api->stream_create(0, &sa));
  SIM_OK(api->stream_create(0, &sb));
  SIM_OK(api->event_create(0, &done));

  launch_matmul(sa, 4);
  SIM_OK(api->event_record(done, sa));
  SIM_OK(api->stream_wait_event(sb, done));
  std::vector<float> result(mm.n * mm.n, -1.f);
  SIM_OK(api->copy_d2h_async(sb, result.data(), mm.dy, result.size() * sizeof(float)));
  SIM_OK(api->stream_synchronize(sb));
  EXPECT_EQ(result, mm.expected);

  int32_t reached = 0;
  SIM_OK(api->event_query(done, &reached));
  EXPECT_EQ(reached, 1);
  SIM_OK(api->stream_destroy(sa));
  SIM_OK(api->stream_destroy(sb));
  SIM_OK(api->event_destroy(done));
}

struct Trace {
  std::mutex mu;
  std::vector<int> order;
  std::vector<bool> status_null;
  const std::vector<float>* watched = nullptr;
  std::vector<float> seen;  // watched->front() at each callback
};

struct CallbackArg {
  Trace* trace;
  int id;
};

void record_callback(void* user_data, const spora_plugin_error_t* status) {
  auto* arg = static_cast<CallbackArg*>(user_data);
  std::lock_guard<std::mutex> lock(arg->trace->mu);
  arg->trace->order.push_back(arg->id);
  arg->trace->status_null.push_back(status == nullptr);
  arg->trace->seen.push_back(arg->trace->watched->front());
}

TEST_F(SimStreams, CallbacksRunInOrderAfterEarlierWork) {
  spora_stream_t* s = nullptr;
  SIM_OK(api->stream_create(0, &s));
  std::vector<float> result(mm.n * mm.n, -1.f);
  Trace trace;
  trace.watched = &result;
  CallbackArg first{&trace, 1}, second{&trace, 2}, third{&trace, 3};

  SIM_OK(api->stream_add_callback(s, record_callback, &first));
  launch_matmul(s, 2);
  SIM_OK(api->copy_d2h_async(s, result.data(), mm.dy, result.size() * sizeof(float)));
  SIM_OK(api->stream_add_callback(s, record_callback, &second));
  SIM_OK(api->stream_add_callback(s, record_callback, &third));
  expect_error(api->stream_add_callback(s, nullptr, nullptr), SPORA_PLUGIN_INVALID_ARGUMENT);
  SIM_OK(api->stream_synchronize(s));

  EXPECT_EQ(trace.order, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(trace.status_null, (std::vector<bool>{true, true, true}));
  // The first callback ran before the copy, the later ones after it.
  EXPECT_EQ(trace.seen, (std::vector<float>{-1.f, mm.expected.front(), mm.expected.front()}));
  SIM_OK(api->stream_destroy(s));
}

TEST_F(SimStreams, EventTiming) {
  spora_stream_t* s = nullptr;
  spora_event_t *start = nullptr, *end = nullptr, *never = nullptr;
  SIM_OK(api->stream_create(0, &s));
  SIM_OK(api->event_create(0, &start));
  SIM_OK(api->event_create(0, &end));
  SIM_OK(api->event_create(0, &never));

  int32_t reached = 0;
  SIM_OK(api->event_query(never, &reached));
  EXPECT_EQ(reached, 1);  // never recorded counts as reached
  SIM_OK(api->event_synchronize(never));

  SIM_OK(api->event_record(start, s));
  launch_matmul(s);
  SIM_OK(api->event_record(end, s));
  SIM_OK(api->event_synchronize(end));
  double ms = -1.0;
  SIM_OK(api->event_elapsed_ms(start, end, &ms));
  EXPECT_GE(ms, 0.0);
  expect_error(api->event_elapsed_ms(start, never, &ms), SPORA_PLUGIN_INVALID_ARGUMENT);

  SIM_OK(api->stream_destroy(s));
  for (spora_event_t* e : {start, end, never}) SIM_OK(api->event_destroy(e));
  expect_error(api->event_record(start, s), SPORA_PLUGIN_INVALID_ARGUMENT);  // both destroyed
}

TEST_F(SimStreams, FreeWaitsForQueuedWork) {
  // mem_free must not release memory a queued kernel still writes: it waits
  // for the device's streams, so they are idle once it returns.
  spora_stream_t* s = nullptr;
  SIM_OK(api->stream_create(0, &s));
  launch_matmul(s, 3);
  release(mm.dy);
  mm.dy = nullptr;  // TearDown frees NULL, a no-op
  int32_t done = 0;
  SIM_OK(api->stream_query(s, &done));
  EXPECT_EQ(done, 1);
  SIM_OK(api->stream_destroy(s));
  expect_error(api->stream_synchronize(s), SPORA_PLUGIN_INVALID_ARGUMENT);  // destroyed
  expect_error(api->event_create(0, nullptr), SPORA_PLUGIN_INVALID_ARGUMENT);
}

}  // namespace
