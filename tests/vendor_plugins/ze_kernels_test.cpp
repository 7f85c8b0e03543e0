// The ze plugin's kernel math, checked on the CPU.
//
// No Level Zero device exists here, so the plugin's kernels cannot run
// through Level Zero. This test runs them through OpenCL on the CPU (PoCL)
// instead, and as close to what the plugin ships as PoCL allows:
//   - the module is the plugin's embedded SPIR-V (build/plugins/ze/
//     ze_kernels.spv) translated back to LLVM bitcode by `llvm-spirv -r`,
//     because PoCL 3.1 takes SPIR 1.2 bitcode (cl_khr_spir) but not SPIR-V;
//   - the launches (kernel, arguments, grid) come from the plugin's own
//     recipe code (ze_recipe.cpp), compiled into this test;
//   - every result is compared with the shared reference kernels
//     (plugins/common, what the sim plugin runs and the cpu plugin is
//     checked against) on the same random inputs.
// What it does not check: the Level Zero calls themselves (zeModuleCreate,
// argument setting, appends), which never ran anywhere.
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "kernel_plan.h"
#include "ze_recipe.h"

namespace {

using spora::plugin::KernelPlan;
using spora::ze::Recipe;

struct Cl {
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;
  cl_program program = nullptr;
  std::string error;
};

// One OpenCL setup for the whole test binary.
Cl& cl() {
  static Cl c = [] {
    Cl c;
    cl_uint n = 0;
    if (clGetPlatformIDs(1, &c.platform, &n) != CL_SUCCESS || n == 0) {
      c.error = "no OpenCL platform: install pocl-opencl-icd (OpenCL on the CPU) to run the ze kernel-math test";
      return c;
    }
    if (clGetDeviceIDs(c.platform, CL_DEVICE_TYPE_CPU, 1, &c.device, nullptr) != CL_SUCCESS) {
      c.error = "no OpenCL CPU device: install pocl-opencl-icd";
      return c;
    }
    cl_int err = 0;
    c.context = clCreateContext(nullptr, 1, &c.device, nullptr, nullptr, &err);
    c.queue = clCreateCommandQueueWithProperties(c.context, c.device, nullptr, &err);
    std::ifstream f(SPORA_ZE_TEST_BITCODE, std::ios::binary);
    const std::vector<unsigned char> bc((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (bc.empty()) {
      c.error = std::string("cannot read ") + SPORA_ZE_TEST_BITCODE;
      return c;
    }
    const unsigned char* bins[] = {bc.data()};
    const size_t sizes[] = {bc.size()};
    cl_int status = 0;
    c.program = clCreateProgramWithBinary(c.context, 1, &c.device, sizes, bins, &status, &err);
    if (err != CL_SUCCESS) {
      c.error = "clCreateProgramWithBinary failed: " + std::to_string(err) + " (does the OpenCL device support cl_khr_spir?)";
      return c;
    }
    err = clBuildProgram(c.program, 1, &c.device, "-x spir -spir-std=1.2", nullptr, nullptr);
    if (err != CL_SUCCESS) {
      char log[8192] = {};
      clGetProgramBuildInfo(c.program, c.device, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, nullptr);
      c.error = "clBuildProgram failed: " + std::to_string(err) + ": " + log;
    }
    return c;
  }();
  return c;
}

// A tensor of the test: shape, dtype and host bytes.
struct T {
  std::vector<int64_t> dims;
  int32_t dtype = SPORA_DTYPE_F32;
  std::vector<unsigned char> bytes;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
  float* f() { return reinterpret_cast<float*>(bytes.data()); }
};

// Element i as float, for f32, f16 and bf16 storage.
float get(const T& t, int64_t i) {
  float f;
  uint16_t h;
  switch (t.dtype) {
    case SPORA_DTYPE_F16:
      std::memcpy(&h, t.bytes.data() + 2 * i, 2);
      return spora::plugin::f16::to_float(h);
    case SPORA_DTYPE_BF16: {
      std::memcpy(&h, t.bytes.data() + 2 * i, 2);
      spora::plugin::bf16 b;
      b.bits = h;
      return static_cast<float>(b);
    }
    default:
      std::memcpy(&f, t.bytes.data() + 4 * i, 4);
      return f;
  }
}

T tensor(std::vector<int64_t> dims, std::mt19937& rng, float lo = -1, float hi = 1, int32_t dtype = SPORA_DTYPE_F32) {
  T t;
  t.dims = std::move(dims);
  t.dtype = dtype;
  const size_t es = spora::plugin::dtype_size(dtype);
  t.bytes.resize(static_cast<size_t>(t.numel()) * es);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float v = u(rng);
    uint16_t h = 0;
    if (dtype == SPORA_DTYPE_F16) h = spora::plugin::f16(v).bits;
    if (dtype == SPORA_DTYPE_BF16) h = spora::plugin::bf16(v).bits;
    if (es == 2) std::memcpy(t.bytes.data() + 2 * i, &h, 2);
    else std::memcpy(t.bytes.data() + 4 * i, &v, 4);
  }
  return t;
}

T zeros(std::vector<int64_t> dims, int32_t dtype = SPORA_DTYPE_F32) {
  T t;
  t.dims = std::move(dims);
  t.dtype = dtype;
  t.bytes.assign(static_cast<size_t>(t.numel()) * spora::plugin::dtype_size(dtype), 0);
  return t;
}

T scalar_f32(float v) {
  T t = zeros({});
  std::memcpy(t.bytes.data(), &v, 4);
  return t;
}
T scalar_i64(int64_t v) {
  T t = zeros({}, SPORA_DTYPE_I64);
  std::memcpy(t.bytes.data(), &v, 8);
  return t;
}

struct AttrSpec {
  std::string name;
  int32_t type;
  int64_t i = 0;
  double f = 0;
  std::vector<int64_t> ints;
  std::string s;  // SPORA_ATTR_STRING
};

// Builds the descriptor the host would send. It points into the tensors'
// dims and the attributes' names and values, so it keeps its own copies of
// them: callers pass temporaries ({x}, {{"axis", ...}}), which ASan caught
// being read after they were destroyed.
struct Desc {
  std::vector<T> inputs, outputs;
  std::vector<AttrSpec> specs;
  std::vector<spora_tensor_desc_t> in, out;
  std::vector<spora_attr_t> attrs;
  spora_kernel_desc_t d{};
  Desc(const std::string& op, const std::vector<T>& inputs_in, const std::vector<T>& outputs_in,
       const std::vector<AttrSpec>& specs_in)
      : inputs(inputs_in), outputs(outputs_in), specs(specs_in) {
    auto fill = [](const T& t) {
      spora_tensor_desc_t td{};
      td.struct_size = sizeof td;
      td.dtype = t.dtype;
      td.rank = static_cast<int32_t>(t.dims.size());
      td.dims = t.dims.empty() ? nullptr : t.dims.data();
      return td;
    };
    for (const T& t : inputs) in.push_back(fill(t));
    for (const T& t : outputs) out.push_back(fill(t));
    for (const AttrSpec& s : specs) {
      spora_attr_t a{};
      a.struct_size = sizeof a;
      a.name = s.name.c_str();
      a.type = s.type;
      a.i = s.i;
      a.f = s.f;
      a.ints = s.ints.empty() ? nullptr : s.ints.data();
      a.count = s.ints.size();
      a.s = s.s.c_str();
      attrs.push_back(a);
    }
    d.struct_size = sizeof d;
    op_name = op;
    d.op = op_name.c_str();
    d.num_inputs = in.size();
    d.inputs = in.data();
    d.num_outputs = out.size();
    d.outputs = out.data();
    d.num_attrs = attrs.size();
    d.attrs = attrs.data();
  }
  std::string op_name;
};

// Runs the plugin's recipe for `desc` through OpenCL; returns the outputs.
std::vector<T> run_on_pocl(const spora_kernel_desc_t& desc, const std::vector<T>& inputs, std::vector<T> outputs) {
  Cl& c = cl();
  KernelPlan plan;
  spora_plugin_error_t* err = spora::plugin::describe(&desc, &plan);
  Recipe recipe;
  if (!err) err = spora::ze::make_recipe(plan, &recipe);
  if (err) {
    ADD_FAILURE() << "recipe for " << desc.op << ": " << err->message;
    err->destroy(err);
    return outputs;
  }
  std::vector<cl_mem> mem;
  cl_int e = 0;
  for (const T& t : inputs) {
    // CL_MEM_COPY_HOST_PTR copies the buffer's whole size from the host
    // pointer, so the bytes are padded to the 8-byte minimum first (a 1x1
    // f32 input has 4; ASan caught pocl reading past them).
    std::vector<unsigned char> host(t.bytes);
    host.resize(std::max<size_t>(host.size(), 8));
    mem.push_back(clCreateBuffer(c.context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, host.size(), host.data(), &e));
  }
  for (T& t : outputs) mem.push_back(clCreateBuffer(c.context, CL_MEM_READ_WRITE, std::max<size_t>(t.bytes.size(), 8), nullptr, &e));
  cl_mem workspace = clCreateBuffer(c.context, CL_MEM_READ_WRITE, std::max<size_t>(recipe.workspace, 8), nullptr, &e);
  for (const spora::ze::Launch& l : recipe.launches) {
    cl_kernel k = clCreateKernel(c.program, l.kernel.c_str(), &e);
    if (e != CL_SUCCESS) {
      ADD_FAILURE() << "kernel " << l.kernel << " is not in the module: " << e;
      continue;
    }
    for (size_t a = 0; a < l.args.size(); ++a) {
      const auto& arg = l.args[a];
      if (arg.operand == spora::ze::kWorkspace)
        e = clSetKernelArg(k, static_cast<cl_uint>(a), sizeof(cl_mem), &workspace);
      else if (arg.operand >= 0)
        e = clSetKernelArg(k, static_cast<cl_uint>(a), sizeof(cl_mem), &mem[static_cast<size_t>(arg.operand)]);
      else
        e = clSetKernelArg(k, static_cast<cl_uint>(a), arg.value.size(), arg.value.data());
      EXPECT_EQ(e, CL_SUCCESS) << l.kernel << " argument " << a << " (size " << arg.value.size() << ")";
    }
    size_t global[3], local[3];
    for (int d = 0; d < 3; ++d) {
      local[d] = l.group_size[d];
      global[d] = static_cast<size_t>(l.groups[d]) * l.group_size[d];
    }
    e = clEnqueueNDRangeKernel(c.queue, k, 3, nullptr, global, local, 0, nullptr, nullptr);
    EXPECT_EQ(e, CL_SUCCESS) << "launching " << l.kernel;
    clReleaseKernel(k);
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].bytes.empty()) continue;
    e = clEnqueueReadBuffer(c.queue, mem[inputs.size() + i], CL_TRUE, 0, outputs[i].bytes.size(),
                            outputs[i].bytes.data(), 0, nullptr, nullptr);
    EXPECT_EQ(e, CL_SUCCESS);
  }
  clFinish(c.queue);
  for (cl_mem m : mem) clReleaseMemObject(m);
  clReleaseMemObject(workspace);
  return outputs;
}

