// Eager latency of `add` on 1-element f32 tensors through the C API:
//   bench_eager_latency [device]     (default cpu; e.g. sim)
// On cpu, side by side with the same add as a raw oneDNN binary primitive
// (created once, executed per op) in the same process. Prints µs/op (median
// of repeated runs), the ratio, and the cost per op while an eager tape
// records (spora_tape_start). Each timed run ends with
// spora_device_synchronize, so an asynchronous device's queued work is paid
// for.
#include <oneapi/dnnl/dnnl.hpp>
#include <spora/spora.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

template <class F, class S>
double median_us_per_op(F&& body, S&& sync, int reps, int iters) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) body();
    sync();
    const auto t1 = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / iters);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

#define CHECK(x)                                                  \
  do {                                                            \
    if ((x) != SPORA_OK) {                                        \
      std::fprintf(stderr, "%s: %s\n", #x, spora_last_error());   \
      return 1;                                                   \
    }                                                             \
  } while (0)

}  // namespace

int main(int argc, char** argv) {
  const char* device = argc > 1 ? argv[1] : "cpu";
  const bool on_cpu = std::strcmp(device, "cpu") == 0;
  // Fewer ops off cpu: a simulated device runs them on its own thread.
  const int reps = on_cpu ? 31 : 9, iters = on_cpu ? 20000 : 4000;
  spora_context_t* ctx;
  spora_device_t* dev;
  CHECK(spora_context_create(&ctx));
  CHECK(spora_device_find(ctx, device, &dev));
  const float one = 1.0f, two = 2.0f;
  const int64_t shape[1] = {1};
  spora_tensor_t *a, *b;
  CHECK(spora_tensor_create(dev, SPORA_DTYPE_F32, shape, 1, &one, sizeof one, &a));
  CHECK(spora_tensor_create(dev, SPORA_DTYPE_F32, shape, 1, &two, sizeof two, &b));
  spora_tensor_t* in[2] = {a, b};
  bool ok = true;
  auto sync = [&] { ok &= spora_device_synchronize(dev) == SPORA_OK; };
  const double spora_us = median_us_per_op(
      [&] {
        spora_tensor_t* out = nullptr;
        ok &= spora_op_call("add", nullptr, in, 2, nullptr, &out, 1) == SPORA_OK;
        spora_tensor_free(out);
      },
      sync, reps, iters);
  if (!ok) {
    std::fprintf(stderr, "add failed: %s\n", spora_last_error());
    return 1;
  }
  // The same with an eager tape recording every op (a fresh tape per
  // repetition, so that what it holds stays bounded).
  spora_tape_t* tape = nullptr;
  int done = 0;
  const double taped_us = median_us_per_op(
      [&] {
        if (done++ % iters == 0) {
          if (tape) ok &= spora_tape_free(tape) == SPORA_OK;
          ok &= spora_tape_create(&tape) == SPORA_OK && spora_tape_start(tape) == SPORA_OK;
        }
        spora_tensor_t* out = nullptr;
        ok &= spora_op_call("add", nullptr, in, 2, nullptr, &out, 1) == SPORA_OK;
        spora_tensor_free(out);
      },
      sync, reps, iters);
  ok &= spora_tape_free(tape) == SPORA_OK;
  if (!ok) {
    std::fprintf(stderr, "add under a tape failed: %s\n", spora_last_error());
    return 1;
  }

  std::printf("eager add, 1-element f32, %s (median of %d x %d ops)\n", device, reps, iters);
  std::printf("  %-34s %8.3f us/op\n", "spora_op_call (alloc + launch)", spora_us);
  std::printf("  %-34s %8.3f us/op\n", "spora_op_call, tape recording", taped_us);
  if (on_cpu) {
    // Anchor: oneDNN binary add, primitive made once, output buffer reused.
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream strm(eng);
    dnnl::memory::desc md({1}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a);
    dnnl::binary prim(dnnl::binary::primitive_desc(dnnl::binary::desc(dnnl::algorithm::binary_add, md, md, md), eng));
    float x = 1, y = 2, z = 0;
    dnnl::memory mx(md, eng, &x), my(md, eng, &y), mz(md, eng, &z);
    const double dnnl_us = median_us_per_op(
        [&] {
          prim.execute(strm, {{DNNL_ARG_SRC_0, mx}, {DNNL_ARG_SRC_1, my}, {DNNL_ARG_DST, mz}});
          strm.wait();
        },
        [] {}, reps, iters);
    std::printf("  %-34s %8.3f us/op\n", "raw oneDNN binary execute", dnnl_us);
    std::printf("  ratio spora / oneDNN: %.2f   goal: <= 0.5 us/op -> %s\n", spora_us / dnnl_us,
                spora_us <= 0.5 ? "met" : "not met");
  }
  spora_tensor_free(a);
  spora_tensor_free(b);
  spora_context_free(ctx);
  return 0;
}
