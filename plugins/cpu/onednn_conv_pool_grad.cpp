// conv2d_act_pool_grad on the cpu (core/src/ops/conv_pool_grad.cpp), f32:
// the backward pass of a convolution with a relu and a max pooling in one
// kernel. One pass over the activation a and the pooled gradient dy writes
// g = relu'(a) * max_pool2d_grad(a, dy) straight into the channel-blocked
// layout (nChw16c on AVX-512, nChw8c on AVX2) the backward convolutions
// were made for, in the kernel's workspace; oneDNN's backward-weights
// primitive then reads it for the weight and bias gradients and the
// backward-data one for the input's (through one reorder in the rare case
// that the two took different layouts). Unfused the same work was
// max_pool2d_grad, greater and where over NCHW (three passes), sum for the
// bias, and each convolution gradient reordering g into blocks again
// (0.5 ms per reorder of the main job's LeNet b64 first activation here).
//
// With 2x2 windows the pass runs a block's channels at once, one per
// vector lane (AVX-512 for 16, AVX2 for 8): the window's taps are gathers
// from the block's NCHW planes, and g's elements are whole vectors of the
// blocked layout. ~0.6 ms for the main job's first layer (64 x 32 x 28 x
// 28) on AVX-512, where the scalar loop took ~5 ms; other windows take
// the scalar loop.
//
// g follows the decomposition bit for bit: each window's first maximum in
// row-major order gets 0 + dy (a NaN wins, the first one), and then only
// where a > 0 (relu); every other element, rows and columns past the last
// whole window and the channels padding the last block are 0. Only
// disjoint windows (kernel == stride, no padding or dilation, no ceil_mode
// overhang: LeNet's 2x2/2) take this path; other windows, bf16 and
// convolutions whose blocked layouts have only a reference or gemm
// backward kernel are UNIMPLEMENTED, and the host runs the decomposition.
// Only oneDNN's first implementation for each layout is looked at (see
// onednn_conv_pool.cpp: stepping on crashed oneDNN 2.6.3 under
// ONEDNN_MAX_CPU_ISA=AVX2).
//
// blocked_inputs / blocked_outputs (the blocked_handoff pass): a (input 2)
// arrives in onednn_kept_activation.h's blocked layout, not NCHW; the
// gathers then read a block's channels from there (the same taps, other
// strides), and the forward kernel's reorder of a to NCHW is gone. dy
// (input 3) likewise from the next layer's kernel; x (input 0) and dx
// (output 2) are the backward convolutions' operands in that layout. With
// any of them the plan fails rather than decline (the decomposition would
// read them as NCHW).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>
#include <vector>

#include "cpu_kernels.h"
#include "cpu_parallel.h"
#include "cpu_state.h"
#include "onednn_conv_desc.h"
#include "onednn_kept_activation.h"
#include "onednn_operand.h"
#include "onednn_plan.h"