// Runs the shared reference kernel for `desc` on the host.
std::vector<T> run_reference(const spora_kernel_desc_t& desc, const std::vector<T>& inputs, std::vector<T> outputs) {
  KernelPlan plan;
  if (spora_plugin_error_t* err = spora::plugin::plan_kernel(&desc, &plan)) {
    ADD_FAILURE() << "reference plan for " << desc.op << ": " << err->message;
    err->destroy(err);
    return outputs;
  }
  std::vector<const void*> in;
  std::vector<void*> out;
  for (const T& t : inputs) in.push_back(t.bytes.data());
  for (T& t : outputs) out.push_back(t.bytes.data());
  std::vector<unsigned char> ws(plan.workspace + 8);
  spora::plugin::run_plan(plan, in.data(), out.data(), ws.data());
  return outputs;
}

// Runs both and compares every output element: |got - want| <= atol + rtol*|want|.
void check(const std::string& op, const std::vector<T>& inputs, const std::vector<T>& outputs,
           std::vector<AttrSpec> attrs = {}, double rtol = 2e-5, double atol = 2e-5, const char* string_attr = nullptr) {
  ASSERT_TRUE(cl().error.empty()) << cl().error;
  for (AttrSpec& a : attrs)
    if (a.type == SPORA_ATTR_STRING && string_attr) a.s = string_attr;
  Desc d(op, inputs, outputs, attrs);
  const std::vector<T> got = run_on_pocl(d.d, inputs, outputs);
  const std::vector<T> want = run_reference(d.d, inputs, outputs);
  for (size_t o = 0; o < outputs.size(); ++o) {
    const int64_t n = outputs[o].numel();
    ASSERT_GT(n, 0);
    const int32_t odt = outputs[o].dtype;
    if (odt != SPORA_DTYPE_F32 && odt != SPORA_DTYPE_F16 && odt != SPORA_DTYPE_BF16) {
      // Integers and bools move exactly.
      EXPECT_TRUE(got[o].bytes == want[o].bytes) << op << " output " << o << ": bytes differ from the reference";
      continue;
    }
    int bad = 0;
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float g = get(got[o], i), w = get(want[o], i);
      const double diff = std::fabs(static_cast<double>(g) - w);
      const bool ok = diff <= atol + rtol * std::fabs(w) || (std::isnan(g) && std::isnan(w));
      if (!ok && bad++ < 3)
        ADD_FAILURE() << op << " output " << o << " element " << i << ": pocl " << g << " vs reference " << w;
      worst = std::max(worst, diff);
    }
    EXPECT_EQ(bad, 0) << op << " output " << o << ": " << bad << " of " << n << " elements off (max diff " << worst << ")";
  }
}

