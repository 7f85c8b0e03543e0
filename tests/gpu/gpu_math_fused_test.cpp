// fused_elementwise's generated CUDA (plugins/cuda/math/fused_codegen.h):
// the text has the expected structure; the generated element function,
// compiled with the host compiler, gives the reference fused kernel's
// output bit for bit on the same inputs (the same SPORA_HD functions run on
// the GPU); and, where the CUDA toolkit's NVRTC is installed, the whole
// generated kernel compiles with the plugin's stand-in standard headers.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "gpu_test_util.h"
#include "kernels/fused.h"
#include "math/fused_codegen.h"

namespace gputest {
namespace {

namespace fg = spora::gpu::fusedgen;
namespace rf = spora::plugin::fused;

constexpr int32_t F32 = SPORA_DTYPE_F32, F64 = SPORA_DTYPE_F64, F16 = SPORA_DTYPE_F16, BF16 = SPORA_DTYPE_BF16,
                  BOOL = SPORA_DTYPE_BOOL;

struct Case {
  const char* name;
  const char* program;
  int32_t dtype;  // the output's
  std::vector<std::pair<int32_t, std::vector<int64_t>>> inputs;
  std::vector<int64_t> out_dims;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"unary_chain_f32", "in0 exp; t0 neg; t1 sigmoid; t2 in0 mul", F32, {{F32, {5, 7}}}, {5, 7}},
      {"broadcast_f32", "in0 in1 add; t0 in2 mul; t1 c:0.5 maximum", F32,
       {{F32, {4, 1, 6}}, {F32, {1, 5, 1}}, {F32, {1, 1, 1}}}, {4, 5, 6}},
      {"where_compare_f32", "in0 in1 greater; t0 in2 logical_and; t1 in0 in1 where; t2 c:-1 add", F32,
       {{F32, {3, 8}}, {F32, {1, 8}}, {BOOL, {3, 1}}}, {3, 8}},
      {"consts_not_f32", "in0 c:0 not_equal; t0 logical_not; t1 in0 c:nan where; t2 c:inf minimum; t3 c:-0.25 div",
       F32, {{F32, {40}}}, {40}},
      {"attrs_f16", "in0 c:0.1 mul; t0 in1 add; t1 tanh; t2 leaky_relu alpha=0.2; t3 c:3 sub", F16,
       {{F16, {2, 3, 4}}, {F16, {1, 1, 4}}}, {2, 3, 4}},
      {"gelu_clip_bf16", "in0 gelu approximate=tanh; t0 in0 sub; t1 clip min=-1 max=1; t2 erf", BF16, {{BF16, {64}}},
       {64}},
      {"softplus_f64", "in0 in1 pow; t0 log1p; t1 in1 minimum; t2 softplus beta=2; t3 rsqrt", F64,
       {{F64, {3, 5}}, {F64, {3, 1}}}, {3, 5}},
      {"uniform_f32", "in0 sqrt; t0 c:1 add; t1 in0 mul", F32, {{F32, {1, 1}}}, {1, 1}},
      {"rank5_f32", "in0 in1 sub; t0 abs; in0 in1 mul; t1 t2 add; t3 round", F32,
       {{F32, {2, 1, 3, 1, 5}}, {F32, {1, 4, 1, 6, 1}}}, {2, 4, 3, 6, 5}},
      {"bool_mix_bf16", "in1 in2 logical_xor; t0 in0 c:0 where; in0 c:1.5 less_equal; t2 t1 in0 where; t0 t3 t1 where", BF16,
       {{BF16, {6, 9}}, {BOOL, {6, 9}}, {BOOL, {1, 9}}}, {6, 9}},
  };
  return all;
}

// The reference planner's Program for a case, its inputs and output.
struct Planned {
  sp::KernelPlan plan;
  std::vector<Tensor> in;
  Tensor out;
};

void plan_case(const Case& c, Planned* p) {
  p->in.clear();
  for (const auto& [dt, dims] : c.inputs) {
    p->in.push_back(make(dt, dims));
    fill(p->in.back(), -3, 3, true);
  }
  p->out = make(c.dtype, c.out_dims);
  std::vector<const Tensor*> ins;
  for (const Tensor& t : p->in) ins.push_back(&t);
  std::string why;
  ASSERT_TRUE(ref_plan("fused_elementwise", ins, {&p->out}, {string_attr("program", c.program)}, &p->plan, &why))
      << c.name << ": " << why;
}

