// Plans cached by input signature: one compiled graph runs at several batch
// sizes, planning each signature once, with the numbers of a graph built
// for that batch.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "device_test_util.h"
#include "sched/executor.h"
#include "sched/plan_cache.h"
#include "support/error.h"

namespace spora {
namespace {

// y = linear(tanh(reshape(linear(x, w1, b1), [-1, 16])), w2, b2), and the
// batch mean of y.
ir::Graph mlp(int64_t batch) {
  ir::Graph g("mlp");
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({batch, 20}));
  auto w1 = g.add_weight("w1", SPORA_DTYPE_F32, S({16, 20}));
  auto b1 = g.add_weight("b1", SPORA_DTYPE_F32, S({16}));
  auto w2 = g.add_weight("w2", SPORA_DTYPE_F32, S({5, 16}));
  auto b2 = g.add_weight("b2", SPORA_DTYPE_F32, S({5}));
  auto h = g.add_op("linear", {x, w1, b1}, {}, {"model.py", 2})[0];
  Attrs flat;
  flat.set("shape", AttrValue::of_ints({-1, 16}));
  auto r = g.add_op("reshape", {h}, flat, {"model.py", 3})[0];
  auto a = g.add_op("tanh", {r}, {}, {"model.py", 4})[0];
  auto y = g.add_op("linear", {a, w2, b2}, {}, {"model.py", 5})[0];
  Attrs over_batch;
  over_batch.set("axes", AttrValue::of_ints({0}));
  g.set_outputs({y, g.add_op("mean", {y}, over_batch, {"model.py", 6})[0]});
  return g;
}

struct Weights {
  std::vector<Tensor> t;
  explicit Weights(Device* d) {
    unsigned seed = 10;
    for (const Shape& s : {S({16, 20}), S({16}), S({5, 16}), S({5})}) t.push_back(f32_tensor(d, s, normal_values(s, seed++)));
  }
  std::vector<const Tensor*> with(const Tensor& x) const {
    std::vector<const Tensor*> p = {&x};
    for (const Tensor& w : t) p.push_back(&w);
    return p;
  }
};

class PlanCacheTest : public ::testing::TestWithParam<std::string> {
 protected:
  Device* dev() { return device(GetParam().c_str()); }
};

TEST_P(PlanCacheTest, OneExecutableRunsEveryBatchSizeAndPlansEachOnce) {
  Device* d = dev();
  sched::PlanCache cache(mlp(32), d);
  EXPECT_EQ(cache.plan_count(), 1u);
  const Weights w(d);
  for (int64_t batch : {32, 7, 32, 7}) {
    const Tensor x = f32_tensor(d, S({batch, 20}), normal_values(S({batch, 20}), static_cast<unsigned>(batch)));
    const std::vector<Tensor> got = cache.run(w.with(x));
    // A graph built and compiled for this batch, on its own.
    const std::vector<Tensor> want = sched::Executable(mlp(batch), d).run(w.with(x));
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].shape, S({batch, 5}));
    EXPECT_EQ(got[1].shape, S({5}));
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(read(got[i]), read(want[i])) << "batch " << batch << " output " << i;
  }
  EXPECT_EQ(cache.plan_count(), 2u);
  EXPECT_EQ(cache.capacity(), 8u);
}

TEST_P(PlanCacheTest, KeepsAtMostSporaPlanCachePlans) {
  Device* d = dev();
  ASSERT_EQ(setenv("SPORA_PLAN_CACHE", "2", 1), 0);
  sched::PlanCache cache(mlp(4), d);
  unsetenv("SPORA_PLAN_CACHE");
  EXPECT_EQ(cache.capacity(), 2u);
  const Weights w(d);
  for (int64_t batch : {1, 2, 3, 1, 4}) {
    const Tensor x = f32_tensor(d, S({batch, 20}), normal_values(S({batch, 20}), 3));
    const std::vector<Tensor> got = cache.run(w.with(x));
    EXPECT_EQ(read(got[1]), read(sched::Executable(mlp(batch), d).run(w.with(x))[1])) << batch;
    EXPECT_LE(cache.plan_count(), 2u);
  }
  EXPECT_EQ(cache.plan_count(), 2u);
}

TEST(PlanCache, MalformedSporaPlanCacheIsAnError) {
  for (const char* bad : {"0", "-3", "2.5", "lots"}) {
    ASSERT_EQ(setenv("SPORA_PLAN_CACHE", bad, 1), 0);
    try {
      sched::PlanCache cache(mlp(4), device("cpu"));
      ADD_FAILURE() << "accepted SPORA_PLAN_CACHE=" << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("SPORA_PLAN_CACHE"), std::string::npos) << e.what();
    }
  }
  unsetenv("SPORA_PLAN_CACHE");
}

TEST(PlanCache, SignaturesTheGraphCannotTakeAreErrorsNamingTheOpAndLine) {
  Device* d = device("cpu");
  const Weights w(d);
  sched::PlanCache cache(mlp(8), d);
  auto message = [&](const Tensor& x) -> std::string {
    try {
      cache.run(w.with(x));
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::kInvalidArgument);
      return e.what();
    }
    return "ran";
  };
  // Another rank, another dtype: not a signature of this graph.
  EXPECT_EQ(message(f32_tensor(d, S({160}), normal_values(S({160}), 1))),
            "[graph mlp] input 'x' must be f32 (8,20) (or another shape of that rank), got f32 (160,)");
  const std::vector<double> dv(40, 1.0);
  EXPECT_NE(message(tensor_from_host(d, SPORA_DTYPE_F64, S({2, 20}), dv.data(), dv.size() * 8)).find("got f64 (2,20)"),
            std::string::npos);
  // The right rank, but 21 features do not fit w1: the op and line say so.
  const std::string m = message(f32_tensor(d, S({8, 21}), normal_values(S({8, 21}), 1)));
  EXPECT_EQ(m.rfind("[linear]", 0), 0u) << m;
  EXPECT_NE(m.find("(model.py:2); while planning graph 'mlp' for x (8,21)"), std::string::npos) << m;
  // Weights keep their shapes.
  const Tensor x = f32_tensor(d, S({8, 20}), normal_values(S({8, 20}), 1));
  std::vector<const Tensor*> p = w.with(x);
  const Tensor b1 = f32_tensor(d, S({17}), normal_values(S({17}), 1));
  p[2] = &b1;
  try {
    cache.run(p);
    ADD_FAILURE() << "ran with a resized weight";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[graph mlp] weight 'b1' must be f32 (16,), got f32 (17,)");
  }
  EXPECT_EQ(cache.plan_count(), 1u);  // failed signatures leave no plan
}

TEST(PlanCache, AnAttributeThatFixesAShapeRejectsOtherBatches) {
  // reshape to a literal [8, 4, 5] cannot take a batch of 3.
  ir::Graph g("fixed");
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({8, 20}));
  Attrs to;
  to.set("shape", AttrValue::of_ints({8, 4, 5}));
  g.set_outputs({g.add_op("reshape", {x}, to, {"model.py", 9})[0]});
  Device* d = device("cpu");
  sched::PlanCache cache(g, d);
  const Tensor x3 = f32_tensor(d, S({3, 20}), normal_values(S({3, 20}), 1));
  try {
    cache.run({&x3});
    FAIL() << "reshaped (3,20) into (8,4,5)";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("[reshape]", 0), 0u) << m;
    EXPECT_NE(m.find("(model.py:9)"), std::string::npos) << m;
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, PlanCacheTest, ::testing::Values("cpu", "sim"));

}  // namespace
}  // namespace spora