std::mt19937 rng_for(const char* name) { return std::mt19937(static_cast<unsigned>(std::hash<std::string>{}(name))); }

TEST(ZeKernelsOnPocl, Unary) {
  auto rng = rng_for("unary");
  for (const char* op : {"neg", "abs", "square", "relu", "exp", "sin", "cos", "tanh", "sigmoid", "silu"}) {
    SCOPED_TRACE(op);
    check(op, {tensor({3, 70}, rng, -4, 4)}, {zeros({3, 70})});
  }
  for (const char* op : {"log", "sqrt", "rsqrt", "reciprocal"}) {  // positive inputs
    SCOPED_TRACE(op);
    check(op, {tensor({517}, rng, 0.05f, 5)}, {zeros({517})});
  }
  check("log1p", {tensor({300}, rng, -0.9f, 5)}, {zeros({300})});
  for (const char* op : {"sign", "erf", "floor", "ceil", "round", "gelu", "softplus"}) {
    SCOPED_TRACE(op);
    check(op, {tensor({2, 129}, rng, -8, 8)}, {zeros({2, 129})});
  }
  // Exact halves: round is half-to-even, floor/ceil of integers are exact.
  T halves = zeros({8});
  const float hv[8] = {-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 3.0f, -3.0f};
  std::memcpy(halves.bytes.data(), hv, sizeof hv);
  for (const char* op : {"round", "floor", "ceil"}) check(op, {halves}, {zeros({8})}, {}, 0, 0);
  // With attributes.
  check("leaky_relu", {tensor({100}, rng, -3, 3)}, {zeros({100})}, {{"alpha", SPORA_ATTR_FLOAT, 0, 0.2}});
  check("gelu", {tensor({100}, rng, -8, 8)}, {zeros({100})}, {{"approximate", SPORA_ATTR_STRING}}, 2e-5, 2e-5,
        "tanh");
  check("softplus", {tensor({100}, rng, -8, 8)}, {zeros({100})},
        {{"beta", SPORA_ATTR_FLOAT, 0, 2.0}, {"threshold", SPORA_ATTR_FLOAT, 0, 5.0}});
  check("clip", {tensor({100}, rng, -3, 3)}, {zeros({100})},
        {{"min", SPORA_ATTR_FLOAT, 0, -0.5}, {"max", SPORA_ATTR_FLOAT, 0, 1.25}}, 0, 0);
}

