// Elementwise fusion on a device (cpu by default): chains of elementwise ops
// as compiled graphs, unoptimized (one kernel per op, intermediates in the arena) vs optimized
// at level 2 (the elementwise_fusion pass: one fused_elementwise kernel, one
// pass over memory). On cpu each chain ends in a sum (see bench()). Prints the best
// time per run of each, the speedup and the fused run's effective bandwidth
// (bytes of the chain's inputs and result).
//
//   bench_fusion [elements [filter [device]]]   (default 1M elements; filter: a
//                 substring of "name dtype", "" for all; device: cpu (default),
//                 cuda, ...; SPORA_NUM_THREADS as usual). On cuda the fused
//                 region is one NVRTC-compiled kernel (plugins/cuda/gpu_fused.cpp).
//                 A device that is not there prints "no device: why" and exits 0.
#include <spora/spora.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

bool ok(spora_status_t s, const char* what) {
  if (s != SPORA_OK) std::fprintf(stderr, "%s: %s\n", what, spora_last_error());
  return s == SPORA_OK;
}

struct G {
  spora_graph_t* g = nullptr;
  spora_device_t* dev = nullptr;
  spora_dtype_t dt = SPORA_DTYPE_F32;
  std::vector<spora_tensor_t*> params;
  std::mt19937 rng{0};

  spora_value_t op(const char* name, std::vector<spora_value_t> in) {
    spora_value_t out[4];
    size_t n = 0;
    if (!ok(spora_graph_add_op(g, name, in.data(), in.size(), nullptr, "fusion_bench.cpp", __LINE__, out, 4, &n), name))
      std::exit(1);
    return out[0];
  }
  // An input bound to random data (converted by a cast graph-side for 16-bit dtypes).
  spora_value_t input(const char* name, const std::vector<int64_t>& shape) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    std::normal_distribution<float> nd(0, 2);
    std::vector<float> v(n);
    for (auto& x : v) x = nd(rng);
    spora_tensor_t *t32, *t;
    ok(spora_tensor_create(dev, SPORA_DTYPE_F32, shape.data(), static_cast<int32_t>(shape.size()), v.data(), n * 4, &t32),
       "tensor");
    if (dt == SPORA_DTYPE_F32) {
      t = t32;
    } else {
      spora_attrs_t* a;
      spora_attrs_create(&a);
      spora_attrs_set_string(a, "dtype", spora_dtype_name(dt));
      ok(spora_op_call("cast", dev, &t32, 1, a, &t, 1), "cast");
      spora_attrs_free(a);
      spora_tensor_free(t32);
    }
    params.push_back(t);
    spora_value_t val;
    ok(spora_graph_add_input(g, name, dt, shape.data(), static_cast<int32_t>(shape.size()), &val), name);
    return val;
  }
  spora_value_t scalar(float v) {
    spora_tensor_t *t32, *t;
    ok(spora_tensor_create(dev, SPORA_DTYPE_F32, nullptr, 0, &v, 4, &t32), "scalar");
    if (dt == SPORA_DTYPE_F32) {
      t = t32;
    } else {
      spora_attrs_t* a;
      spora_attrs_create(&a);
      spora_attrs_set_string(a, "dtype", spora_dtype_name(dt));
      ok(spora_op_call("cast", dev, &t32, 1, a, &t, 1), "cast");
      spora_attrs_free(a);
      spora_tensor_free(t32);
    }
    spora_value_t c;
    ok(spora_graph_add_constant(g, t, &c), "constant");
    spora_tensor_free(t);
    return c;
  }
};

// Seconds per run of each executable: runs alternate between them (the
// machine is shared, so both see the same load) and the fastest sample of
// each is kept.
std::vector<double> time_runs(spora_device_t* dev, const std::vector<spora_executable_t*>& exes,
                              const std::vector<spora_tensor_t*>& params) {
  auto batch = [&](spora_executable_t* exe, int iters) {
    const auto s = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) {
      spora_tensor_t* out = nullptr;
      if (!ok(spora_executable_run(exe, params.data(), params.size(), &out, 1), "run")) std::exit(1);
      spora_tensor_free(out);
    }
    // Runs are queued asynchronously on a GPU: the time is until they finish.
    if (!ok(spora_device_synchronize(dev), "synchronize")) std::exit(1);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - s).count() / iters;
  };
  std::vector<int> iters;
  for (auto* e : exes) {
    batch(e, 3);  // warm up
    iters.push_back(std::max(1, static_cast<int>(0.02 / std::max(batch(e, 1), 1e-7))));  // ~20 ms per sample
  }
  std::vector<double> best(exes.size(), 1e30);
  for (int r = 0; r < 15; ++r)
    for (size_t k = 0; k < exes.size(); ++k) best[k] = std::min(best[k], batch(exes[k], iters[k]));
  return best;
}

const char* g_filter = nullptr;  // only benches whose name contains it
bool g_sum = true;               // end each chain in a sum (cpu; see bench())

