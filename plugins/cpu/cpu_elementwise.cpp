// Elementwise ops on the cpu: the shared kernels' plan (kernels/elementwise.h)
// split across threads for large tensors, f16/bf16 run as f32 on converted
// blocks, and oneDNN's JIT eltwise primitives for the transcendental
// f32/bf16 maps, where libm's scalar calls are 5-50x slower. Everything is
// decided at plan time; a launch only runs.
#include <immintrin.h>

#include <algorithm>
#include <string>

#include "cpu_kernels.h"
#include "cpu_parallel.h"
#include "kernels/elementwise.h"

namespace spora::cpu {
namespace {

using plugin::KernelPlan;
namespace ew = plugin::ew;

// Below this many elements a oneDNN execute (~1-3 us with its memory
// objects and stream) costs more than our own loop.
constexpr int64_t kOnednnMinElements = 4096;
// Elements per f32 block of the 16-bit float path: small enough for L1.
constexpr int64_t kBlock = 512;

bool is_half(int32_t dt) { return dt == SPORA_DTYPE_F16 || dt == SPORA_DTYPE_BF16; }

// Block conversions, chosen at plan time: F16C/AVX2 where the cpu has them
// (bit-identical to the portable ones, NaN payloads aside, also under
// FTZ/DAZ), else loops that vectorise with SSE2.
using ToF32 = void (*)(const uint16_t* x, float* y, int64_t n);
using FromF32 = void (*)(const float* x, uint16_t* y, int64_t n);

void f16_to_f32(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = ew::half_to_float(x[i]);
}
void f32_to_f16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = ew::float_to_half(x[i]);
}
void bf16_to_f32(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = ew::bf16_to_float(x[i]);
}
void f32_to_bf16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = ew::float_to_bf16(x[i]);
}

__attribute__((target("avx2,f16c"))) void f16_to_f32_f16c(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  for (; i < n; ++i) y[i] = ew::half_to_float(x[i]);
}
__attribute__((target("avx2,f16c"))) void f32_to_f16_f16c(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) y[i] = ew::float_to_half(x[i]);
}
__attribute__((target("avx2"))) void bf16_to_f32_avx2(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = ew::bf16_to_float(x[i]);
}
__attribute__((target("avx2"))) void f32_to_bf16_avx2(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = ew::float_to_bf16(x[i]);
}

ToF32 to_f32_for(int32_t dt) {
  const bool avx2 = __builtin_cpu_supports("avx2"), f16c = avx2 && __builtin_cpu_supports("f16c");
  if (dt == SPORA_DTYPE_F16) return f16c ? f16_to_f32_f16c : f16_to_f32;
  return avx2 ? bf16_to_f32_avx2 : bf16_to_f32;
}
FromF32 from_f32_for(int32_t dt) {
  const bool avx2 = __builtin_cpu_supports("avx2"), f16c = avx2 && __builtin_cpu_supports("f16c");
  if (dt == SPORA_DTYPE_F16) return f16c ? f32_to_f16_f16c : f32_to_f16;
  return avx2 ? f32_to_bf16_avx2 : f32_to_bf16;
}

struct State {
  ew::State ew;
  int64_t grain = kParallelGrain;
  // 16-bit float path: the op's f32 kernel on blocks converted on the fly.
  ew::State f32;
  ToF32 to_f32 = nullptr;      // set when the inputs are 16-bit
  FromF32 from_f32 = nullptr;  // set when the output is 16-bit
  int32_t in_size = 0, out_size = 0;  // element sizes, for non-16-bit operands
  // oneDNN path only.
  dnnl::memory::desc md;
  dnnl::eltwise_forward prim;
};

// The f16/bf16 kernels convert element by element inside each op's loop,
// where one scalar libm call keeps the whole loop (conversions included)
// scalar: ~2-15 ns per element. Converting blocks in their own vectorised
// loops and running the f32 kernel costs about what f32 does. Results are
// bit-identical: the 16-bit kernels compute in f32 and round once, as here.
void half_range(const State& s, const void* const* in, void* const* out, int64_t begin, int64_t end) {
  alignas(64) float xb[ew::kMaxIn][kBlock];
  alignas(64) float yb[kBlock];
  const int n_in = s.ew.info->inputs;
  for (int64_t pos = begin; pos < end; pos += kBlock) {
    const int64_t len = std::min(kBlock, end - pos);
    const void* ins[ew::kMaxIn];
    for (int k = 0; k < n_in; ++k) {
      if (s.to_f32) {
        // Flat operands: contiguous, or one element broadcast (stride 0).
        const bool whole = n_in == 1 || s.ew.bc.inner(k) == 1;
        s.to_f32(static_cast<const uint16_t*>(in[k]) + (whole ? pos : 0), xb[k], whole ? len : 1);
        ins[k] = xb[k];
      } else {
        ins[k] = static_cast<const char*>(in[k]) + pos * s.in_size;
      }
    }
    void* o = s.from_f32 ? static_cast<void*>(yb) : static_cast<char*>(out[0]) + pos * s.out_size;
    s.f32.range(s.f32, ins, &o, 0, len);
    if (s.from_f32) s.from_f32(yb, static_cast<uint16_t*>(out[0]) + pos, len);
  }
}

