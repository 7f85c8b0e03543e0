// Spora's cpu kernels vs the same oneDNN primitive called directly, in one
// process: matmul 256..2048 (square, f32) and conv2d 3x3 (N32, C64->64,
// 56x56, pad 1). Prints GFLOP/s, the ratio to raw oneDNN (goal >= 0.95) and
// the fraction of the FMA peak measured here (goal >= 0.90 for 1024 and up).
//
// `bench_op_speed DEVICE` (e.g. cuda) instead times the bandwidth-bound
// kernels there, eagerly: add 2^26 f32, softmax 8192x8192 f32, sum 2^26
// f32, layer_norm [8192, 1024] f32, in GB/s (bytes read + written). A
// device that is not there prints "no device: why" and exits 0.
#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>
#include <spora/spora.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <utility>
#include <vector>

#include "fma_peak.h"

namespace {

// Median seconds per call of `a` and of `b` over `reps` timed calls each,
// after a warm-up, the two alternating call by call: on a shared machine a
// burst of other work then slows both alike instead of whichever ran during
// it.
std::pair<double, double> paired_median_seconds(const std::function<void()>& a, const std::function<void()>& b,
                                                int reps) {
  a();
  b();
  std::vector<double> ta, tb;
  auto time = [](const std::function<void()>& fn) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  for (int i = 0; i < reps; ++i) {
    ta.push_back(time(a));
    tb.push_back(time(b));
  }
  std::sort(ta.begin(), ta.end());
  std::sort(tb.begin(), tb.end());
  return {ta[ta.size() / 2], tb[tb.size() / 2]};
}

// The instruction set oneDNN's kernels use here (ONEDNN_MAX_CPU_ISA can
// lower it), printed beside every figure.
const char* onednn_isa() {
  using isa = dnnl::cpu_isa;
  switch (dnnl::get_effective_cpu_isa()) {
    case isa::avx512_core_amx: return "AVX-512 + AMX";
    case isa::avx512_core_bf16: return "AVX-512 + bf16";
    case isa::avx512_core_vnni: return "AVX-512 (VNNI)";
    case isa::avx512_core: return "AVX-512";
    case isa::avx2_vnni: return "AVX2 (VNNI)";
    case isa::avx2: return "AVX2";
    case isa::avx: return "AVX";
    case isa::sse41: return "SSE4.1";
    default: return "other";
  }
}

std::vector<float> random_vec(size_t n) {
  std::mt19937 g(42);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (auto& x : v) x = u(g);
  return v;
}

bool ok(spora_status_t s, const char* what) {
  if (s != SPORA_OK) std::fprintf(stderr, "%s: %s\n", what, spora_last_error());
  return s == SPORA_OK;
}

struct Row {
  const char* name;
  double flops, spora_s, onednn_s;
};

void print(const Row& r, double peak) {
  const double gs = r.flops / r.spora_s / 1e9, go = r.flops / r.onednn_s / 1e9;
  std::printf("  %-34s %9.1f %9.1f %7.3f %8.1f%%\n", r.name, gs, go, r.onednn_s / r.spora_s, 100 * gs / peak);
}

// Eager calls of `op` on `in` until about 0.2 s have passed (after a
// warm-up), the device synchronized before the clock stops; the best of 5
// such samples, in seconds per call.
double device_seconds(spora_device_t* dev, const char* op, std::vector<spora_tensor_t*> in, const spora_attrs_t* attrs,
                      size_t outputs) {
  auto batch = [&](int iters) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) {
      std::vector<spora_tensor_t*> out(outputs, nullptr);
      if (!ok(spora_op_call(op, nullptr, in.data(), in.size(), attrs, out.data(), outputs), op)) std::exit(1);
      for (auto* t : out) spora_tensor_free(t);
    }
    if (!ok(spora_device_synchronize(dev), "synchronize")) std::exit(1);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
  };
  batch(3);
  const int iters = std::max(1, static_cast<int>(0.2 / std::max(batch(1), 1e-7)));
  double best = 1e30;
  for (int r = 0; r < 5; ++r) best = std::min(best, batch(iters));
  return best;
}