namespace spora::cpu {
namespace {

using dnnl::memory;
using plugin::KernelPlan;
using plugin::Shape;
using tag = memory::format_tag;

// Which of the vector paths of build_g a plan takes (2x2 windows, the
// cpu has the instructions, the indices fit a gather's 32 bits).
enum class Simd { kNone, kAvx2, kAvx512 };

// The activation's geometry and g's blocked layout (in elements).
struct Blocks {
  int64_t n, c, h, w, ph, pw, kh, kw;
  int64_t cb;                  // channels per block
  int64_t blocks;              // ceil(c / cb)
  int64_t s_n, s_blk, s_h;     // strides of g; a channel's step is 1, w's cb
  bool relu;
  Simd simd;
  // a's layout: NCHW (a_cb 0) or, blocked (input 2), nChw{a_cb}c as
  // conv2d_act_pool wrote it (a_cb need not be cb). a_sw: a's step along w.
  int64_t a_cb, a_sw;
  // dy's layout the same way: NCHW (d_cb 0) or, with blocked_inputs
  // naming 3, nChw{d_cb}c as the next layer's kernel wrote it; d_sw: dy's
  // step along a pooled row.
  int64_t d_cb, d_sw;
  // Channel c's offset in an image of a, of dy.
  int64_t a_channel(int64_t c) const { return a_cb ? (c / a_cb) * a_cb * h * w + c % a_cb : c * h * w; }
  int64_t d_channel(int64_t c) const { return d_cb ? (c / d_cb) * d_cb * ph * pw + c % d_cb : c * ph * pw; }
};

struct State {
  Blocks b;
  WorkspaceSlot g;
  dnnl::convolution_backward_weights weights;
  std::vector<ReorderedOperand> weight_ops;  // x in, dw and db out
  WorkspaceSlot weights_scratch;
  bool input_grad = false;
  // g in the backward-data primitive's layout when it differs: one reorder.
  bool regrouped = false;
  dnnl::reorder regroup;
  WorkspaceSlot g_data;
  dnnl::convolution_backward_data data;
  std::vector<ReorderedOperand> data_ops;  // w in, dx out
  WorkspaceSlot data_scratch;
};

// The first maximum of a window in row-major order, a NaN winning (the
// first one): the reference's and oneDNN's choice. Returns its (i, j).
inline void window_argmax(const Blocks& b, const float* a, int64_t* bi, int64_t* bj) {
  float bv = a[0];
  *bi = *bj = 0;
  if (std::isnan(bv)) return;
  for (int64_t i = 0; i < b.kh; ++i)
    for (int64_t j = 0; j < b.kw; ++j) {
      const float v = a[(i * b.w + j) * b.a_sw];
      if (std::isnan(v)) {
        *bi = i, *bj = j;
        return;
      }
      if (v > bv) *bi = i, *bj = j, bv = v;
    }
}

// Window (r, q) of one channel, any window shape: a and dy point at the
// channel's first element, g at its lane of the block (w step cb).
void window_any(const Blocks& b, const float* a, const float* dy, float* g, int64_t r, int64_t q) {
  const float* w0 = a + (r * b.kh * b.w + q * b.kw) * b.a_sw;
  int64_t bi, bj;
  window_argmax(b, w0, &bi, &bj);
  const float at = w0[(bi * b.w + bj) * b.a_sw];
  const float val = (!b.relu || at > 0.0f) ? 0.0f + dy[(r * b.pw + q) * b.d_sw] : 0.0f;
  float* g0 = g + r * b.kh * b.s_h + q * b.kw * b.cb;
  for (int64_t i = 0; i < b.kh; ++i)
    for (int64_t j = 0; j < b.kw; ++j) g0[i * b.s_h + j * b.cb] = (i == bi && j == bj) ? val : 0.0f;
}

// Columns past the last whole window of pooled row r, one lane.
void cut_columns(const Blocks& b, float* g, int64_t r) {
  for (int64_t i = 0; i < b.kh; ++i)
    for (int64_t x = b.pw * b.kw; x < b.w; ++x) g[(r * b.kh + i) * b.s_h + x * b.cb] = 0.0f;
}

// A block's lanes: lane k's channel in a and in dy, as offsets from the
// block's first channel (0 past the real channels).
struct Lanes {
  int32_t a[16] = {}, dy[16] = {};
};

// The general path for `real` channels of a block: one window and one lane
// at a time.
void block_any(const Blocks& b, const float* a, const Lanes& off, const float* dy, float* g, int64_t real) {
  for (int64_t r = 0; r < b.ph; ++r)
    for (int64_t k = 0; k < real; ++k) {
      for (int64_t q = 0; q < b.pw; ++q) window_any(b, a + off.a[k], dy + off.dy[k], g + k, r, q);
      cut_columns(b, g + k, r);
    }
}

// base + index[k] for the lanes in `lanes`, 0 in the others (masked gathers
// with a defined source: GCC 12 warns that the plain AVX-512 gather's
// undefined source "may be used uninitialized").
__attribute__((target("avx512f"))) inline __m512 gather(__mmask16 lanes, __m512i index, const float* base) {
  return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), lanes, index, base, 4);
}