std::string source_of(const Case& c, Planned* p) {
  plan_case(c, p);
  std::string why;
  const std::string s = fg::kernel_source(p->plan.get<rf::Program>(), &why);
  EXPECT_FALSE(s.empty()) << c.name << ": " << why;
  return s;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(GpuMathFused, SourceStructure) {
  Planned p;
  // A unary chain: one thread per element, the unfused ops' functions, a
  // barrier after each float result, one rounding at the end.
  std::string s = source_of(cases()[0], &p);
  EXPECT_TRUE(contains(s, "extern \"C\" __global__ void spora_fused_kernel(const float* in0, float* out, long long n)")) << s;
  EXPECT_TRUE(contains(s, "i += static_cast<long long>(gridDim.x) * blockDim.x")) << s;
  EXPECT_TRUE(contains(s, "const float v0 = elem<float>::load(in0[i]);")) << s;
  EXPECT_TRUE(contains(s, "const float v1 = keep(ew_unary<float>(EwOp::kExp, v0, EwParams{}));")) << s;
  EXPECT_TRUE(contains(s, "const float v3 = keep(ew_unary<float>(EwOp::kSigmoid, v2, EwParams{}));")) << s;
  EXPECT_TRUE(contains(s, "const float v4 = keep(ew_arith<float>(EwOp::kMul, v3, v0));")) << s;
  EXPECT_TRUE(contains(s, "return elem<float>::store(v4);")) << s;
  EXPECT_TRUE(contains(s, "#include \"ew_math.h\"")) << s;
  EXPECT_FALSE(contains(s, "__restrict__")) << "the op may run in place";

  // Broadcasting: per-input offsets over the coalesced dims, a scalar at 0,
  // a constant rounded to f32 as a hex literal.
  s = source_of(cases()[1], &p);
  EXPECT_TRUE(contains(s, "uint32_t off0 = 0;")) << s;
  EXPECT_TRUE(contains(s, "off0 += (r % 6u) * 1u;")) << s;
  EXPECT_TRUE(contains(s, "r /= 6u;")) << s;
  EXPECT_TRUE(contains(s, "off1 += (r % 5u) * 1u;")) << s;
  EXPECT_TRUE(contains(s, "elem<float>::load(in2[0])")) << s;
  EXPECT_TRUE(contains(s, "ew_arith<float>(EwOp::kMaximum, v4, static_cast<float>(0x1p-1))")) << s;

  // Comparisons, logical ops and where on bool values; no barrier on bools.
  s = source_of(cases()[2], &p);
  EXPECT_TRUE(contains(s, "const bool v2 = elem<::spora::gpu::bool_t>::load(in2[off2]);")) << s;
  EXPECT_TRUE(contains(s, "const bool v3 = ew_compare<float>(EwOp::kGreater, v0, v1);")) << s;
  EXPECT_TRUE(contains(s, "const bool v4 = ew_compare<bool>(EwOp::kLogicalAnd, v3, v2);")) << s;
  EXPECT_TRUE(contains(s, "const float v5 = keep((v4 ? v0 : v1));")) << s;

  // Non-finite constants, logical_not.
  s = source_of(cases()[3], &p);
  EXPECT_TRUE(contains(s, "ew_unary<bool>(EwOp::kLogicalNot, v1, EwParams{})")) << s;
  EXPECT_TRUE(contains(s, "::spora::gpu::bits_float(0x7fc00000u)")) << s;
  EXPECT_TRUE(contains(s, "static_cast<float>(HUGE_VAL)")) << s;

  // f16 storage: loads convert, values stay f32, the store rounds once;
  // attributes reach EwParams; the constant 0.1 is rounded to f16 first.
  s = source_of(cases()[4], &p);
  EXPECT_TRUE(contains(s, "::spora::gpu::half_t element(uint32_t i, const ::spora::gpu::half_t* in0, const ::spora::gpu::half_t* in1)")) << s;
  EXPECT_TRUE(contains(s, "const float v0 = elem<::spora::gpu::half_t>::load(in0[i]);")) << s;
  EXPECT_TRUE(contains(s, "static_cast<float>(0x1.998p-4)")) << s;  // f16(0.1) = 0x1.998p-4
  EXPECT_TRUE(contains(s, "EwOp::kLeakyRelu, v4, EwParams{(0x1.999999999999ap-3), (0x1p+0), (0x1.4p+4), (-HUGE_VAL), (HUGE_VAL), 0}")) << s;
  EXPECT_TRUE(contains(s, "return elem<::spora::gpu::half_t>::store(v6);")) << s;

  // bf16 gelu(tanh) and clip's bounds.
  s = source_of(cases()[5], &p);
  EXPECT_TRUE(contains(s, "EwOp::kGelu, v0, EwParams{")) << s;
  EXPECT_TRUE(contains(s, ", 1}")) << s;  // gelu_tanh
  EXPECT_TRUE(contains(s, "(-0x1p+0), (0x1p+0), 0}")) << s;

  // f64 computes in double.
  s = source_of(cases()[6], &p);
  EXPECT_TRUE(contains(s, "const double v2 = keep(ew_arith<double>(EwOp::kPow, v0, v1));")) << s;
}

TEST(GpuMathFused, Literals) {
  for (double v : {0.1, -1e-300, 3.0, 1e38, 5e-324, -0.0}) {
    const std::string t = fg::double_literal(v);
    EXPECT_EQ(std::strtod(t.c_str() + 1, nullptr), v) << t;  // "(<hex>)"
  }
  EXPECT_EQ(fg::double_literal(INFINITY), "(HUGE_VAL)");
  EXPECT_EQ(fg::double_literal(-INFINITY), "(-HUGE_VAL)");
  EXPECT_EQ(fg::const_literal(std::nan(""), true), "spora_f64_of_bits(0x7ff8000000000000ull)");
}

// ---- the generated element functions, compiled and run on the host ----

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void write_file(const std::string& path, const void* data, size_t n) {
  std::ofstream f(path, std::ios::binary);
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  ASSERT_TRUE(f.good()) << path;
}

TEST(GpuMathFused, GeneratedCodeMatchesReference) {
  const std::string dir = ::testing::TempDir() + "spora_fused_" + std::to_string(getpid());
  ASSERT_EQ(std::system(("mkdir -p '" + dir + "'").c_str()), 0);
  std::vector<Planned> planned(cases().size());
  std::string prog = "#include \"ew_math.h\"\n#include <cstdio>\n#include <string>\n#include <vector>\n";
  std::string main_body;
  for (size_t k = 0; k < cases().size(); ++k) {
    const Case& c = cases()[k];
    Planned& p = planned[k];
    plan_case(c, &p);
    const rf::Program& g = p.plan.get<rf::Program>();
    std::string why;
    const std::string ns = "case" + std::to_string(k);
    const std::string elem = fg::element_source(g, ns, &why);
    ASSERT_FALSE(elem.empty()) << c.name << ": " << why;
    prog += "namespace spora::gpu {\n" + elem + "}\n";
    // The runner: inputs from files, every element, the output to a file.
    const std::string K = std::to_string(k);
    main_body += "  {\n";
    std::string args;
    for (size_t i = 0; i < p.in.size(); ++i) {
      const std::string I = std::to_string(i);
      write_file(dir + "/c" + K + "_in" + I, p.in[i].bytes.data(), p.in[i].bytes.size());
      main_body += "    std::vector<char> a" + I + " = load(dir + \"/c" + K + "_in" + I + "\", " +
                   std::to_string(p.in[i].bytes.size()) + ");\n";
      args += std::string(", reinterpret_cast<const ") + fg::storage_name(p.in[i].dtype) + "*>(a" + I + ".data())";
    }
    const std::string out_t = fg::storage_name(c.dtype);
    main_body += "    std::vector<" + out_t + "> y(" + std::to_string(g.numel) + ");\n";
    main_body += "    for (unsigned long long i = 0; i < y.size(); ++i) y[i] = spora::gpu::" + ns +
                 "::element(static_cast<" + fg::index_type(g) + ">(i)" + args + ");\n";
    main_body += "    save(dir + \"/c" + K + "_out\", y.data(), y.size() * sizeof(y[0]));\n  }\n";
  }
  prog += R"(
static std::vector<char> load(const std::string& path, size_t n) {
  std::vector<char> v(n);
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f || std::fread(v.data(), 1, n, f) != n) std::exit(3);
  std::fclose(f);
  return v;
}
static void save(const std::string& path, const void* p, size_t n) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(p, 1, n, f) != n) std::exit(4);
  std::fclose(f);
}
int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string dir = argv[1];
)" + main_body + "  return 0;\n}\n";
  write_file(dir + "/fused.cpp", prog.data(), prog.size());
  // The host compiler, as the plugin's math headers are compiled for tests
  // (no FMA contraction on x86-64 without -mfma, like the reference).
  const std::string cmd = std::string("'") + SPORA_TEST_CXX + "' -std=c++17 -O2 -I'" + SPORA_TEST_SOURCE_DIR +
                          "/plugins/cuda/math' -I'" + SPORA_TEST_SOURCE_DIR + "/plugin-api/include' '" + dir +
                          "/fused.cpp' -o '" + dir + "/fused' 2> '" + dir + "/log' && '" + dir + "/fused' '" + dir + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n" << read_file(dir + "/log") << "\n" << prog;
  for (size_t k = 0; k < cases().size(); ++k) {
    Planned& p = planned[k];
    std::vector<const Tensor*> ins;
    for (const Tensor& t : p.in) ins.push_back(&t);
    ref_run(p.plan, ins, {&p.out});
    Tensor got = make(p.out.dtype, p.out.dims);
    const std::string bytes = read_file(dir + "/c" + std::to_string(k) + "_out");
    ASSERT_EQ(bytes.size(), got.bytes.size()) << cases()[k].name;
    std::memcpy(got.bytes.data(), bytes.data(), bytes.size());
    EXPECT_EQ(compare(got, p.out, 0, 0, cases()[k].name), 0);
  }
  (void)std::system(("rm -rf '" + dir + "'").c_str());
}