TEST(ZeKernelsOnPocl, BinaryWithBroadcasting) {
  auto rng = rng_for("binary");
  for (const char* op : {"add", "sub", "mul", "div", "maximum", "minimum"}) {
    SCOPED_TRACE(op);
    check(op, {tensor({4, 1, 5}, rng), tensor({1, 3, 5}, rng, 0.5f, 2)}, {zeros({4, 3, 5})});  // both broadcast
    check(op, {tensor({1000}, rng), tensor({1000}, rng, 0.5f, 2)}, {zeros({1000})});            // same shape
    check(op, {tensor({6, 7}, rng), tensor({1, 1}, rng, 0.5f, 2)}, {zeros({6, 7})});            // scalar-like
    check(op, {tensor({2, 3, 4, 5}, rng), tensor({1, 3, 1, 5}, rng, 0.5f, 2)}, {zeros({2, 3, 4, 5})});
  }
  check("pow", {tensor({3, 8}, rng, 0.1f, 3), tensor({1, 8}, rng, -2, 2)}, {zeros({3, 8})}, {}, 1e-5, 1e-5);
}

TEST(ZeKernelsOnPocl, Reductions) {
  auto rng = rng_for("reduce");
  const std::vector<int64_t> shape = {5, 7, 130};
  struct Case {
    std::vector<int64_t> axes, out;
  };
  const Case cases[] = {{{1}, {5, 1, 130}}, {{0, 2}, {1, 7, 1}}, {{2}, {5, 7, 1}}, {{0, 1, 2}, {1, 1, 1}}};
  for (const char* op : {"sum", "mean", "max", "min"})
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(op) + " axes " + std::to_string(c.axes.size()));
      check(op, {tensor(shape, rng)}, {zeros(c.out)}, {{"axes", SPORA_ATTR_INTS, 0, 0, c.axes}}, 1e-5, 1e-4);
    }
}

