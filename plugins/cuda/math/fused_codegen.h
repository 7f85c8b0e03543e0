// CUDA source for one fused_elementwise region (gpu_fused.cpp compiles it
// with NVRTC at plan time). Host-only C++: tests/gpu compiles the generated
// element function with g++ and runs it against the reference kernel.
//
// The input is the reference planner's Program (plugins/common/kernels/
// fused.h: instructions, operand values, per-input broadcasting), so the
// region means exactly what the reference runs. The generated code:
//   - one thread per output element (grid-stride loop in the kernel);
//   - inputs read at their broadcast offset (the reference's per-input
//     Bcast, shapes baked in as constants) and loaded to the compute type
//     (f32 for f32/f16/bf16, f64 for f64) or bool;
//   - each instruction calls the unfused CUDA kernels' own functions
//     (ew_math.h: ew_unary, ew_arith, ew_compare; where selects), so every
//     op computes what the unfused op computes on the same operand;
//   - values stay in the compute type between instructions and the result
//     is rounded to the storage dtype once, where the reference fused kernel
//     rounds (its block buffers are compute-type); constants are rounded to
//     the storage dtype first, as the reference does;
//   - every float result passes through an empty asm, so the compiler cannot
//     contract one instruction's multiply into the next one's add (an FMA
//     across instructions would round once where the reference rounds twice).
#pragma once
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <spora/ops_elementwise.h>

#include "kernels/fused.h"  // plugins/common: the reference's planned Program