void bench(const char* name, spora_device_t* dev, spora_dtype_t dt, int64_t n,
           const std::function<spora_value_t(G&)>& build) {
  if (g_filter && !std::strstr((std::string(name) + " " + spora_dtype_name(dt)).c_str(), g_filter)) return;
  G b;
  b.dev = dev;
  b.dt = dt;
  spora_graph_create(name, &b.g);
  // On cpu the chain's result feeds a sum: a run's only output is a scalar,
  // so no run pays page faults for a fresh output tensor (the chain's result
  // is an arena buffer, touched once at compile time), and both graphs pay
  // the same sum. A GPU's fresh output costs no page faults, and the sum
  // dominated the time there (an H100, 16M elements: ~37 ms per run, fused
  // or not, the chains differing by at most 1.3 ms), so on any other device
  // the chain is the output.
  const spora_value_t chain = build(b);
  const spora_value_t y = g_sum ? b.op("sum", {chain}) : chain;
  ok(spora_graph_set_outputs(b.g, &y, 1), "outputs");
  const char* json;
  spora_graph_to_json(b.g, &json);
  const std::string text(json);
  spora_graph_t* fused;
  ok(spora_graph_from_json(text.data(), text.size(), &fused), "copy");
  ok(spora_graph_optimize(fused, 2), "optimize");
  spora_executable_t *e0, *e1;
  if (!ok(spora_graph_compile(b.g, dev, &e0), "compile") || !ok(spora_graph_compile(fused, dev, &e1), "compile"))
    std::exit(1);
  const std::vector<double> t = time_runs(dev, {e0, e1}, b.params);
  const double t0 = t[0], t1 = t[1];
  const double bytes = static_cast<double>(n) * (static_cast<double>(b.params.size()) + 1) *
                       static_cast<double>(spora_dtype_size(dt));
  std::printf("  %-34s %-4s unfused %8.1f us   fused %8.1f us   %5.2fx   fused %6.1f GB/s\n", name,
              spora_dtype_name(dt), t0 * 1e6, t1 * 1e6, t0 / t1, bytes / t1 / 1e9);
  spora_executable_free(e0);
  spora_executable_free(e1);
  spora_graph_free(fused);
  spora_graph_free(b.g);
  for (auto* t : b.params) spora_tensor_free(t);
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : (1 << 20);
  if (argc > 2 && argv[2][0]) g_filter = argv[2];
  const char* device = argc > 3 ? argv[3] : "cpu";
  g_sum = std::strcmp(device, "cpu") == 0;
  spora_context_t* ctx;
  spora_device_t* dev;
  if (!ok(spora_context_create(&ctx), "ctx")) return 1;
  if (spora_device_find(ctx, device, &dev) != SPORA_OK) {
    std::printf("no device: %s: %s\n", device, spora_last_error());
    spora_context_free(ctx);
    return 0;
  }
  std::printf("elementwise chains on %s, %lld elements, compiled: unoptimized vs level 2 (fused)\n", device,
              static_cast<long long>(n));
  const std::vector<int64_t> shape = {n};
  for (spora_dtype_t dt : {SPORA_DTYPE_F32, SPORA_DTYPE_BF16, SPORA_DTYPE_F64}) {
    bench("sigmoid(x)*x+1", dev, dt, n, [&](G& b) {
      const spora_value_t x = b.input("x", shape);
      return b.op("add", {b.op("mul", {b.op("sigmoid", {x}), x}), b.scalar(1)});
    });
    bench("where(x>0, dy, 0)  (relu backward)", dev, dt, n, [&](G& b) {
      const spora_value_t x = b.input("x", shape), dy = b.input("dy", shape);
      const spora_value_t zero = b.scalar(0);
      return b.op("where", {b.op("greater", {x, zero}), dy, zero});
    });
    bench("w - lr*(mu*m + g)  (momentum step)", dev, dt, n, [&](G& b) {
      const spora_value_t w = b.input("w", shape), m = b.input("m", shape), g = b.input("g", shape);
      const spora_value_t v = b.op("add", {b.op("mul", {m, b.scalar(0.9f)}), g});
      return b.op("sub", {w, b.op("mul", {v, b.scalar(0.01f)})});
    });
    bench("0.5x(1+tanh(0.8(x+0.04x^3)))", dev, dt, n, [&](G& b) {
      const spora_value_t x = b.input("x", shape);
      const spora_value_t x3 = b.op("mul", {b.op("mul", {x, x}), x});
      const spora_value_t u = b.op("mul", {b.op("add", {x, b.op("mul", {x3, b.scalar(0.044715f)})}), b.scalar(0.79788456f)});
      const spora_value_t t = b.op("add", {b.op("tanh", {u}), b.scalar(1)});
      return b.op("mul", {b.op("mul", {x, t}), b.scalar(0.5f)});
    });
  }
  spora_context_free(ctx);
  return 0;
}