int device_rows(const char* device) {
  spora_context_t* ctx;
  spora_device_t* dev;
  if (!ok(spora_context_create(&ctx), "context")) return 1;
  if (spora_device_find(ctx, device, &dev) != SPORA_OK) {
    std::printf("no device: %s: %s\n", device, spora_last_error());
    spora_context_free(ctx);
    return 0;
  }
  auto tensor = [&](std::vector<int64_t> shape) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    const auto v = random_vec(n);
    spora_tensor_t* t = nullptr;
    if (!ok(spora_tensor_create(dev, SPORA_DTYPE_F32, shape.data(), shape.size(), v.data(), n * 4, &t), "tensor"))
      std::exit(1);
    return t;
  };
  std::printf("bandwidth-bound kernels on %s, eager calls (GB/s: bytes read + written per second)\n", device);
  auto row = [](const char* name, double bytes, double s) {
    std::printf("  %-34s %9.1f GB/s %10.1f us\n", name, bytes / s / 1e9, s * 1e6);
  };
  const int64_t n = int64_t{1} << 26;
  {
    spora_tensor_t *a = tensor({n}), *b = tensor({n});
    row("add 2^26 f32", 3.0 * 4 * n, device_seconds(dev, "add", {a, b}, nullptr, 1));
    row("sum 2^26 f32", 4.0 * n, device_seconds(dev, "sum", {a}, nullptr, 1));
    spora_tensor_free(a);
    spora_tensor_free(b);
  }
  {
    spora_tensor_t* x = tensor({8192, 8192});
    spora_attrs_t* attrs;
    spora_attrs_create(&attrs);
    spora_attrs_set_int(attrs, "axis", 1);
    row("softmax 8192x8192 f32", 2.0 * 4 * 8192 * 8192, device_seconds(dev, "softmax", {x}, attrs, 1));
    spora_attrs_free(attrs);
    spora_tensor_free(x);
  }
  {
    spora_tensor_t *x = tensor({8192, 1024}), *g = tensor({1024}), *b = tensor({1024});
    row("layer_norm [8192, 1024] f32", 2.0 * 4 * 8192 * 1024, device_seconds(dev, "layer_norm", {x, g, b}, nullptr, 3));
    spora_tensor_free(x);
    spora_tensor_free(g);
    spora_tensor_free(b);
  }
  spora_context_free(ctx);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "cpu") != 0) return device_rows(argv[1]);
  const double peak = measure_fma_peak_gflops();
  std::printf("oneDNN ISA: %s; fp32 FMA peak on %d thread(s): %.1f GFLOP/s (measured)\n\n", onednn_isa(),
              omp_get_max_threads(), peak);
  std::printf("  %-34s %9s %9s %7s %9s\n", "case", "spora", "oneDNN", "ratio", "of peak");

  spora_context_t* ctx;
  spora_device_t* cpu;
  if (!ok(spora_context_create(&ctx), "context") || !ok(spora_device_find(ctx, "cpu", &cpu), "cpu")) return 1;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;

  for (int64_t n : {256, 512, 1024, 2048}) {
    const auto va = random_vec(n * n), vb = random_vec(n * n);
    const int64_t shape[2] = {n, n};
    spora_tensor_t *a, *b;
    if (!ok(spora_tensor_create(cpu, SPORA_DTYPE_F32, shape, 2, va.data(), va.size() * 4, &a), "a") ||
        !ok(spora_tensor_create(cpu, SPORA_DTYPE_F32, shape, 2, vb.data(), vb.size() * 4, &b), "b"))
      return 1;
    spora_tensor_t* in[2] = {a, b};
    const int reps = n >= 2048 ? 5 : n >= 1024 ? 15 : 41;
    // Anchor: the same primitive, plain layouts, output buffer reused.
    dnnl::memory::desc md({n, n}, dt::f32, tag::ab);
    dnnl::matmul mm(dnnl::matmul::primitive_desc(dnnl::matmul::desc(md, md, md), eng));
    std::vector<float> vy(n * n);
    dnnl::memory ma(md, eng, const_cast<float*>(va.data())), mb(md, eng, const_cast<float*>(vb.data())),
        my(md, eng, vy.data());
    const auto [ts, to] = paired_median_seconds(
        [&] {
          spora_tensor_t* y = nullptr;
          ok(spora_op_call("matmul", nullptr, in, 2, nullptr, &y, 1), "matmul");
          spora_tensor_free(y);
        },
        [&] {
          mm.execute(strm, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, my}});
          strm.wait();
        },
        reps);
    char name[64];
    std::snprintf(name, sizeof name, "matmul %lldx%lld f32", static_cast<long long>(n), static_cast<long long>(n));
    print({name, 2.0 * n * n * n, ts, to}, peak);
    spora_tensor_free(a);
    spora_tensor_free(b);
  }

  // conv2d 3x3, N32 C64->64 56x56, stride 1, pad 1 (a ResNet stage-1 layer).
  {
    const int64_t N = 32, C = 64, O = 64, H = 56, W = 56;
    const auto vx = random_vec(N * C * H * W), vw = random_vec(O * C * 9);
    const int64_t xs[4] = {N, C, H, W}, ws[4] = {O, C, 3, 3};
    spora_tensor_t *x, *w;
    if (!ok(spora_tensor_create(cpu, SPORA_DTYPE_F32, xs, 4, vx.data(), vx.size() * 4, &x), "x") ||
        !ok(spora_tensor_create(cpu, SPORA_DTYPE_F32, ws, 4, vw.data(), vw.size() * 4, &w), "w"))
      return 1;
    spora_attrs_t* attrs;
    spora_attrs_create(&attrs);
    const int64_t pad[2] = {1, 1};
    spora_attrs_set_ints(attrs, "padding", pad, 2);
    spora_tensor_t* in[2] = {x, w};
    bool have_conv = true;
    // Anchor: oneDNN picks its layouts; NCHW in and out, reorders included,
    // as a framework with NCHW tensors must do.
    dnnl::memory::desc x_md({N, C, H, W}, dt::f32, tag::nchw), w_md({O, C, 3, 3}, dt::f32, tag::oihw),
        y_md({N, O, H, W}, dt::f32, tag::nchw);
    dnnl::memory::desc xa({N, C, H, W}, dt::f32, tag::any), wa({O, C, 3, 3}, dt::f32, tag::any),
        ya({N, O, H, W}, dt::f32, tag::any);
    dnnl::convolution_forward::primitive_desc pd(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, xa, wa,
                                        ya, {1, 1}, {1, 1}, {1, 1}),
        eng);
    dnnl::convolution_forward conv(pd);
    std::vector<float> vy(N * O * H * W);
    dnnl::memory mx(x_md, eng, const_cast<float*>(vx.data())), mw(w_md, eng, const_cast<float*>(vw.data())),
        my(y_md, eng, vy.data());
    dnnl::memory cx(pd.src_desc(), eng), cw(pd.weights_desc(), eng), cy(pd.dst_desc(), eng);
    dnnl::reorder(mw, cw).execute(strm, mw, cw);  // weights reordered once, like a cached plan
    const auto [ts, to] = paired_median_seconds(
        [&] {
          spora_tensor_t* y = nullptr;
          if (have_conv && !ok(spora_op_call("conv2d", nullptr, in, 2, attrs, &y, 1), "conv2d")) have_conv = false;
          spora_tensor_free(y);
        },
        [&] {
          dnnl::reorder(mx, cx).execute(strm, mx, cx);
          conv.execute(strm, {{DNNL_ARG_SRC, cx}, {DNNL_ARG_WEIGHTS, cw}, {DNNL_ARG_DST, cy}});
          dnnl::reorder(cy, my).execute(strm, cy, my);
          strm.wait();
        },
        10);
    const double flops = 2.0 * N * O * H * W * C * 9;
    if (have_conv) {
      print({"conv2d 3x3 N32 C64->64 56x56 f32", flops, ts, to}, peak);
    } else {
      std::printf("  %-34s %9s %9.1f   (conv2d not available in this build)\n", "conv2d 3x3 N32 C64->64 56x56", "-",
                  flops / to / 1e9);
    }
    spora_attrs_free(attrs);
    spora_tensor_free(x);
    spora_tensor_free(w);
  }
  spora_context_free(ctx);
  return 0;
}