// 2x2 windows over a block, all its channels at once: lane k of a vector
// is channel k, so a window's four taps are gathers of the block's
// channels from a (their NCHW planes, or a's own blocks with
// blocked input 2; lane offsets off.a) and g's elements are whole
// vectors of the blocked layout. The first maximum (a later tap wins only when strictly greater) and the relu
// mask are compares and masked moves; a window holding a NaN takes the
// general path, lane by lane. Lanes past the `real` channels of a last
// block gather nothing and store 0, the padding oneDNN expects.
__attribute__((target("avx512f"))) void block_2x2_avx512(const Blocks& b, const float* a, const Lanes& off,
                                                        const float* dy, float* g, int64_t real) {
  const __m512i ai = _mm512_loadu_si512(off.a);
  const int64_t sw = b.a_sw, sh = b.w * b.a_sw;
  const __m512i di = _mm512_loadu_si512(off.dy);
  const __m512 zero = _mm512_setzero_ps();
  const __mmask16 on = static_cast<__mmask16>((1u << real) - 1);
  for (int64_t r = 0; r < b.ph; ++r) {
    for (int64_t q = 0; q < b.pw; ++q) {
      const float* w0 = a + 2 * r * sh + 2 * q * sw;
      float* g0 = g + 2 * r * b.s_h + 2 * q * 16;
      const __m512 v0 = gather(on, ai, w0), v1 = gather(on, ai, w0 + sw);
      const __m512 v2 = gather(on, ai, w0 + sh), v3 = gather(on, ai, w0 + sh + sw);
      const __mmask16 nan = _mm512_cmp_ps_mask(v0, v0, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(v1, v1, _CMP_UNORD_Q) |
                            _mm512_cmp_ps_mask(v2, v2, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(v3, v3, _CMP_UNORD_Q);
      if (nan) {
        for (float* at : {g0, g0 + 16, g0 + b.s_h, g0 + b.s_h + 16}) _mm512_storeu_ps(at, zero);
        for (int64_t k = 0; k < real; ++k) window_any(b, a + off.a[k], dy + off.dy[k], g + k, r, q);
        continue;
      }
      const __mmask16 c1 = _mm512_cmp_ps_mask(v1, v0, _CMP_GT_OQ);
      __m512 m = _mm512_mask_blend_ps(c1, v0, v1);
      const __mmask16 c2 = _mm512_cmp_ps_mask(v2, m, _CMP_GT_OQ);
      m = _mm512_mask_blend_ps(c2, m, v2);
      const __mmask16 c3 = _mm512_cmp_ps_mask(v3, m, _CMP_GT_OQ);
      m = _mm512_mask_blend_ps(c3, m, v3);
      __m512 d = _mm512_add_ps(zero, gather(on, di, dy + (r * b.pw + q) * b.d_sw));
      if (b.relu) d = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(m, zero, _CMP_GT_OQ), d);
      const __mmask16 later = c2 | c3;
      _mm512_storeu_ps(g0, _mm512_maskz_mov_ps(static_cast<__mmask16>(~(c1 | later)), d));
      _mm512_storeu_ps(g0 + 16, _mm512_maskz_mov_ps(static_cast<__mmask16>(c1 & ~later), d));
      _mm512_storeu_ps(g0 + b.s_h, _mm512_maskz_mov_ps(static_cast<__mmask16>(c2 & ~c3), d));
      _mm512_storeu_ps(g0 + b.s_h + 16, _mm512_maskz_mov_ps(c3, d));
    }
    for (int64_t k = 0; k < 16; ++k) cut_columns(b, g + k, r);  // every lane: the padding too
  }
}

__attribute__((target("avx2"))) inline __m256 gather(__m256 lanes, __m256i index, const float* base) {
  return _mm256_mask_i32gather_ps(_mm256_setzero_ps(), base, index, lanes, 4);
}

// The same with 8 lanes (nChw8c) on AVX2: masks are vectors.
__attribute__((target("avx2"))) void block_2x2_avx2(const Blocks& b, const float* a, const Lanes& off,
                                                    const float* dy, float* g, int64_t real) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i ai = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(off.a));
  const int64_t sw = b.a_sw, sh = b.w * b.a_sw;
  const __m256i di = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(off.dy));
  const __m256 zero = _mm256_setzero_ps();
  const __m256 on = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(real)), lanes));
  for (int64_t r = 0; r < b.ph; ++r) {
    for (int64_t q = 0; q < b.pw; ++q) {
      const float* w0 = a + 2 * r * sh + 2 * q * sw;
      float* g0 = g + 2 * r * b.s_h + 2 * q * 8;
      const __m256 v0 = gather(on, ai, w0), v1 = gather(on, ai, w0 + sw);
      const __m256 v2 = gather(on, ai, w0 + sh), v3 = gather(on, ai, w0 + sh + sw);
      const __m256 nan01 = _mm256_or_ps(_mm256_cmp_ps(v0, v0, _CMP_UNORD_Q), _mm256_cmp_ps(v1, v1, _CMP_UNORD_Q));
      const __m256 nan23 = _mm256_or_ps(_mm256_cmp_ps(v2, v2, _CMP_UNORD_Q), _mm256_cmp_ps(v3, v3, _CMP_UNORD_Q));
      const __m256 nan = _mm256_or_ps(nan01, nan23);
      if (_mm256_movemask_ps(nan)) {
        for (float* at : {g0, g0 + 8, g0 + b.s_h, g0 + b.s_h + 8}) _mm256_storeu_ps(at, zero);
        for (int64_t k = 0; k < real; ++k) window_any(b, a + off.a[k], dy + off.dy[k], g + k, r, q);
        continue;
      }
      const __m256 c1 = _mm256_cmp_ps(v1, v0, _CMP_GT_OQ);
      __m256 m = _mm256_blendv_ps(v0, v1, c1);
      const __m256 c2 = _mm256_cmp_ps(v2, m, _CMP_GT_OQ);
      m = _mm256_blendv_ps(m, v2, c2);
      const __m256 c3 = _mm256_cmp_ps(v3, m, _CMP_GT_OQ);
      m = _mm256_blendv_ps(m, v3, c3);
      __m256 d = _mm256_add_ps(zero, gather(on, di, dy + (r * b.pw + q) * b.d_sw));
      if (b.relu) d = _mm256_and_ps(_mm256_cmp_ps(m, zero, _CMP_GT_OQ), d);
      const __m256 later = _mm256_or_ps(c2, c3);
      _mm256_storeu_ps(g0, _mm256_andnot_ps(_mm256_or_ps(c1, later), d));
      _mm256_storeu_ps(g0 + 8, _mm256_and_ps(_mm256_andnot_ps(later, c1), d));
      _mm256_storeu_ps(g0 + b.s_h, _mm256_and_ps(_mm256_andnot_ps(c3, c2), d));
      _mm256_storeu_ps(g0 + b.s_h + 8, _mm256_and_ps(c3, d));
    }
    for (int64_t k = 0; k < 8; ++k) cut_columns(b, g + k, r);
  }
}