TEST(ZeKernelsOnPocl, MatmulTiledWithTransposesAndBatchBroadcast) {
  auto rng = rng_for("matmul");
  check("matmul", {tensor({37, 53}, rng), tensor({53, 29}, rng)}, {zeros({37, 29})}, {}, 1e-5, 1e-4);
  check("matmul", {tensor({53, 37}, rng), tensor({29, 53}, rng)}, {zeros({37, 29})},
        {{"transpose_a", SPORA_ATTR_BOOL, 1}, {"transpose_b", SPORA_ATTR_BOOL, 1}}, 1e-5, 1e-4);
  check("matmul", {tensor({2, 1, 17, 20}, rng), tensor({1, 3, 20, 9}, rng)}, {zeros({2, 3, 17, 9})}, {}, 1e-5, 1e-4);
  check("matmul", {tensor({64, 48}, rng), tensor({48, 32}, rng)}, {zeros({64, 32})}, {}, 1e-5, 1e-4);  // whole tiles
}

TEST(ZeKernelsOnPocl, SoftmaxAndLogSoftmax) {
  auto rng = rng_for("softmax");
  for (const char* op : {"softmax", "log_softmax"}) {
    SCOPED_TRACE(op);
    check(op, {tensor({4, 33, 5}, rng, -6, 6)}, {zeros({4, 33, 5})}, {{"axis", SPORA_ATTR_INT, 1}});
    check(op, {tensor({4, 33, 5}, rng, -6, 6)}, {zeros({4, 33, 5})}, {{"axis", SPORA_ATTR_INT, 2}});
    check(op, {tensor({200, 10}, rng, -6, 6)}, {zeros({200, 10})}, {{"axis", SPORA_ATTR_INT, 1}});
  }
}

