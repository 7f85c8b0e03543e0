// The ze plugin's Level Zero plumbing against the fake driver
// (fake_ze_driver.cpp, loaded by the real Level Zero loader through
// ZE_ENABLE_ALT_DRIVERS). Kernels do not execute on the fake; what this
// checks is the plugin's side of them: the embedded SPIR-V module is
// accepted, every kernel a recipe names is one of its entry points, group
// sizes and argument sizes are what the kernels declare (4, 8 or 64 bytes),
// one launch per recipe step, operand ranges checked before enqueueing.
// The runtime (memory, streams, events, callbacks) is checked by the
// conformance kit in the ze_fake_driver_runtime test.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <spora/plugin.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace {

struct Plugin {
  const spora_device_api_t* api = nullptr;
  uint64_t (*launches)() = nullptr;
};

const Plugin& plugin() {
  static const Plugin p = [] {
    Plugin p;
    void* h = dlopen(SPORA_ZE_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    if (!h) return p;
    auto entry = reinterpret_cast<spora_plugin_entry_fn>(dlsym(h, SPORA_PLUGIN_ENTRY_SYMBOL));
    static spora_host_t host{};
    host.struct_size = sizeof host;
    host.abi_major = SPORA_PLUGIN_ABI_MAJOR;
    host.abi_minor = SPORA_PLUGIN_ABI_MINOR;
    spora_plugin_info_t info{};
    info.struct_size = sizeof info;
    if (entry(&host, &info)) return p;
    p.api = static_cast<const spora_device_api_t*>(info.api);
    if (spora_plugin_error_t* e = p.api->initialize()) {
      std::fprintf(stderr, "initialize: %s\n", e->message);
      e->destroy(e);
      p.api = nullptr;
      return p;
    }
    // The plugin releases its contexts and command lists in shutdown only;
    // its state is destroyed at exit without it, and LeakSanitizer then
    // reports the fake driver's objects behind those handles.
    static const spora_device_api_t* api = p.api;
    if (api->shutdown) std::atexit([] { api->shutdown(); });
    // The loader opened the fake by this path; find its counter.
    if (void* f = dlopen(std::getenv("ZE_ENABLE_ALT_DRIVERS"), RTLD_NOW | RTLD_NOLOAD))
      p.launches = reinterpret_cast<uint64_t (*)()>(dlsym(f, "spora_fake_ze_launches"));
    return p;
  }();
  return p;
}

void ok(spora_plugin_error_t* e, const std::string& what) {
  if (e) {
    ADD_FAILURE() << what << ": " << e->message;
    e->destroy(e);
  }
}

struct Td {
  std::vector<int64_t> dims;
  int32_t dtype = SPORA_DTYPE_F32;
  size_t bytes() const {
    size_t n = dtype == SPORA_DTYPE_I64 ? 8 : 4;
    for (int64_t d : dims) n *= static_cast<size_t>(d);
    return n;
  }
};

struct Case {
  std::string op;
  std::vector<Td> in, out;
  std::vector<std::pair<std::string, double>> attrs;
  size_t launches;  // the recipe's steps
};

// Plans and launches `c` on a stream; returns the number of launches the
// fake saw.
void run_case(const Case& c) {
  SCOPED_TRACE(c.op);
  const Plugin& p = plugin();
  ASSERT_NE(p.api, nullptr);
  ASSERT_NE(p.launches, nullptr);
  std::vector<spora_tensor_desc_t> in, out;
  auto desc = [](const Td& t) {
    spora_tensor_desc_t d{};
    d.struct_size = sizeof d;
    d.dtype = t.dtype;
    d.rank = static_cast<int32_t>(t.dims.size());
    d.dims = t.dims.empty() ? nullptr : t.dims.data();
    return d;
  };
  for (const Td& t : c.in) in.push_back(desc(t));
  for (const Td& t : c.out) out.push_back(desc(t));
  std::vector<spora_attr_t> attrs;
  for (const auto& [name, v] : c.attrs) {
    spora_attr_t a{};
    a.struct_size = sizeof a;
    a.name = name.c_str();
    a.type = SPORA_ATTR_FLOAT;
    a.f = v;
    attrs.push_back(a);
  }
  spora_kernel_desc_t kd{};
  kd.struct_size = sizeof kd;
  kd.op = c.op.c_str();
  kd.num_inputs = in.size();
  kd.inputs = in.data();
  kd.num_outputs = out.size();
  kd.outputs = out.data();
  kd.num_attrs = attrs.size();
  kd.attrs = attrs.data();
  spora_kernel_t* k = nullptr;
  size_t ws = 0;
  ok(p.api->kernel_create(0, &kd, &k, &ws), "kernel_create");
  ASSERT_NE(k, nullptr);
  std::vector<spora_devptr_t> ins, outs;
  for (const Td& t : c.in) {
    ins.emplace_back();
    ok(p.api->mem_alloc(0, t.bytes(), &ins.back()), "mem_alloc");
  }
  for (const Td& t : c.out) {
    outs.emplace_back();
    ok(p.api->mem_alloc(0, t.bytes(), &outs.back()), "mem_alloc");
  }
  spora_devptr_t w = nullptr;
  if (ws) ok(p.api->mem_alloc(0, ws, &w), "mem_alloc workspace");
  spora_stream_t* s = nullptr;
  ok(p.api->stream_create(0, &s), "stream_create");
  const uint64_t before = p.launches();
  ok(p.api->kernel_launch(k, ins.data(), outs.data(), w, s), "kernel_launch");
  ok(p.api->stream_synchronize(s), "stream_synchronize");
  EXPECT_EQ(p.launches() - before, c.launches);
  // An operand one byte short of what the plan reads is refused up front.
  if (!c.out.empty() && c.out[0].bytes() > 0) {
    spora_devptr_t small = nullptr;
    ok(p.api->mem_alloc(0, c.out[0].bytes() - 1, &small), "mem_alloc");
    std::vector<spora_devptr_t> bad = outs;
    bad[0] = small;
    spora_plugin_error_t* e = p.api->kernel_launch(k, ins.data(), bad.data(), w, s);
    EXPECT_NE(e, nullptr) << "a too-small output was accepted";
    if (e) {
      EXPECT_EQ(e->code, SPORA_PLUGIN_INVALID_ARGUMENT);
      EXPECT_NE(std::string(e->message).find("output 0"), std::string::npos) << e->message;
      e->destroy(e);
    }
    ok(p.api->mem_free(0, small), "mem_free");
  }
  ok(p.api->stream_destroy(s), "stream_destroy");
  for (auto d : ins) ok(p.api->mem_free(0, d), "mem_free");
  for (auto d : outs) ok(p.api->mem_free(0, d), "mem_free");
  if (w) ok(p.api->mem_free(0, w), "mem_free");
  ok(p.api->kernel_destroy(k), "kernel_destroy");
}

TEST(ZeFakeDriver, EveryKernelFamilyPlansAndLaunches) {
  const Td s{{}}, i64{{}, SPORA_DTYPE_I64};
  const std::vector<Case> cases = {
      {"exp", {{{3, 5}}}, {{{3, 5}}}, {}, 1},
      {"clip", {{{7}}}, {{{7}}}, {{"min", -1}, {"max", 1}}, 1},
      {"add", {{{4, 1, 5}}, {{1, 3, 5}}}, {{{4, 3, 5}}}, {}, 1},
      {"sum", {{{5, 7, 9}}}, {{{1, 1, 1}}}, {}, 1},
      {"matmul", {{{2, 1, 17, 20}}, {{1, 3, 20, 9}}}, {{{2, 3, 17, 9}}}, {}, 1},
      {"softmax", {{{4, 33}}}, {{{4, 33}}}, {}, 1},
      {"softmax_grad", {{{4, 33}}, {{4, 33}}}, {{{4, 33}}}, {}, 1},
      {"linear", {{{5, 16}}, {{3, 16}}, {{3}}}, {{{5, 3}}}, {}, 2},  // matmul, then the bias in place
      {"broadcast_to", {{{1, 9, 1}, SPORA_DTYPE_I64}}, {{{4, 9, 3}, SPORA_DTYPE_I64}}, {}, 1},
      {"sgd_update", {s, s, {{10}}, {{20}}, {{10}}, {{20}}}, {{{10}}, {{20}}}, {}, 2},
      {"adam_update", {s, i64, s, {{10}}, {{10}}, {{10}}, {{10}}}, {{{10}}, {{10}}, {{10}}}, {}, 1},
      {"clip_by_global_norm", {{{9000}}, {{3}}}, {{{9000}}, {{3}}, s}, {{"max_norm", 1}}, 2 + 1 + 2},  // sumsq per tensor, finish, scale per tensor
  };
  for (const Case& c : cases) run_case(c);
}

TEST(ZeFakeDriver, UnsupportedDtypeIsUnimplemented) {
  const Plugin& p = plugin();
  ASSERT_NE(p.api, nullptr);
  const int64_t dims[] = {4};
  spora_tensor_desc_t t{};
  t.struct_size = sizeof t;
  t.dtype = SPORA_DTYPE_F64;
  t.rank = 1;
  t.dims = dims;
  spora_kernel_desc_t kd{};
  kd.struct_size = sizeof kd;
  kd.op = "relu";
  kd.num_inputs = 1;
  kd.inputs = &t;
  kd.num_outputs = 1;
  kd.outputs = &t;
  spora_kernel_t* k = nullptr;
  spora_plugin_error_t* e = p.api->kernel_create(0, &kd, &k, nullptr);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->code, SPORA_PLUGIN_UNIMPLEMENTED) << e->message;
  e->destroy(e);
}

}  // namespace