// g for every image and channel block.
void build_g(const Blocks& b, const float* a, const float* dy, float* g) {
  const int64_t area = b.h * b.w, pooled = b.ph * b.pw;
  parallel_for(b.n * b.blocks, std::max<int64_t>(1, kParallelGrain / (b.cb * area)), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t n = t / b.blocks, blk = t % b.blocks;
      const int64_t real = std::min(b.cb, b.c - blk * b.cb);  // channels of this block that exist
      float* gb = g + n * b.s_n + blk * b.s_blk;
      // The block's first channel in a and each lane's offset from it
      // (0 past `real`: those lanes gather nothing).
      const int64_t c0 = blk * b.cb, first = b.a_channel(c0), dfirst = b.d_channel(c0);
      const float* ab = a + n * b.c * area + first;
      const float* db = dy + n * b.c * pooled + dfirst;
      Lanes off;
      for (int64_t k = 0; k < real; ++k) {
        off.a[k] = static_cast<int32_t>(b.a_channel(c0 + k) - first);
        off.dy[k] = static_cast<int32_t>(b.d_channel(c0 + k) - dfirst);
      }
      // The vector paths write every lane of the windows and cut-off
      // columns (0 past `real`); the general path only the real ones.
      const bool vector = b.simd != Simd::kNone;
      if (b.simd == Simd::kAvx512) block_2x2_avx512(b, ab, off, db, gb, real);
      else if (b.simd == Simd::kAvx2) block_2x2_avx2(b, ab, off, db, gb, real);
      else block_any(b, ab, off, db, gb, real);
      const int64_t lanes = vector ? b.cb : real;
      // Rows past the last whole window.
      for (int64_t y = b.ph * b.kh; y < b.h; ++y)
        for (int64_t x = 0; x < b.w; ++x)
          for (int64_t k = 0; k < lanes; ++k) gb[y * b.s_h + x * b.cb + k] = 0.0f;
      // Channels padding the last block: oneDNN reads them as zeros.
      if (!vector)
        for (int64_t p = 0; p < area; ++p)
          for (int64_t k = real; k < b.cb; ++k) gb[p * b.cb + k] = 0.0f;
    }
  });
}