TEST(ZeKernelsOnPocl, SgdUpdate) {
  auto rng = rng_for("sgd");
  const std::vector<int64_t> a = {300}, b = {7, 11};
  // Momentum with Nesterov and weight decay: outputs params then buffers.
  check("sgd_update",
        {scalar_f32(0.1f), scalar_f32(0.5f), tensor(a, rng), tensor(b, rng), tensor(a, rng), tensor(b, rng),
         tensor(a, rng), tensor(b, rng)},
        {zeros(a), zeros(b), zeros(a), zeros(b)},
        {{"momentum", SPORA_ATTR_FLOAT, 0, 0.9}, {"dampening", SPORA_ATTR_FLOAT, 0, 0.1},
         {"nesterov", SPORA_ATTR_BOOL, 1}, {"weight_decay", SPORA_ATTR_FLOAT, 0, 0.01}});
  // Plain SGD.
  check("sgd_update", {scalar_f32(0.05f), scalar_f32(1.0f), tensor(a, rng), tensor(a, rng)}, {zeros(a)});
}

TEST(ZeKernelsOnPocl, AdamUpdate) {
  auto rng = rng_for("adam");
  const std::vector<int64_t> a = {257}, b = {3, 40};
  auto pos = [&](std::vector<int64_t> d) { return tensor(std::move(d), rng, 0, 0.5f); };  // v >= 0
  // AdamW with amsgrad, step as an i64 scalar.
  check("adam_update",
        {scalar_f32(1e-3f), scalar_i64(7), scalar_f32(1.0f), tensor(a, rng), tensor(b, rng), tensor(a, rng),
         tensor(b, rng), tensor(a, rng), tensor(b, rng), pos(a), pos(b), pos(a), pos(b)},
        {zeros(a), zeros(b), zeros(a), zeros(b), zeros(a), zeros(b), zeros(a), zeros(b)},
        {{"decoupled", SPORA_ATTR_BOOL, 1}, {"amsgrad", SPORA_ATTR_BOOL, 1}, {"weight_decay", SPORA_ATTR_FLOAT, 0, 0.01}},
        1e-4, 1e-5);
  // Plain Adam (L2 weight decay), step as f32.
  check("adam_update",
        {scalar_f32(1e-2f), scalar_f32(3), scalar_f32(0.5f), tensor(a, rng), tensor(a, rng), tensor(a, rng), pos(a)},
        {zeros(a), zeros(a), zeros(a)}, {{"weight_decay", SPORA_ATTR_FLOAT, 0, 0.1}}, 1e-4, 1e-5);
}

TEST(ZeKernelsOnPocl, GlobalNormAndClip) {
  auto rng = rng_for("norm");
  // Sizes across the 4096-element blocks: several blocks, a partial one, tiny.
  const std::vector<int64_t> a = {9000}, b = {3, 5}, c = {4096};
  check("global_norm", {tensor(a, rng), tensor(b, rng), tensor(c, rng)}, {zeros({})}, {}, 1e-5, 1e-6);
  // Large norm: clipped with factor max_norm / (norm + 1e-6).
  check("clip_by_global_norm", {tensor(a, rng), tensor(b, rng)}, {zeros(a), zeros(b), zeros({})},
        {{"max_norm", SPORA_ATTR_FLOAT, 0, 1.5}}, 1e-5, 1e-6);
  // Small norm: factor 1, tensors unchanged.
  check("clip_by_global_norm", {tensor(b, rng, -0.01f, 0.01f)}, {zeros(b), zeros({})},
        {{"max_norm", SPORA_ATTR_FLOAT, 0, 10.0}}, 1e-5, 1e-7);
}