// Plans the f32 block path when a 16-bit float is involved and the operands
// are flat (unary ops, casts, binary ops without row/column broadcasting).
bool plan_half(const KernelPlan& p, State& s) {
  const ew::Op op = s.ew.info->op;
  const int32_t in = p.in[0].dtype, out = p.out[0].dtype;
  if (op == ew::Op::kWhere) return false;  // moves bits: already fast
  if (op == ew::Op::kCast) {
    if ((!is_half(in) && !is_half(out)) || in == out) return false;  // a same-dtype cast is a copy
    s.f32.range = ew::pick_cast(is_half(in) ? SPORA_DTYPE_F32 : in, is_half(out) ? SPORA_DTYPE_F32 : out);
  } else if (!is_half(in)) {
    return false;
  } else if (s.ew.info->inputs == 1) {
    s.f32.range = ew::pick_unary(op, SPORA_DTYPE_F32);
  } else {
    if (s.ew.bc.rank != 1) return false;
    s.f32.range = ew::pick_binary(op, SPORA_DTYPE_F32);
  }
  if (!s.f32.range) return false;
  s.to_f32 = is_half(in) ? to_f32_for(in) : nullptr;
  s.from_f32 = is_half(out) ? from_f32_for(out) : nullptr;
  s.in_size = static_cast<int32_t>(plugin::dtype_size(in));
  s.out_size = static_cast<int32_t>(plugin::dtype_size(out));
  return true;
}

template <bool kHalf>
void run_loops(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  const State& s = p.get<State>();
  const int64_t n = s.ew.numel;
  auto range = [&](int64_t begin, int64_t end) {
    if constexpr (kHalf) half_range(s, in, out, begin, end);
    else s.ew.range(s.ew, in, out, begin, end);
  };
  if (n < s.grain) {
    range(0, n);
    return;
  }
  // MXCSR is per thread and launch sets FTZ/DAZ only on the caller's: OpenMP
  // workers would otherwise crawl through denormals and round differently.
  const unsigned csr = _mm_getcsr();
  parallel_for(n, s.grain, [&](int64_t begin, int64_t end) {
    const unsigned saved = _mm_getcsr();
    _mm_setcsr(csr);
    range(begin, end);
    _mm_setcsr(saved);
  });
}

void run_onednn(const KernelPlan& p, const void* const* in, void* const* out, void*) {
  const State& s = p.get<State>();
  auto& eng = onednn_engine();
  dnnl::memory src(s.md, eng, const_cast<void*>(in[0]));
  dnnl::memory dst(s.md, eng, out[0]);
  dnnl::stream strm(eng);
  s.prim.execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
  strm.wait();
}

// The oneDNN algorithm computing `op` as the reference defines it, if there
// is one accurate to a few ulp (measured over [-90, 90]; gelu returns 0
// where the true result is below ~1e-18 in magnitude, x < -9). Not log
// (oneDNN 2.6.3's loses 1e-4 relative near x = 1) nor soft_relu (absolute
// error ~4e-6 where the result is ~0, and no beta/threshold). Cheap maps
// (relu, abs, clip, ...) stay on our loops: they are memory-bound and
// vectorise, and our NaN handling is specified.
bool onednn_algorithm(const ew::State& s, dnnl::algorithm* alg, float* alpha) {
  *alpha = 0;
  switch (s.info->op) {
    case ew::Op::kExp: *alg = dnnl::algorithm::eltwise_exp; return true;
    case ew::Op::kTanh: *alg = dnnl::algorithm::eltwise_tanh; return true;
    case ew::Op::kSqrt: *alg = dnnl::algorithm::eltwise_sqrt; return true;
    case ew::Op::kSigmoid: *alg = dnnl::algorithm::eltwise_logistic; return true;
    case ew::Op::kSilu: *alg = dnnl::algorithm::eltwise_swish; *alpha = 1; return true;
    case ew::Op::kGelu:
      *alg = s.prm.gelu_tanh ? dnnl::algorithm::eltwise_gelu_tanh : dnnl::algorithm::eltwise_gelu_erf;
      return true;
    default: return false;
  }
}

bool plan_onednn(KernelPlan& p, State& s) {
  const int32_t dt = p.out[0].dtype;
  if (dt != SPORA_DTYPE_F32 && dt != SPORA_DTYPE_BF16) return false;
  if (s.ew.numel < kOnednnMinElements) return false;
  dnnl::algorithm alg;
  float alpha;
  if (!onednn_algorithm(s.ew, &alg, &alpha)) return false;
  dnnl::memory::data_type odt;
  if (!onednn_dtype(dt, &odt)) return false;
  try {
    s.md = dnnl::memory::desc({s.ew.numel}, odt, dnnl::memory::format_tag::a);
    dnnl::eltwise_forward::primitive_desc pd(
        dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, alg, s.md, alpha, 0.f), onednn_engine());
    // A reference implementation would be slower than our loops.
    if (std::string(pd.impl_info_str()).find("ref") != std::string::npos) return false;
    s.prim = dnnl::eltwise_forward(pd);
  } catch (const dnnl::error&) {
    return false;
  }
  return true;
}

spora_plugin_error_t* plan(KernelPlan& p) {
  if (auto* e = ew::plan(p)) return e;
  auto s = std::make_shared<State>();
  s->ew = p.get<ew::State>();
  s->f32 = s->ew;
  s->grain = std::max<int64_t>(1024, kParallelGrain / s->ew.info->cost);
  if (plan_onednn(p, *s)) {
    p.impl = "onednn";
    p.run = run_onednn;
  } else if (plan_half(p, *s)) {
    p.run = run_loops<true>;
  } else {
    p.run = run_loops<false>;
  }
  p.state = s;
  return nullptr;
}

void register_kernels(plugin::KernelTable& t) {
  for (int i = 0; i < ew::kNumOps; ++i) t.add({ew::kOps[i].name, "cpu", plan});
}
SPORA_CPU_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::cpu