void run(const KernelPlan& p, const void* const* in, void* const* out, void* workspace) {
  const State& s = p.get<State>();
  auto& eng = onednn_engine();
  dnnl::stream& strm = onednn_stream();
  memory g = s.g.memory(eng, workspace);
  build_g(s.b, static_cast<const float*>(in[2]), static_cast<const float*>(in[3]),
          static_cast<float*>(g.get_data_handle()));
  auto execute = [&](const dnnl::primitive& prim, const memory& diff_dst, const std::vector<ReorderedOperand>& ops,
                     const WorkspaceSlot& scratch) {
    std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, diff_dst}};
    std::vector<BoundOperand> bound;
    bound.reserve(ops.size());
    for (const ReorderedOperand& o : ops) {
      bound.push_back(bind_operand(o, strm, o.output ? out[o.index] : const_cast<void*>(in[o.index]), workspace));
      args.emplace(o.arg, bound.back().prim);
    }
    scratch.bind(args, DNNL_ARG_SCRATCHPAD, eng, workspace);
    prim.execute(strm, args);
    for (size_t i = 0; i < ops.size(); ++i) finish_operand(ops[i], strm, bound[i]);
  };
  execute(s.weights, g, s.weight_ops, s.weights_scratch);
  if (s.input_grad) {
    memory gd = g;
    if (s.regrouped) {
      gd = s.g_data.memory(eng, workspace);
      s.regroup.execute(strm, g, gd);
    }
    execute(s.data, gd, s.data_ops, s.data_scratch);
  }
  strm.wait();
}

// True for an implementation name the kernel will not build on: oneDNN's
// plain loops and its gemm-based convolutions (the unfused ops are as fast).
bool unwanted(const std::string& impl) { return slow_impl(impl) || impl.find("gemm") != std::string::npos; }

