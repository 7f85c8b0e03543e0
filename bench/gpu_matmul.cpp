// matmul throughput on a GPU through the C API: 4096^2 in f32, bf16 and
// f16, 1024^2 in f32 (issue 14's GEMM rows), each timed as a run of eager
// calls writing into one output tensor, then a device synchronize.
// With "high" as the second argument, f32 also runs with
// spora_set_option("matmul_precision", "high") (TF32 allowed).
//
//   bench_gpu_matmul [device [high]]     device defaults to cuda:0
//
// Without the device it prints "no device: <why>" and exits 0.
#include <spora/spora.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

bool ok(spora_status_t s, const char* what) {
  if (s != SPORA_OK) std::fprintf(stderr, "%s: %s\n", what, spora_last_error());
  return s == SPORA_OK;
}

// a, b: n x n of `dtype` on the device (made in f32, then cast there).
bool make_operand(spora_device_t* dev, int64_t n, const char* dtype, unsigned seed, spora_tensor_t** out) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(static_cast<size_t>(n * n));
  for (float& x : v) x = u(g);
  const int64_t shape[2] = {n, n};
  spora_tensor_t* f32 = nullptr;
  if (!ok(spora_tensor_create(dev, SPORA_DTYPE_F32, shape, 2, v.data(), v.size() * sizeof(float), &f32), "tensor"))
    return false;
  if (std::strcmp(dtype, "f32") == 0) {
    *out = f32;
    return true;
  }
  spora_attrs_t* attrs = nullptr;
  spora_attrs_create(&attrs);
  spora_attrs_set_string(attrs, "dtype", dtype);
  const bool cast_ok = ok(spora_op_call("cast", dev, &f32, 1, attrs, out, 1), "cast");
  spora_attrs_free(attrs);
  spora_tensor_free(f32);
  return cast_ok;
}

// TFLOP/s of n x n x n matmuls in `dtype`, or a negative value on failure.
double tflops(spora_device_t* dev, int64_t n, const char* dtype, const char* precision) {
  spora_tensor_t *a = nullptr, *b = nullptr, *y = nullptr;
  if (!ok(spora_set_option("matmul_precision", precision ? precision : "highest"), "matmul_precision")) return -1;
  if (!make_operand(dev, n, dtype, 1, &a) || !make_operand(dev, n, dtype, 2, &b)) {
    spora_tensor_free(a);
    return -1;
  }
  spora_attrs_t* attrs = nullptr;  // matmul's defaults: no transposes
  spora_attrs_create(&attrs);
  spora_tensor_t* in[2] = {a, b};
  double result = -1;
  if (ok(spora_op_call("matmul", dev, in, 2, attrs, &y, 1), "matmul")) {
    // Warm-up (plans, algorithm choice, workspace), then enough calls for
    // about a second of device time at the expected speed.
    const int warm = 3, reps = n >= 4096 ? 50 : 400;
    bool good = true;
    for (int i = 0; i < warm && good; ++i) good = ok(spora_op_call_into("matmul", dev, in, 2, attrs, &y, 1), "matmul");
    good = good && ok(spora_device_synchronize(dev), "synchronize");
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps && good; ++i) good = ok(spora_op_call_into("matmul", dev, in, 2, attrs, &y, 1), "matmul");
    good = good && ok(spora_device_synchronize(dev), "synchronize");
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (good) result = 2.0 * static_cast<double>(n) * n * n * reps / s / 1e12;
  }
  spora_attrs_free(attrs);
  spora_tensor_free(y);
  spora_tensor_free(a);
  spora_tensor_free(b);
  spora_set_option("matmul_precision", "highest");
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string name = argc > 1 ? argv[1] : "cuda:0";
  const bool high = argc > 2 && std::strcmp(argv[2], "high") == 0;
  spora_context_t* ctx = nullptr;
  spora_device_t* dev = nullptr;
  if (!ok(spora_context_create(&ctx), "context")) return 1;
  if (spora_device_find(ctx, name.c_str(), &dev) != SPORA_OK) {
    std::printf("no device: %s: %s\n", name.c_str(), spora_last_error());
    spora_context_free(ctx);
    return 0;
  }
  struct Row {
    int64_t n;
    const char* dtype;
    const char* precision;
  };
  std::vector<Row> rows = {{4096, "f32", nullptr}, {4096, "bf16", nullptr}, {4096, "f16", nullptr},
                           {1024, "f32", nullptr}};
  if (high) {
    rows.push_back({4096, "f32", "high"});
    rows.push_back({1024, "f32", "high"});
  }
  std::printf("matmul on %s (TFLOP/s, eager calls into one output)\n", name.c_str());
  int failed = 0;
  for (const Row& r : rows) {
    const double t = tflops(dev, r.n, r.dtype, r.precision);
    char label[64];
    std::snprintf(label, sizeof label, "matmul %lld^2 %s%s", static_cast<long long>(r.n), r.dtype,
                  r.precision ? " (matmul_precision high)" : "");
    if (t < 0) {
      std::printf("  %-40s failed\n", label);
      ++failed;
    } else {
      std::printf("  %-40s %8.1f\n", label, t);
    }
  }
  spora_context_free(ctx);
  return failed ? 1 : 0;
}
