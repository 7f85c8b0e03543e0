// Eager fallback from several threads at once: this binary disables `linear`
// on sim, so each call runs linear's decomposition (matmul into a planned
// intermediate, then add) as a compiled plan. Threads calling the same op
// with the same signature must not share one plan's arena while it runs.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "device_test_util.h"
#include "ir/op.h"
#include "runtime/eager.h"
#include "support/error.h"

namespace spora {
namespace {

// Read by the sim plugin when it loads, after main starts.
[[maybe_unused]] const bool kSimConfigured = [] {
  setenv("SPORA_SIM_DISABLE_OPS", "linear", 1);
  return true;
}();

// x @ w^T + b on the host, in double.
std::vector<float> linear_ref(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b,
                              int n, int k, int m) {
  std::vector<float> y(static_cast<size_t>(n * m));
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < m; ++j) {
      double s = b[static_cast<size_t>(j)];
      for (int t = 0; t < k; ++t)
        s += static_cast<double>(x[static_cast<size_t>(i * k + t)]) * w[static_cast<size_t>(j * k + t)];
      y[static_cast<size_t>(i * m + j)] = static_cast<float>(s);
    }
  return y;
}

TEST(FallbackRace, SimLacksLinear) {
  Device* sim = device("sim:0");
  ASSERT_NE(sim, nullptr);
  const OpDef* op = OpRegistry::get().find("linear");
  TensorMeta in[3] = {{SPORA_DTYPE_F32, S({2, 3})}, {SPORA_DTYPE_F32, S({4, 3})}, {SPORA_DTYPE_F32, S({4})}};
  OpCall call;
  infer_call(*op, in, 3, {}, call);
  try {
    sim->kernel(*op, call);
    FAIL() << "sim has a linear kernel; the test would not exercise the fallback";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kUnimplemented);
  }
}

// Every thread uses its own inputs of one signature; each result must be its
// own inputs' linear. Sharing a plan's arena lets one thread's add read
// another thread's matmul.
TEST(FallbackRace, ThreadsRunTheSameDecompositionAtOnce) {
  Device* sim = device("sim:0");
  ASSERT_NE(sim, nullptr);
  const OpDef* op = OpRegistry::get().find("linear");
  constexpr int kThreads = 4, kIters = 300, n = 16, k = 32, m = 24;
  std::atomic<int> wrong{0}, errors{0};
  std::atomic<int> ready{0};
  std::vector<std::string> first_error(kThreads);
  auto worker = [&](int t) {
    const auto x = normal_values(S({n, k}), 100 + t), w = normal_values(S({m, k}), 200 + t),
               b = normal_values(S({m}), 300 + t);
    const auto want = linear_ref(x, w, b, n, k, m);
    const Tensor tx = f32_tensor(sim, S({n, k}), x), tw = f32_tensor(sim, S({m, k}), w),
                 tb = f32_tensor(sim, S({m}), b);
    const Tensor* in[3] = {&tx, &tw, &tb};
    ready.fetch_add(1);
    while (ready.load() < kThreads) std::this_thread::yield();
    for (int it = 0; it < kIters; ++it) {
      Tensor out;
      try {
        eager_call(*op, sim, in, 3, {}, &out, 1);
        const std::vector<float> got = read(out);
        for (size_t i = 0; i < got.size(); ++i)
          if (!(std::fabs(got[i] - want[i]) <= 1e-4f * (1.0f + std::fabs(want[i])))) {
            wrong.fetch_add(1);
            break;
          }
      } catch (const std::exception& e) {
        if (errors.fetch_add(1) == 0) first_error[static_cast<size_t>(t)] = e.what();
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0) << first_error[0] << first_error[1] << first_error[2] << first_error[3];
  EXPECT_EQ(wrong.load(), 0) << "results of " << kThreads * kIters << " calls that are another thread's";
}

}  // namespace
}  // namespace spora