spora_plugin_error_t* plan_kernel(KernelPlan& p, bool blocked) {
  const bool input_grad = p.attrs.get_bool("input_grad", true);
  if (p.num_inputs != 4 || p.num_outputs != (input_grad ? 3 : 2)) return plugin::invalid(p, "wrong operand count");
  const int32_t dtype = p.out[0].dtype;
  if (dtype != SPORA_DTYPE_F32)
    return plugin::unsupported(p, std::string("f32 only, not ") + plugin::dtype_name(dtype));
  for (int i = 0; i < p.num_inputs; ++i) {
    if (p.in[i].dtype != dtype) return plugin::invalid(p, "operands differ in dtype");
    if (p.in[i].shape.numel() == 0) return plugin::unsupported(p, "empty operand");
  }
  const Shape &x = p.in[0].shape, &w = p.in[1].shape, &a = p.in[2].shape, &dy = p.in[3].shape;
  if (a.rank != 4 || dy.rank != 4 || dy.dims[0] != a.dims[0] || dy.dims[1] != a.dims[1])
    return plugin::invalid(p, "a and dy must be NCHW of one N and C");
  if (p.out[0].shape != w || (input_grad && p.out[2].shape != x) || p.out[1].shape.numel() != w.dims[0])
    return plugin::invalid(p, "outputs must have w's, [O]'s and x's shapes");
  const std::string act = p.attrs.get_string("activation", "relu");
  if (act != "relu" && act != "none") return plugin::invalid(p, "activation must be relu or none");
  // Disjoint windows only (see the top of the file).
  const auto k = p.attrs.get_ints("pool_kernel_size"), st = p.attrs.get_ints("pool_stride"),
             pad = p.attrs.get_ints("pool_padding"), dil = p.attrs.get_ints("pool_dilation");
  if (k.size() != 2 || st.size() != 2 || pad.size() != 4 || dil.size() != 2)
    return plugin::invalid(p, "expects canonical pool_* attributes");
  if (k != st || dil[0] != 1 || dil[1] != 1 || pad[0] || pad[1] || pad[2] || pad[3] || k[0] < 1 || k[1] < 1)
    return plugin::unsupported(p, "pooling windows overlap, are padded or dilated");
  if (dy.dims[2] != a.dims[2] / k[0] || dy.dims[3] != a.dims[3] / k[1])
    return plugin::unsupported(p, "pooling windows reach past the activation");
  memory::data_type dt;
  if (!onednn_dtype(dtype, &dt)) return plugin::unsupported(p, "no oneDNN data type");
  ConvDesc d;
  if (auto* e = conv_desc(p, x, w, a, dt, &d)) return e;

  return plan_guarded(p, [&]() -> spora_plugin_error_t* {
    auto& eng = onednn_engine();
    using alg = dnnl::algorithm;
    const dnnl::primitive_attr attr = user_scratchpad_attr();
    const memory::dims ad(a.dims, a.dims + 4);
    // g's layout: nChw16c where the AVX-512 jit kernels run, else nChw8c,
    // for each primitive the first where it is a jit kernel. g is built in
    // the backward-weights primitive's layout; when the backward-data one
    // took the other (LeNet-5's second layer on AVX-512: oneDNN 2.6.3 has
    // only ref for its weights on nChw16c), one reorder of g feeds it.
    // Only oneDNN's first choice per layout is taken (the note at the top).
    std::string skipped;
    auto hint = [&](const memory::desc& g_md) {
      return dnnl::convolution_forward::primitive_desc(
          dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, alg::convolution_direct, d.x_any,
                                          d.w_any, d.b_user, g_md, d.strides, d.dilates, d.pad_l, d.pad_r),
          attr, eng);
    };
    // The first layout whose primitive `make(g_md)` is a jit kernel reading
    // g in that layout; false when none is.
    auto pick = [&](const char* what, auto make, tag* chosen, auto* pd) {
      for (tag t : {tag::nChw16c, tag::nChw8c}) {
        const memory::desc g_md(ad, dt, t);
        try {
          auto cand = make(g_md);
          const std::string impl = cand.impl_info_str();
          if (!unwanted(impl) && cand.diff_dst_desc() == g_md) {
            *chosen = t;
            *pd = cand;
            return true;
          }
          skipped += std::string(what) + " on " + layout_name(t) + ": " + impl + "; ";
        } catch (const dnnl::error&) {
          skipped += std::string(what) + " on " + layout_name(t) + ": no implementation; ";
        }
      }
      return false;
    };
    tag tw = tag::undef, td = tag::undef;
    dnnl::convolution_backward_weights::primitive_desc wpd;
    dnnl::convolution_backward_data::primitive_desc dpd;
    const bool have_weights = pick(
        "weights",
        [&](const memory::desc& g_md) {
          return dnnl::convolution_backward_weights::primitive_desc(
              dnnl::convolution_backward_weights::desc(alg::convolution_direct, d.x_any, d.w_any, d.b_user, g_md,
                                                       d.strides, d.dilates, d.pad_l, d.pad_r),
              attr, eng, hint(g_md));
        },
        &tw, &wpd);
    const bool have_data = !input_grad || pick(
                                              "data",
                                              [&](const memory::desc& g_md) {
                                                return dnnl::convolution_backward_data::primitive_desc(
                                                    dnnl::convolution_backward_data::desc(
                                                        alg::convolution_direct, d.x_any, d.w_any, g_md, d.strides,
                                                        d.dilates, d.pad_l, d.pad_r),
                                                    attr, eng, hint(g_md));
                                              },
                                              &td, &dpd);
    if (!have_weights || !have_data)
      return plugin::unsupported(p, "no jit backward convolution on a blocked gradient (" + skipped + ")");
    const memory::desc g_md(ad, dt, tw);
    auto s = std::make_shared<State>();
    const int64_t cb = tw == tag::nChw16c ? 16 : 8, blocks = (a.dims[1] + cb - 1) / cb;
    s->b = Blocks{a.dims[0], a.dims[1], a.dims[2], a.dims[3], dy.dims[2], dy.dims[3], k[0], k[1],
                  cb, blocks, blocks * cb * a.dims[2] * a.dims[3], cb * a.dims[2] * a.dims[3],
                  cb * a.dims[3], act == "relu", Simd::kNone, 0, 1, 0, 1};
    if (blocked) {
      // a as conv2d_act_pool wrote it (onednn_kept_activation.h).
      if (kept_activation_desc(ad, dt).get_size() != static_cast<size_t>(a.numel()) * sizeof(float))
        return plugin::invalid(p, "a blocked activation needs channels filling whole blocks, got " + a.str());
      s->b.a_cb = s->b.a_sw = kept_activation_block();
    }
    if (blocked_port(p, "blocked_inputs", 3)) {
      // dy as the next layer's kernel wrote it (blocked_handoff).
      memory::desc dy_md;
      if (auto* e = blocked_operand(p, "dy", memory::dims(dy.dims, dy.dims + 4), dt, &dy_md)) return e;
      s->b.d_cb = s->b.d_sw = kept_activation_block();
    }
    // blocked_handoff: x arrives, dx leaves in the plugin's blocked layout.
    memory::desc x_user = d.x_user;
    if (blocked_port(p, "blocked_inputs", 0))
      if (auto* e = blocked_operand(p, "x", d.x_user.dims(), dt, &x_user)) return e;
    memory::desc dx_user = d.x_user;
    if (input_grad && blocked_port(p, "blocked_outputs", 2))
      if (auto* e = blocked_operand(p, "dx", d.x_user.dims(), dt, &dx_user)) return e;
    const bool fits = a.dims[2] * a.dims[3] * cb < (int64_t{1} << 31);
    if (k[0] == 2 && k[1] == 2 && fits) {
      if (cb == 16 && __builtin_cpu_supports("avx512f")) s->b.simd = Simd::kAvx512;
      else if (cb == 8 && __builtin_cpu_supports("avx2")) s->b.simd = Simd::kAvx2;
    }
    size_t ws = 0;
    s->g.place(ws, g_md);
    s->weight_ops.push_back(make_operand(ws, DNNL_ARG_SRC, 0, false, x_user, wpd.src_desc()));
    s->weight_ops.push_back(make_operand(ws, DNNL_ARG_DIFF_WEIGHTS, 0, true, d.w_user, wpd.diff_weights_desc()));
    s->weight_ops.push_back(make_operand(ws, DNNL_ARG_DIFF_BIAS, 1, true, d.b_user, wpd.diff_bias_desc()));
    s->weights_scratch.place(ws, wpd.scratchpad_desc());
    s->weights = dnnl::convolution_backward_weights(wpd);
    s->input_grad = input_grad;
    std::string impl = wpd.impl_info_str() + std::string(" on ") + layout_name(tw);
    if (input_grad) {
      if (td != tw) {
        const memory::desc gd_md(ad, dt, td);
        s->g_data.place(ws, gd_md);
        s->regroup = dnnl::reorder(dnnl::reorder::primitive_desc(eng, g_md, eng, gd_md));
        s->regrouped = true;
      }
      s->data_ops.push_back(make_operand(ws, DNNL_ARG_WEIGHTS, 1, false, d.w_user, dpd.weights_desc()));
      s->data_ops.push_back(make_operand(ws, DNNL_ARG_DIFF_SRC, 2, true, dx_user, dpd.diff_src_desc()));
      s->data_scratch.place(ws, dpd.scratchpad_desc());
      s->data = dnnl::convolution_backward_data(dpd);
      impl += std::string(" and ") + dpd.impl_info_str() + std::string(" on ") + layout_name(td);
    }
    log(SPORA_LOG_DEBUG, p.op + " " + x.str() + ": g built in " + layout_name(tw) + " from a in " +
                             (blocked ? (s->b.a_cb == 16 ? "nChw16c" : "nChw8c") : "nchw") + " for " + impl +
                             (s->b.d_cb ? ", dy handed in blocked" : "") +
                             (blocked_port(p, "blocked_inputs", 0) ? ", x handed in blocked" : "") +
                             (input_grad && blocked_port(p, "blocked_outputs", 2) ? ", dx handed on blocked" : "") +
                             (skipped.empty() ? "" : " (passed over: " + skipped + ")"));
    p.workspace = ws;
    p.state = s;
    p.run = run;
    return nullptr;
  });
}

spora_plugin_error_t* plan(KernelPlan& p) {
  return refuse_decomposition(p, plan_kernel(p, blocked_port(p, "blocked_inputs", 2)));
}

void register_kernels(plugin::KernelTable& t) { t.add({"conv2d_act_pool_grad", "onednn", plan}); }
SPORA_CPU_KERNELS(register_kernels);

}  // namespace
}  // namespace spora::cpu