// f16 and bf16 storage: loads convert to float, stores round to nearest
// even, as the reference does. Single operations must match bit for bit;
// sums and library functions get 2 units in the last place (float
// arithmetic in another order can round the other way).
TEST(ZeKernelsOnPocl, HalfAndBfloat16) {
  auto rng = rng_for("half");
  struct Kind {
    int32_t dtype;
    double rtol;
  };
  for (const Kind k : {Kind{SPORA_DTYPE_F16, 2 * 0x1p-10}, Kind{SPORA_DTYPE_BF16, 2 * 0x1p-7}}) {
    const int32_t dt = k.dtype;
    SCOPED_TRACE(spora::plugin::dtype_name(dt));
    const double rt = k.rtol, at = k.rtol * 0.05;
    // One float operation rounded once: bit-exact, which also pins the
    // rounding to nearest even on store.
    for (const char* op : {"neg", "relu", "round", "square", "reciprocal"})
      check(op, {tensor({3, 70}, rng, -4, 4, dt)}, {zeros({3, 70}, dt)}, {}, 0, 0);
    for (const char* op : {"add", "sub", "mul", "div", "maximum"})
      check(op, {tensor({4, 1, 5}, rng, -1, 1, dt), tensor({1, 3, 5}, rng, 0.5f, 2, dt)}, {zeros({4, 3, 5}, dt)}, {},
            0, 0);
    // Library functions may differ from the host's libm in the last float
    // bit, which can round the 16-bit result the other way.
    for (const char* op : {"exp", "tanh", "sigmoid", "silu", "gelu"})
      check(op, {tensor({3, 70}, rng, -4, 4, dt)}, {zeros({3, 70}, dt)}, {}, rt, at);
    for (const char* op : {"max", "min"})
      check(op, {tensor({5, 7, 130}, rng, -1, 1, dt)}, {zeros({5, 1, 130}, dt)}, {{"axes", SPORA_ATTR_INTS, 0, 0, {1}}},
            0, 0);
    for (const char* op : {"sum", "mean"})
      check(op, {tensor({5, 7, 130}, rng, -1, 1, dt)}, {zeros({5, 1, 130}, dt)}, {{"axes", SPORA_ATTR_INTS, 0, 0, {1}}},
            rt, at);
    check("sum", {tensor({4, 300}, rng, 0, 1, dt)}, {zeros({4, 1}, dt)}, {{"axes", SPORA_ATTR_INTS, 0, 0, {1}}}, rt, at);
    check("matmul", {tensor({2, 1, 17, 20}, rng, -1, 1, dt), tensor({1, 3, 20, 9}, rng, -1, 1, dt)},
          {zeros({2, 3, 17, 9}, dt)}, {}, rt, 4 * at);
    for (const char* op : {"softmax", "log_softmax"})
      check(op, {tensor({4, 33, 5}, rng, -6, 6, dt)}, {zeros({4, 33, 5}, dt)}, {{"axis", SPORA_ATTR_INT, 1}}, rt, at);
  }
}

T ints(std::vector<int64_t> dims, int32_t dtype, std::mt19937& rng) {
  T t = zeros(std::move(dims), dtype);
  for (auto& b : t.bytes) b = static_cast<unsigned char>(rng() & (dtype == SPORA_DTYPE_BOOL ? 1 : 0xff));
  return t;
}