// ---- the whole kernel under NVRTC (no GPU needed to compile) ----

// NVRTC's C API, declared here so the test needs no CUDA headers.
using Prog = void*;
using CreateFn = int (*)(Prog*, const char*, const char*, int, const char* const*, const char* const*);
using CompileFn = int (*)(Prog, int, const char* const*);
using SizeFn = int (*)(Prog, size_t*);
using GetFn = int (*)(Prog, char*);
using DestroyFn = int (*)(Prog*);

void* open_nvrtc() {
  for (const char* major : {"13", "12"}) {
    const std::string name = std::string("libnvrtc.so.") + major;
    if (void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    if (void* h = dlopen((std::string(SPORA_TEST_NVRTC_DIR) + "/" + name).c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  }
  return nullptr;
}

TEST(GpuMathFused, KernelCompilesWithNvrtc) {
  void* h = open_nvrtc();
  if (!h) GTEST_SKIP() << "no libnvrtc here (" << SPORA_TEST_NVRTC_DIR << ")";
  auto create = reinterpret_cast<CreateFn>(dlsym(h, "nvrtcCreateProgram"));
  auto compile = reinterpret_cast<CompileFn>(dlsym(h, "nvrtcCompileProgram"));
  auto log_size = reinterpret_cast<SizeFn>(dlsym(h, "nvrtcGetProgramLogSize"));
  auto log = reinterpret_cast<GetFn>(dlsym(h, "nvrtcGetProgramLog"));
  auto cubin_size = reinterpret_cast<SizeFn>(dlsym(h, "nvrtcGetCUBINSize"));
  auto destroy = reinterpret_cast<DestroyFn>(dlsym(h, "nvrtcDestroyProgram"));
  ASSERT_TRUE(create && compile && log_size && log && cubin_size && destroy);
  // The plugin's headers: the stand-ins and the math headers (which it
  // embeds at build time; read from the source tree here).
  std::vector<std::pair<std::string, std::string>> headers = fg::rtc_shim_headers();
  const std::string root = SPORA_TEST_SOURCE_DIR;
  for (const char* name : fg::kMathHeaderNames) {
    const std::string n = name;
    const std::string path = n.compare(0, 6, "spora/") == 0 ? root + "/plugin-api/include/" + n : root + "/plugins/cuda/math/" + n;
    headers.emplace_back(n, read_file(path));
    ASSERT_FALSE(headers.back().second.empty()) << path;
    if (n == "spora/ops_elementwise.def") headers.emplace_back("ops_elementwise.def", headers.back().second);
  }
  std::vector<const char*> names, texts;
  for (const auto& e : headers) {
    names.push_back(e.first.c_str());
    texts.push_back(e.second.c_str());
  }
  for (const Case& c : cases()) {
    Planned p;
    const std::string src = source_of(c, &p);
    Prog prog = nullptr;
    ASSERT_EQ(create(&prog, src.c_str(), "spora_fused.cu", static_cast<int>(names.size()), texts.data(), names.data()), 0);
    // The plugin's options (gpu_nvrtc.cpp), for the H100's architecture.
    const char* opts[] = {"--gpu-architecture=sm_90", "-std=c++17", "-default-device", "--fmad=true"};
    const int r = compile(prog, 4, opts);
    size_t n = 0;
    std::string text;
    if (log_size(prog, &n) == 0 && n > 1) {
      text.resize(n);
      log(prog, &text[0]);
      text.resize(n - 1);  // the terminating NUL
    }
    EXPECT_EQ(r, 0) << c.name << ":\n" << text << "\n" << src;
    size_t bytes = 0;
    if (r == 0) {
      EXPECT_EQ(cubin_size(prog, &bytes), 0);
      EXPECT_GT(bytes, 0u) << c.name;
    }
    destroy(&prog);
  }
  // Not dlclosed, as the cuda plugin keeps it: unloading would unmap the
  // only pointer to the 72,704-byte exception pool nvrtc's own C++ runtime
  // allocates when it loads, which LeakSanitizer then reports as a leak.
}

}  // namespace
}  // namespace gputest