namespace spora::gpu::fusedgen {

namespace rf = spora::plugin::fused;

// The kernel's name in the generated source (extern "C": unmangled).
constexpr const char* kKernelName = "spora_fused_kernel";

inline bool is_half_dtype(int32_t dt) { return dt == SPORA_DTYPE_F16 || dt == SPORA_DTYPE_BF16; }

// The storage type of `dt` as generated code spells it; "" if none.
inline const char* storage_name(int32_t dt) {
  switch (dt) {
    case SPORA_DTYPE_F32: return "float";
    case SPORA_DTYPE_F64: return "double";
    case SPORA_DTYPE_F16: return "::spora::gpu::half_t";
    case SPORA_DTYPE_BF16: return "::spora::gpu::bhalf_t";
    case SPORA_DTYPE_BOOL: return "::spora::gpu::bool_t";
    default: return "";
  }
}

// A double as a C++ literal that reads back to the same value (hex float);
// infinities through HUGE_VAL (no literal spells them).
inline std::string double_literal(double v) {
  if (std::isinf(v)) return v > 0 ? "(HUGE_VAL)" : "(-HUGE_VAL)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return std::string("(") + buf + ")";
}

// A constant of compute type `f64 ? double : float`, already rounded to the
// storage dtype by the planner. NaN goes through its bits (no literal).
inline std::string const_literal(double v, bool f64) {
  char buf[64];
  if (std::isnan(v)) {
    if (f64) {
      uint64_t u;
      std::memcpy(&u, &v, 8);
      std::snprintf(buf, sizeof buf, "spora_f64_of_bits(0x%016" PRIx64 "ull)", u);
    } else {
      const float f = static_cast<float>(v);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      std::snprintf(buf, sizeof buf, "::spora::gpu::bits_float(0x%08" PRIx32 "u)", u);
    }
    return buf;
  }
  return f64 ? double_literal(v) : "static_cast<float>" + double_literal(v);
}

// EwParams for an op with attributes; "EwParams{}" for one without.
inline std::string params_literal(const spora::plugin::ew::OpInfo& info, const spora::plugin::ew::Params& p) {
  if (!(info.flags & SPORA_EW_F_ATTRS)) return "EwParams{}";
  return "EwParams{" + double_literal(p.alpha) + ", " + double_literal(p.beta) + ", " + double_literal(p.threshold) +
         ", " + double_literal(p.lo) + ", " + double_literal(p.hi) + ", " + (p.gelu_tanh ? "1" : "0") + "}";
}

// The C++ name of op `info` in EwOp, or "" for where (and anything without one).
inline std::string ewop_name(const spora::plugin::ew::OpInfo& info) {
  // EwOp's enumerators are the table's Ids; find this op's by its name.
#define SPORA_FUSEDGEN_ROW(Id, name) {name, "EwOp::k" #Id},
#define SPORA_FUSEDGEN_UNARY(Id, name) SPORA_FUSEDGEN_ROW(Id, name)
#define SPORA_FUSEDGEN_NOT(Id, name) SPORA_FUSEDGEN_ROW(Id, name)
#define SPORA_FUSEDGEN_CAST(Id, name)
#define SPORA_FUSEDGEN_BINARY(Id, name) SPORA_FUSEDGEN_ROW(Id, name)
#define SPORA_FUSEDGEN_COMPARE(Id, name) SPORA_FUSEDGEN_ROW(Id, name)
#define SPORA_FUSEDGEN_WHERE(Id, name)
  static const std::pair<const char*, const char*> kRows[] = {
#define SPORA_EW_OP(Id, name, kind, arity, cost, flags) SPORA_FUSEDGEN_##kind(Id, name)
#include <spora/ops_elementwise.def>
  };
#undef SPORA_FUSEDGEN_ROW
#undef SPORA_FUSEDGEN_UNARY
#undef SPORA_FUSEDGEN_NOT
#undef SPORA_FUSEDGEN_CAST
#undef SPORA_FUSEDGEN_BINARY
#undef SPORA_FUSEDGEN_COMPARE
#undef SPORA_FUSEDGEN_WHERE
  for (const auto& r : kRows)
    if (std::strcmp(r.first, info.name) == 0) return r.second;
  return "";
}

// Values of element index type: 32-bit index math when the output fits.
inline const char* index_type(const rf::Program& g) { return g.numel <= 0xffffffffll ? "uint32_t" : "uint64_t"; }

// `namespace <ns> { ... SPORA_HD inline OUT element(I i, const T0* in0, ...) }`:
// output element i of the region. Returns "" and sets *why when the
// program has something this generator does not know.
inline std::string element_source(const rf::Program& g, const std::string& ns, std::string* why) {
  const bool f64 = g.cdtype == SPORA_DTYPE_F64;
  const std::string C = f64 ? "double" : "float";
  const char* out_t = storage_name(g.dtype);
  const char* I = index_type(g);
  const int n_in = static_cast<int>(g.inputs.size());
  if (!*out_t || (g.cdtype != SPORA_DTYPE_F32 && g.cdtype != SPORA_DTYPE_F64)) {
    *why = "fused_elementwise: dtype " + std::to_string(g.dtype) + " has no generated kernel";
    return "";
  }
  std::string s;
  s += "namespace " + ns + " {\nusing namespace ::spora::gpu;\n";
  // The instruction boundary the compiler may not optimise across (see the
  // file comment); nothing on the host, where nothing contracts.
  s += "SPORA_HD inline float keep(float v) {\n#if defined(__CUDA_ARCH__)\n  asm(\"\" : \"+f\"(v));\n#endif\n  return v;\n}\n";
  s += "SPORA_HD inline double keep(double v) {\n#if defined(__CUDA_ARCH__)\n  asm(\"\" : \"+d\"(v));\n#endif\n  return v;\n}\n";
  s += "SPORA_HD inline double spora_f64_of_bits(uint64_t u) {\n  double d;\n  memcpy(&d, &u, 8);\n  return d;\n}\n";
  s += std::string("SPORA_HD inline ") + out_t + " element(" + I + " i";
  for (int k = 0; k < n_in; ++k) s += std::string(", const ") + storage_name(g.inputs[static_cast<size_t>(k)].dtype) + "* in" + std::to_string(k);
  s += ") {\n";
  s += std::string("  (void)i;\n");
  // Inputs, at their offsets.
  for (int k = 0; k < n_in; ++k) {
    const rf::Input& inp = g.inputs[static_cast<size_t>(k)];
    const std::string K = std::to_string(k);
    const char* st = storage_name(inp.dtype);
    if (!*st) {
      *why = "fused_elementwise: input " + K + " has dtype " + std::to_string(inp.dtype);
      return "";
    }
    std::string off;
    if (inp.mode == rf::Input::kUniform) {
      off = "0";
    } else if (inp.mode == rf::Input::kGather) {
      // Output coordinates over the input's coalesced dims (innermost
      // first), each times the input's stride there (0 where broadcast).
      const spora::plugin::ew::Bcast& b = inp.bc;
      s += std::string("  ") + I + " off" + K + " = 0;\n  {\n    " + I + " r = i;\n";
      for (int d = b.rank - 1; d >= 0; --d) {
        const std::string dim = std::to_string(b.dims[d]) + "u", stride = std::to_string(b.strides[0][d]) + "u";
        const bool last = d == 0;
        if (b.strides[0][d] != 0) {
          if (last) s += "    off" + K + " += r * " + stride + ";\n";
          else s += "    off" + K + " += (r % " + dim + ") * " + stride + ";\n";
        }
        if (!last) s += "    r /= " + dim + ";\n";
      }
      s += "    (void)r;\n  }\n";
      off = "off" + K;
    } else {
      off = "i";
    }
    const std::string vt = inp.dtype == SPORA_DTYPE_BOOL ? "bool" : C;
    s += "  const " + vt + " v" + K + " = elem<" + st + ">::load(in" + K + "[" + off + "]);\n";
  }
  // Operand text of value id `id`.
  auto operand = [&](int32_t id) -> std::string {
    const rf::Value& v = g.values[static_cast<size_t>(id)];
    if (v.is_const) return const_literal(v.constant, f64);
    return "v" + std::to_string(id);
  };
  std::vector<const rf::Instr*> code;
  for (const rf::Instr& ins : g.prologue) code.push_back(&ins);
  for (const rf::Instr& ins : g.body) code.push_back(&ins);
  // Prologue and body together, in value order (a prologue instruction
  // never reads a body one, and ids grow in program order).
  std::vector<const rf::Instr*> ordered(code.size(), nullptr);
  for (const rf::Instr* ins : code) {
    const size_t k = static_cast<size_t>(ins->result - n_in);
    if (k >= ordered.size() || ordered[k]) {
      *why = "fused_elementwise: unexpected instruction order in the plan";
      return "";
    }
    ordered[k] = ins;
  }
  for (const rf::Instr* ins : ordered) {
    const spora::plugin::ew::OpInfo& info = *ins->st.info;
    const rf::Value& r = g.values[static_cast<size_t>(ins->result)];
    const std::string res = "v" + std::to_string(ins->result);
    const bool arg_bool = g.values[static_cast<size_t>(ins->args[ins->nargs == 3 ? 1 : 0])].is_bool;
    const std::string T = arg_bool ? "bool" : C;
    std::string expr;
    if (info.op == spora::plugin::ew::Op::kWhere) {
      expr = "(" + operand(ins->args[0]) + " ? " + operand(ins->args[1]) + " : " + operand(ins->args[2]) + ")";
    } else {
      const std::string op = ewop_name(info);
      if (op.empty()) {
        *why = std::string("fused_elementwise: no GPU op code for ") + info.name;
        return "";
      }
      if (ins->nargs == 1) {
        expr = "ew_unary<" + T + ">(" + op + ", " + operand(ins->args[0]) + ", " + params_literal(info, ins->st.prm) + ")";
      } else if (ins->nargs == 2) {
        const bool compare = info.op >= spora::plugin::ew::Op::kEqual && info.op <= spora::plugin::ew::Op::kLogicalXor;
        expr = std::string(compare ? "ew_compare<" : "ew_arith<") + T + ">(" + op + ", " + operand(ins->args[0]) + ", " +
               operand(ins->args[1]) + ")";
      } else {
        *why = std::string("fused_elementwise: ") + info.name + " with 3 operands";
        return "";
      }
    }
    if (r.is_bool) s += "  const bool " + res + " = " + expr + ";\n";
    else s += "  const " + C + " " + res + " = keep(" + expr + ");\n";
  }
  s += "  return elem<" + std::string(out_t) + ">::store(" + operand(g.out_value) + ");\n}\n}  // namespace " + ns + "\n";
  return s;
}

// The whole translation unit NVRTC compiles: the math headers, the element
// function and the grid-stride kernel
//   extern "C" __global__ void spora_fused_kernel(const T0* in0, ..., OUT* out, long long n).
// No __restrict__: the op may run in place (an input is the output).
inline std::string kernel_source(const rf::Program& g, std::string* why) {
  const std::string elem = element_source(g, "spora_fused", why);
  if (elem.empty()) return "";
  std::string s = "// fused_elementwise region (plugins/cuda/math/fused_codegen.h)\n#include \"ew_math.h\"\n";
  s += "namespace spora::gpu {\n" + elem + "}  // namespace spora::gpu\n";
  s += std::string("extern \"C\" __global__ void ") + kKernelName + "(";
  for (size_t k = 0; k < g.inputs.size(); ++k)
    s += std::string("const ") + storage_name(g.inputs[k].dtype) + "* in" + std::to_string(k) + ", ";
  s += std::string(storage_name(g.dtype)) + "* out, long long n) {\n";
  s += "  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;\n"
       "       i += static_cast<long long>(gridDim.x) * blockDim.x)\n";
  s += std::string("    out[i] = ::spora::gpu::spora_fused::element(static_cast<") + index_type(g) + ">(i)";
  for (size_t k = 0; k < g.inputs.size(); ++k) s += ", in" + std::to_string(k);
  s += ");\n}\n";
  return s;
}

// ---- NVRTC's missing standard headers ----
//
// NVRTC has no C++ standard library. The math headers need a few names from
// <cstdint>, <cstring>, <type_traits>, <limits> and <math.h>; these small
// stand-ins (only ever compiled by NVRTC) give them. memcpy and the C math
// functions are NVRTC builtins.
inline std::vector<std::pair<std::string, std::string>> rtc_shim_headers() {
  std::vector<std::pair<std::string, std::string>> h;
  h.emplace_back("cstdint", R"(#pragma once
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef unsigned long long uintptr_t;
namespace std {
using ::int8_t; using ::int16_t; using ::int32_t; using ::int64_t;
using ::uint8_t; using ::uint16_t; using ::uint32_t; using ::uint64_t; using ::uintptr_t;
}
)");
  h.emplace_back("cstring", "#pragma once\n// memcpy is an NVRTC builtin.\n");
  h.emplace_back("math.h", R"(#pragma once
// The C math functions are NVRTC builtins; HUGE_VAL is not.
__host__ __device__ inline double spora_rtc_huge_val() {
  unsigned long long u = 0x7ff0000000000000ull;
  double d;
  memcpy(&d, &u, 8);
  return d;
}
#define HUGE_VAL (spora_rtc_huge_val())
)");
  h.emplace_back("type_traits", R"(#pragma once
namespace std {
template <class T, T v> struct integral_constant { static constexpr T value = v; };
typedef integral_constant<bool, true> true_type;
typedef integral_constant<bool, false> false_type;
template <class A, class B> struct is_same : false_type {};
template <class A> struct is_same<A, A> : true_type {};
template <class T> struct remove_cv { typedef T type; };
template <class T> struct remove_cv<const T> { typedef T type; };
template <class T> struct remove_cv<volatile T> { typedef T type; };
template <class T> struct remove_cv<const volatile T> { typedef T type; };
template <class T> struct is_fp_ : false_type {};
template <> struct is_fp_<float> : true_type {};
template <> struct is_fp_<double> : true_type {};
template <> struct is_fp_<long double> : true_type {};
template <class T> struct is_floating_point : is_fp_<typename remove_cv<T>::type> {};
template <class T> struct is_int_ : false_type {};
template <> struct is_int_<bool> : true_type {};
template <> struct is_int_<char> : true_type {};
template <> struct is_int_<signed char> : true_type {};
template <> struct is_int_<unsigned char> : true_type {};
template <> struct is_int_<short> : true_type {};
template <> struct is_int_<unsigned short> : true_type {};
template <> struct is_int_<int> : true_type {};
template <> struct is_int_<unsigned> : true_type {};
template <> struct is_int_<long> : true_type {};
template <> struct is_int_<unsigned long> : true_type {};
template <> struct is_int_<long long> : true_type {};
template <> struct is_int_<unsigned long long> : true_type {};
template <class T> struct is_integral : is_int_<typename remove_cv<T>::type> {};
template <class T> struct is_signed
    : integral_constant<bool, (is_integral<T>::value || is_floating_point<T>::value) && T(-1) < T(0)> {};
template <class T> struct is_unsigned : integral_constant<bool, is_integral<T>::value && !(T(-1) < T(0))> {};
template <class T> struct make_unsigned { typedef T type; };
template <> struct make_unsigned<signed char> { typedef unsigned char type; };
template <> struct make_unsigned<char> { typedef unsigned char type; };
template <> struct make_unsigned<short> { typedef unsigned short type; };
template <> struct make_unsigned<int> { typedef unsigned type; };
template <> struct make_unsigned<long> { typedef unsigned long type; };
template <> struct make_unsigned<long long> { typedef unsigned long long type; };
template <bool B, class T = void> struct enable_if {};
template <class T> struct enable_if<true, T> { typedef T type; };
template <bool B, class T, class F> struct conditional { typedef T type; };
template <class T, class F> struct conditional<false, T, F> { typedef F type; };
}
)");
  h.emplace_back("limits", R"(#pragma once
namespace std {
template <class T> struct numeric_limits;
#define SPORA_RTC_LIMITS(T, lo, hi, low)                                  \
  template <> struct numeric_limits<T> {                                  \
    __host__ __device__ static constexpr T min() { return lo; }           \
    __host__ __device__ static constexpr T max() { return hi; }           \
    __host__ __device__ static constexpr T lowest() { return low; }       \
  };
SPORA_RTC_LIMITS(bool, false, true, false)
SPORA_RTC_LIMITS(signed char, -128, 127, -128)
SPORA_RTC_LIMITS(unsigned char, 0, 255, 0)
SPORA_RTC_LIMITS(short, -32768, 32767, -32768)
SPORA_RTC_LIMITS(unsigned short, 0, 65535, 0)
SPORA_RTC_LIMITS(int, -2147483647 - 1, 2147483647, -2147483647 - 1)
SPORA_RTC_LIMITS(unsigned, 0u, 4294967295u, 0u)
SPORA_RTC_LIMITS(long, -9223372036854775807l - 1, 9223372036854775807l, -9223372036854775807l - 1)
SPORA_RTC_LIMITS(unsigned long, 0ul, 18446744073709551615ul, 0ul)
SPORA_RTC_LIMITS(long long, -9223372036854775807ll - 1, 9223372036854775807ll, -9223372036854775807ll - 1)
SPORA_RTC_LIMITS(unsigned long long, 0ull, 18446744073709551615ull, 0ull)
SPORA_RTC_LIMITS(float, 1.17549435082228750797e-38f, 3.40282346638528859812e+38f, -3.40282346638528859812e+38f)
SPORA_RTC_LIMITS(double, 2.22507385850720138309e-308, 1.79769313486231570815e+308, -1.79769313486231570815e+308)
#undef SPORA_RTC_LIMITS
}
)");
  return h;
}

// The math headers the kernel includes, by the names the includes use
// (ew_math.h: "hd.h", "fmath.h", <spora/ops_elementwise.h> and .def; the
// .h includes the .def as "ops_elementwise.def").
inline const char* const kMathHeaderNames[] = {"ew_math.h", "hd.h", "fmath.h", "spora/ops_elementwise.h",
                                               "spora/ops_elementwise.def"};

}  // namespace spora::gpu::fusedgen