TEST(ZeKernelsOnPocl, TransposeAndBroadcastAnyDtype) {
  auto rng = rng_for("layout");
  const std::vector<int64_t> perm = {2, 0, 3, 1};
  check("transpose", {tensor({3, 4, 5, 6}, rng)}, {zeros({5, 3, 6, 4})}, {{"perm", SPORA_ATTR_INTS, 0, 0, perm}}, 0, 0);
  check("transpose", {tensor({3, 4, 5, 6}, rng, -1, 1, SPORA_DTYPE_BF16)}, {zeros({5, 3, 6, 4}, SPORA_DTYPE_BF16)},
        {{"perm", SPORA_ATTR_INTS, 0, 0, perm}}, 0, 0);
  for (int32_t dt : {SPORA_DTYPE_I64, SPORA_DTYPE_I32, SPORA_DTYPE_U8, SPORA_DTYPE_BOOL}) {
    SCOPED_TRACE(spora::plugin::dtype_name(dt));
    check("transpose", {ints({7, 9}, dt, rng)}, {zeros({9, 7}, dt)}, {{"perm", SPORA_ATTR_INTS, 0, 0, {1, 0}}});
    check("broadcast_to", {ints({1, 9, 1}, dt, rng)}, {zeros({4, 9, 3}, dt)});
  }
  check("broadcast_to", {tensor({3, 1, 5}, rng)}, {zeros({3, 4, 5})}, {}, 0, 0);
}

TEST(ZeKernelsOnPocl, SoftmaxGradients) {
  auto rng = rng_for("softmax_grad");
  for (const char* op : {"softmax_grad", "log_softmax_grad"}) {
    SCOPED_TRACE(op);
    // y from a real (log_)softmax, so the formulas see plausible values.
    const bool log = std::string(op) == "log_softmax_grad";
    T x = tensor({4, 33, 5}, rng, -3, 3), y = zeros({4, 33, 5});
    {
      Desc d(log ? "log_softmax" : "softmax", {x}, {y}, {{"axis", SPORA_ATTR_INT, 1}});
      y = run_reference(d.d, {x}, {y})[0];
    }
    check(op, {y, tensor({4, 33, 5}, rng)}, {zeros({4, 33, 5})}, {{"axis", SPORA_ATTR_INT, 1}}, 2e-5, 2e-6);
    check(op, {y, tensor({4, 33, 5}, rng)}, {zeros({4, 33, 5})}, {{"axis", SPORA_ATTR_INT, 2}}, 2e-5, 2e-6);
  }
}

TEST(ZeKernelsOnPocl, LinearIsMatmulThenBiasInPlace) {
  auto rng = rng_for("linear");
  check("linear", {tensor({37, 53}, rng), tensor({29, 53}, rng), tensor({29}, rng)}, {zeros({37, 29})}, {}, 1e-5, 1e-4);
  check("linear", {tensor({5, 16}, rng, -1, 1, SPORA_DTYPE_BF16), tensor({3, 16}, rng, -1, 1, SPORA_DTYPE_BF16),
                   tensor({3}, rng, -1, 1, SPORA_DTYPE_BF16)},
        {zeros({5, 3}, SPORA_DTYPE_BF16)}, {}, 2 * 0x1p-7, 1e-2);
}

TEST(ZeKernelsOnPocl, UnsupportedDtypeIsLeftToTheHost) {
  T x = zeros({4}, SPORA_DTYPE_F64), y = zeros({4}, SPORA_DTYPE_F64);
  Desc d("exp", {x}, {y}, {});
  KernelPlan plan;
  ASSERT_EQ(spora::plugin::describe(&d.d, &plan), nullptr);
  Recipe r;
  spora_plugin_error_t* err = spora::ze::make_recipe(plan, &r);
  ASSERT_NE(err, nullptr);
  EXPECT_EQ(err->code, SPORA_PLUGIN_UNIMPLEMENTED);
  EXPECT_NE(std::string(err->message).find("[ze] exp"), std::string::npos) << err->message;
  err->destroy(err);
}

}  // namespace
