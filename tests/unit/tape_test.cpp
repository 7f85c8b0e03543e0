// The eager tape through the public API (spora.h / spora.hpp): eager ops
// recorded while a tape is started give the same IR as graph mode, and the
// tape's gradients equal graph-mode gradients (spora_graph_grad), finite
// differences in f64, and graph-mode grad of grad for nested tapes.
#include <gtest/gtest.h>
#include <spora/spora.hpp>

#include <cmath>
#include <deque>
#include <random>
#include <string>
#include <thread>

namespace {

spora::Context& ctx() {
  static spora::Context c;
  return c;
}

template <class T>
spora::Tensor random_tensor(spora::Device d, const std::vector<int64_t>& shape, std::mt19937& rng, double lo = -1,
                            double hi = 1) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<T> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<T>(u(rng));
  return spora::Tensor::from<T>(d, shape, v);
}

spora::Tensor labels(spora::Device d, const std::vector<int64_t>& v) {
  spora_tensor_t* t = nullptr;
  const int64_t n = static_cast<int64_t>(v.size());
  spora::check(spora_tensor_create(d.get(), SPORA_DTYPE_I64, &n, 1, v.data(), v.size() * 8, &t));
  return spora::Tensor(t);
}

std::vector<double> as_f64(const spora::Tensor& t) {
  if (t.dtype() == SPORA_DTYPE_F64) return t.read<double>();
  const std::vector<float> f = t.read<float>();
  return std::vector<double>(f.begin(), f.end());
}

// |a - b| <= tol * (1 + |b|) elementwise, with the first mismatch reported.
void expect_close(const spora::Tensor& a, const spora::Tensor& b, double tol, const std::string& what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  const std::vector<double> x = as_f64(a), y = as_f64(b);
  for (size_t i = 0; i < x.size(); ++i)
    if (!(std::fabs(x[i] - y[i]) <= tol * (1 + std::fabs(y[i])))) {
      ADD_FAILURE() << what << ": element " << i << " is " << x[i] << " vs " << y[i];
      return;
    }
}

bool all_zero(const spora::Tensor& t) {
  for (double v : as_f64(t))
    if (v != 0) return false;
  return true;
}

// A model built twice by one piece of code: each op runs eagerly (so a
// started tape records it) and is added to a graph named like the tape's.
// A leaf tensor becomes a graph input "x<k>" at its first use, which is the
// tape's rule, so the two graphs must print identically.
class Twin {
 public:
  explicit Twin(spora::Device d) : d_(d), g_("tape") {}

  int leaf(spora::Tensor t) {
    ts_.push_back(std::move(t));
    vs_.push_back(-1);
    return static_cast<int>(ts_.size()) - 1;
  }
  std::vector<int> ops(const char* op, const std::vector<int>& in, const spora::Attrs* attrs, size_t n_out,
                       int32_t line) {
    std::vector<spora_tensor_t*> ein;
    std::vector<spora_value_t> gin;
    for (int i : in) {
      ein.push_back(ts_[static_cast<size_t>(i)].get());
      gin.push_back(use(i));
    }
    std::vector<spora_tensor_t*> eout(n_out, nullptr);
    spora::check(spora_op_call_at(op, nullptr, ein.data(), ein.size(), attrs ? attrs->get() : nullptr, "model.cc",
                                  line, eout.data(), eout.size()));
    const std::vector<spora_value_t> gout = g_.ops(op, gin, attrs, "model.cc", line);
    EXPECT_EQ(gout.size(), n_out) << op;
    std::vector<int> out;
    for (size_t k = 0; k < n_out; ++k) {
      ts_.emplace_back(eout[k]);
      vs_.push_back(gout[k]);
      out.push_back(static_cast<int>(ts_.size()) - 1);
    }
    return out;
  }
  int op(const char* op, const std::vector<int>& in, const spora::Attrs* attrs = nullptr, int32_t line = 0) {
    return ops(op, in, attrs, 1, line)[0];
  }

  spora::Tensor& t(int i) { return ts_[static_cast<size_t>(i)]; }
  spora_value_t v(int i) const { return vs_[static_cast<size_t>(i)]; }
  spora::Graph& graph() { return g_; }
  // The leaf tensors in graph-input order.
  std::vector<const spora::Tensor*> params() const {
    std::vector<const spora::Tensor*> p;
    for (int i : first_use_) p.push_back(&ts_[static_cast<size_t>(i)]);
    return p;
  }

 private:
  spora_value_t use(int i) {
    auto& v = vs_[static_cast<size_t>(i)];
    if (v < 0) {
      const spora::Tensor& t = ts_[static_cast<size_t>(i)];
      v = g_.input(("x" + std::to_string(first_use_.size())).c_str(), t.dtype(), t.shape());
      first_use_.push_back(i);
    }
    return v;
  }

  spora::Device d_;
  spora::Graph g_;
  std::deque<spora::Tensor> ts_;  // stable addresses
  std::vector<spora_value_t> vs_;
  std::vector<int> first_use_;
};

// Compares, for `loss` of a Twin built under `tape`: the tape's graph with
// the graph-mode graph (same text), and the tape's gradients with respect to
// `wrt` with graph mode's, compiled and run eagerly.
void expect_tape_matches_graph(spora::Device d, spora::Tape& tape, Twin& m, int loss, const std::vector<int>& wrt,
                               double tol) {
  spora::Graph recorded = tape.graph({&m.t(loss)});
  m.graph().set_outputs({m.v(loss)});
  EXPECT_EQ(recorded.text(), m.graph().text());

  std::vector<const spora::Tensor*> sources;
  std::vector<spora_value_t> gwrt;
  for (int i : wrt) {
    sources.push_back(&m.t(i));
    gwrt.push_back(m.v(i));
  }
  const std::vector<spora::Tensor> eager = tape.gradient(m.t(loss), sources);
  spora::Graph gg = m.graph().grad(gwrt);
  const std::vector<spora::Tensor> compiled = gg.compile(d).run(m.params(), 1 + wrt.size());
  const std::vector<spora::Tensor> by_op = gg.run_eager(d, m.params(), 1 + wrt.size());
  expect_close(compiled[0], m.t(loss), tol, "loss");
  for (size_t k = 0; k < wrt.size(); ++k) {
    expect_close(eager[k], compiled[1 + k], tol, "gradient " + std::to_string(k) + " vs compiled graph");
    // Same IR, same kernels: op-by-op graph mode gives the same bits.
    expect_close(eager[k], by_op[1 + k], 0, "gradient " + std::to_string(k) + " vs graph run eagerly");
  }
}

class TapeTest : public ::testing::TestWithParam<std::string> {
 protected:
  spora::Device dev() { return ctx().device(GetParam()); }
  std::mt19937 rng{1234};
};

// linear -> relu -> linear -> cross_entropy, gradients for every weight and
// the input.
template <class T>
int mlp(Twin& m, spora::Device d, std::mt19937& rng, std::vector<int>& wrt) {
  const int x = m.leaf(random_tensor<T>(d, {8, 12}, rng));
  const int w1 = m.leaf(random_tensor<T>(d, {16, 12}, rng, -0.5, 0.5));
  const int b1 = m.leaf(random_tensor<T>(d, {16}, rng));
  const int w2 = m.leaf(random_tensor<T>(d, {5, 16}, rng, -0.5, 0.5));
  const int b2 = m.leaf(random_tensor<T>(d, {5}, rng));
  const int y = m.leaf(labels(d, {0, 1, 2, 3, 4, 0, 1, 2}));
  const int h = m.op("relu", {m.op("linear", {x, w1, b1}, nullptr, 10)}, nullptr, 11);
  const int logits = m.op("linear", {h, w2, b2}, nullptr, 12);
  wrt = {w1, b1, w2, b2, x};
  return m.op("cross_entropy", {logits, y}, nullptr, 13);
}

TEST_P(TapeTest, MlpWithCrossEntropyMatchesGraphMode) {
  auto d = dev();
  spora::Tape tape;
  Twin m(d);
  std::vector<int> wrt;
  int loss;
  {
    spora::Tape::Recording rec(tape);
    loss = mlp<float>(m, d, rng, wrt);
  }
  expect_tape_matches_graph(d, tape, m, loss, wrt, 1e-6);
}

TEST_P(TapeTest, ConvNetMatchesGraphMode) {
  auto d = dev();
  spora::Tape tape;
  Twin m(d);
  spora::Attrs pad;
  pad.set("padding", std::vector<int64_t>{1, 1});
  spora::Attrs pool;
  pool.set("kernel_size", std::vector<int64_t>{2, 2});
  spora::Attrs flat;
  flat.set("shape", std::vector<int64_t>{2, 4 * 3 * 3});
  int loss;
  std::vector<int> wrt;
  {
    spora::Tape::Recording rec(tape);
    const int x = m.leaf(random_tensor<float>(d, {2, 3, 6, 6}, rng));
    const int w = m.leaf(random_tensor<float>(d, {4, 3, 3, 3}, rng, -0.4, 0.4));
    const int b = m.leaf(random_tensor<float>(d, {4}, rng));
    const int fw = m.leaf(random_tensor<float>(d, {3, 36}, rng, -0.3, 0.3));
    const int fb = m.leaf(random_tensor<float>(d, {3}, rng));
    const int y = m.leaf(labels(d, {2, 0}));
    const int c = m.op("relu", {m.op("conv2d_bias", {x, w, b}, &pad, 20)}, nullptr, 21);
    const int p = m.op("reshape", {m.op("max_pool2d", {c}, &pool, 22)}, &flat, 23);
    loss = m.op("cross_entropy", {m.op("linear", {p, fw, fb}, nullptr, 24), y}, nullptr, 25);
    wrt = {x, w, b, fw, fb};
  }
  expect_tape_matches_graph(d, tape, m, loss, wrt, 1e-6);
}

// Broadcasting binary ops and reductions: the adjoints sum broadcast
// dimensions away.
int broadcast_net(Twin& m, spora::Device d, std::mt19937& rng, std::vector<int>& wrt, bool f64) {
  auto rt = [&](const std::vector<int64_t>& s) {
    return f64 ? random_tensor<double>(d, s, rng) : random_tensor<float>(d, s, rng);
  };
  const int a = m.leaf(rt({3, 1, 4}));
  const int b = m.leaf(rt({5, 1}));
  const int c = m.leaf(rt({4}));
  spora::Attrs ax1, ax02;
  ax1.set("axes", std::vector<int64_t>{1}).set("keepdims", true);
  ax02.set("axes", std::vector<int64_t>{0, 2});
  const int ab = m.op("mul", {a, b}, nullptr, 30);          // (3,5,4)
  const int s = m.op("add", {m.op("exp", {ab}), c}, nullptr, 31);
  const int mx = m.op("max", {s}, &ax1, 32);                 // (3,1,4)
  const int cen = m.op("sub", {s, mx}, nullptr, 33);         // (3,5,4)
  const int mean = m.op("mean", {m.op("tanh", {cen})}, &ax02, 34);  // (5)
  const int sq = m.op("mul", {mean, mean}, nullptr, 35);
  wrt = {a, b, c};
  return m.op("sum", {sq}, nullptr, 36);
}

TEST_P(TapeTest, BroadcastingAndReductionsMatchGraphMode) {
  auto d = dev();
  for (bool f64 : {false, true}) {
    spora::Tape tape;
    Twin m(d);
    std::vector<int> wrt;
    int loss;
    {
      spora::Tape::Recording rec(tape);
      loss = broadcast_net(m, d, rng, wrt, f64);
    }
    expect_tape_matches_graph(d, tape, m, loss, wrt, f64 ? 1e-12 : 1e-6);
  }
}

// Central differences of the eager forward pass in f64.
TEST_P(TapeTest, GradientsMatchFiniteDifferencesInF64) {
  auto d = dev();
  for (int net = 0; net < 2; ++net) {
    spora::Tape tape;
    Twin m(d);
    std::vector<int> wrt;
    int loss;
    {
      spora::Tape::Recording rec(tape);
      loss = net == 0 ? mlp<double>(m, d, rng, wrt) : broadcast_net(m, d, rng, wrt, true);
    }
    std::vector<const spora::Tensor*> sources;
    for (int i : wrt) sources.push_back(&m.t(i));
    const std::vector<spora::Tensor> grads = tape.gradient(m.t(loss), sources);
    // The forward graph as the tape recorded it, run without a tape.
    spora::Graph fwd = tape.graph({&m.t(loss)});
    auto exe = fwd.compile(d);
    std::vector<const spora::Tensor*> params = m.params();
    for (size_t k = 0; k < wrt.size(); ++k) {
      const spora::Tensor& src = m.t(wrt[k]);
      std::vector<double> base = src.read<double>(), g = grads[k].read<double>();
      size_t pos = 0;
      while (params[pos] != &src) ++pos;
      for (size_t e = 0; e < base.size(); e += 1 + base.size() / 7) {
        const double h = 1e-6;
        auto at = [&](double delta) {
          std::vector<double> v = base;
          v[e] += delta;
          spora::Tensor p = spora::Tensor::from<double>(d, src.shape(), v);
          std::vector<const spora::Tensor*> ps = params;
          ps[pos] = &p;
          return exe.run(ps, 1)[0].read<double>()[0];
        };
        const double fd = (at(h) - at(-h)) / (2 * h);
        EXPECT_NEAR(g[e], fd, 1e-6 * (1 + std::fabs(fd))) << "net " << net << " source " << k << " element " << e;
      }
    }
  }
}

TEST_P(TapeTest, SourcesTheTargetDoesNotDependOnGetZeros) {
  auto d = dev();
  spora::Tape tape;
  auto x = spora::Tensor::from<float>(d, {3}, {1, 2, 3});
  auto unused = spora::Tensor::from<float>(d, {2, 2}, {1, 2, 3, 4});
  auto side = spora::Tensor::from<float>(d, {3}, {4, 5, 6});
  tape.watch(x);
  tape.watch(unused);
  tape.watch(side);
  spora::Tensor y, z, later;
  {
    spora::Tape::Recording rec(tape);
    y = spora::op("sum", {&x});
    z = spora::op("mul", {&side, &x});  // uses side, but not on y's path
    later = spora::op("exp", {&y});     // recorded after y
  }
  auto g = tape.gradient(y, {&x, &unused, &side, &later, &z});
  EXPECT_EQ(g[0].read<float>(), (std::vector<float>{1, 1, 1}));
  EXPECT_EQ(g[1].shape(), (std::vector<int64_t>{2, 2}));
  for (int k = 1; k < 5; ++k) EXPECT_TRUE(all_zero(g[k])) << "source " << k;
  EXPECT_EQ(g[3].shape(), std::vector<int64_t>{});
}

TEST_P(TapeTest, SensitivityAndIntermediateSources) {
  auto d = dev();
  spora::Tape tape;
  auto x = spora::Tensor::from<double>(d, {4}, {0.5, -1, 2, 0.25});
  auto w = spora::Tensor::from<double>(d, {4}, {1.5, 2, -0.5, 3});
  tape.watch(x);
  spora::Tensor h, y, loss;
  {
    spora::Tape::Recording rec(tape);
    h = spora::op("mul", {&x, &w});
    y = spora::op("tanh", {&h});
    loss = spora::op("sum", {&y});
  }
  const std::vector<double> xv = x.read<double>(), wv = w.read<double>(), hv = h.read<double>();
  // d loss / d h holds x and w fixed: 1 - tanh(h)^2.
  auto gh = tape.gradient(loss, {&h, &x});
  for (int i = 0; i < 4; ++i) {
    const double t = std::tanh(hv[i]);
    EXPECT_NEAR(gh[0].read<double>()[i], 1 - t * t, 1e-15);
    EXPECT_NEAR(gh[1].read<double>()[i], (1 - t * t) * wv[i], 1e-15);
  }
  // A vector-Jacobian product with a given sensitivity.
  auto s = spora::Tensor::from<double>(d, {4}, {1, -2, 0.5, 3});
  auto gs = tape.gradient(y, {&x}, &s);
  for (int i = 0; i < 4; ++i) {
    const double t = std::tanh(xv[i] * wv[i]);
    EXPECT_NEAR(gs[0].read<double>()[i], s.read<double>()[i] * (1 - t * t) * wv[i], 1e-15);
  }
  // d y / d y = sens.
  auto self = tape.gradient(y, {&y}, &s);
  EXPECT_EQ(self[0].read<double>(), s.read<double>());
  // The tape is persistent: asking again gives the same numbers, also while
  // it records, which does not record its own backward pass.
  const std::string before = tape.graph({&loss}).text();
  {
    spora::Tape::Recording rec(tape);
    auto again = tape.gradient(loss, {&h, &x});
    EXPECT_EQ(again[1].read<double>(), gh[1].read<double>());
  }
  EXPECT_EQ(tape.graph({&loss}).text(), before);
}

// Nested tapes: the inner tape's gradient is recorded on the outer tape,
// whose gradient of it equals graph mode's grad of grad.
TEST_P(TapeTest, NestedTapesGiveGraphModeSecondOrderGradients) {
  auto d = dev();
  for (bool f64 : {false, true}) {
    auto rt = [&](const std::vector<int64_t>& s) {
      return f64 ? random_tensor<double>(d, s, rng) : random_tensor<float>(d, s, rng);
    };
    spora::Tape outer, inner;
    Twin m(d);
    const int x = m.leaf(rt({3, 4}));
    const int w = m.leaf(rt({4, 2}));
    int y;
    spora::Tensor gx, gw;
    {
      spora::Tape::Recording o(outer);
      {
        spora::Tape::Recording i(inner);
        const int t = m.op("tanh", {m.op("matmul", {x, w}, nullptr, 40)}, nullptr, 41);
        y = m.op("sum", {m.op("mul", {t, t}, nullptr, 42)}, nullptr, 43);
      }
      auto g = inner.gradient(m.t(y), {&m.t(x), &m.t(w)});
      gx = std::move(g[0]);
      gw = std::move(g[1]);
    }
    // The inner tape did not record its own backward pass.
    EXPECT_EQ(inner.graph({&m.t(y)}).text(), [&] {
      m.graph().set_outputs({m.v(y)});
      return m.graph().text();
    }());
    auto gg = outer.gradient(gx, {&m.t(x), &m.t(w)});

    // Graph mode: d sum(d y/d x) / d (x, w).
    m.graph().set_outputs({m.v(y)});
    spora::Graph g1 = m.graph().grad({m.v(x), m.v(w)});
    spora::Graph g2 = g1.grad({m.v(x), m.v(w)}, 1);
    auto ref = g2.compile(d).run(m.params(), 5);
    const double tol = f64 ? 1e-12 : 1e-6;
    expect_close(gx, ref[1], tol, "first order x");
    expect_close(gw, ref[2], tol, "first order w");
    expect_close(gg[0], ref[3], tol, "second order x");
    expect_close(gg[1], ref[4], tol, "second order w");
    // Exactly graph mode run op by op.
    auto by_op = g2.run_eager(d, m.params(), 5);
    expect_close(gg[0], by_op[3], 0, "second order x, op by op");
    expect_close(gg[1], by_op[4], 0, "second order w, op by op");
  }
}

TEST_P(TapeTest, GraphRunEagerIsRecorded) {
  auto d = dev();
  spora::Graph g("fwd");
  auto a = g.input("a", SPORA_DTYPE_F64, {3});
  auto b = g.input("b", SPORA_DTYPE_F64, {3});
  g.set_outputs({g.op("sum", {g.op("mul", {g.op("sin", {a}), b})})});
  auto av = spora::Tensor::from<double>(d, {3}, {0.1, 0.7, -2});
  auto bv = spora::Tensor::from<double>(d, {3}, {3, -1, 0.5});
  spora::Tape tape;
  tape.watch(av);
  std::vector<spora::Tensor> out;
  {
    spora::Tape::Recording rec(tape);
    out = g.run_eager(d, {&av, &bv}, 1);
  }
  auto grad = tape.gradient(out[0], {&av});
  const std::vector<double> x = av.read<double>(), y = bv.read<double>();
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(grad[0].read<double>()[i], std::cos(x[i]) * y[i], 1e-15);
}

TEST_P(TapeTest, TensorsAreKeyedByIdentityNotAddress) {
  auto d = dev();
  spora::Tape tape;
  spora::Tensor y1, y2;
  {
    spora::Tape::Recording rec(tape);
    {
      auto a = spora::Tensor::from<float>(d, {2}, {1, 2});
      y1 = spora::op("neg", {&a});
    }  // a's handle is freed; the next one may reuse its address
    auto b = spora::Tensor::from<float>(d, {2}, {3, 4});
    y2 = spora::op("neg", {&b});
  }
  const std::string text = tape.graph({&y1, &y2}).text();
  EXPECT_NE(text.find("%0 = input \"x0\""), std::string::npos) << text;
  EXPECT_NE(text.find("%2 = input \"x1\""), std::string::npos) << text;
  // The tape kept the freed handle's tensor alive for its gradient.
  EXPECT_EQ(tape.gradient(y1, {&y1})[0].read<float>(), (std::vector<float>{1, 1}));
}

TEST_P(TapeTest, OpsOnOtherThreadsAreNotRecorded) {
  auto d = dev();
  spora::Tape tape;
  auto a = spora::Tensor::from<float>(d, {2}, {1, 2});
  spora::Tensor mine, theirs;
  {
    spora::Tape::Recording rec(tape);
    mine = spora::op("exp", {&a});
    std::thread([&] { theirs = spora::op("exp", {&a}); }).join();
  }
  EXPECT_NO_THROW(tape.graph({&mine}));
  try {
    tape.graph({&theirs});
    FAIL() << "the other thread's op was recorded";
  } catch (const spora::Error& e) {
    EXPECT_NE(std::string(e.what()).find("output 0 was neither produced nor used"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, TapeTest, ::testing::Values("cpu", "sim"));

// Status, message fragment.
void expect_fails(spora_status_t s, spora_status_t want, const char* fragment) {
  EXPECT_EQ(s, want) << spora_last_error();
  EXPECT_NE(std::string(spora_last_error()).find(fragment), std::string::npos) << spora_last_error();
}

TEST(TapeErrors, AreClearStatusesNeverCrashes) {
  auto d = ctx().device("cpu");
  spora::Tape a, b;
  auto x = spora::Tensor::from<float>(d, {2}, {1, 2});
  auto n = labels(d, {1, 2});
  a.start();
  b.start();
  expect_fails(spora_tape_stop(a.get()), SPORA_ERROR_INVALID_ARGUMENT, "not the innermost");
  expect_fails(spora_tape_start(b.get()), SPORA_ERROR_INVALID_ARGUMENT, "already recording");
  auto y = spora::op("exp", {&x});
  b.stop();
  a.stop();
  expect_fails(spora_tape_stop(a.get()), SPORA_ERROR_INVALID_ARGUMENT, "not recording on this thread");

  auto stranger = spora::Tensor::from<float>(d, {2}, {3, 4});
  const spora_tensor_t* src[3] = {y.get(), stranger.get(), nullptr};
  spora_tensor_t* g[3] = {};
  expect_fails(spora_tape_gradient(a.get(), y.get(), nullptr, src, 2, g), SPORA_ERROR_INVALID_ARGUMENT,
               "source 1 is unknown to this tape");
  expect_fails(spora_tape_gradient(a.get(), y.get(), nullptr, src, 3, g), SPORA_ERROR_INVALID_ARGUMENT,
               "sources[2] is null");
  expect_fails(spora_tape_gradient(a.get(), stranger.get(), nullptr, src, 1, g), SPORA_ERROR_INVALID_ARGUMENT,
               "the target was not recorded on this tape");
  expect_fails(spora_tape_gradient(a.get(), n.get(), nullptr, src, 1, g), SPORA_ERROR_INVALID_ARGUMENT,
               "only float tensors are differentiable");
  const spora_tensor_t* ints[1] = {n.get()};
  a.watch(n);
  expect_fails(spora_tape_gradient(a.get(), y.get(), nullptr, ints, 1, g), SPORA_ERROR_INVALID_ARGUMENT,
               "source 0 is i64");
  auto wrong = spora::Tensor::from<float>(d, {3}, {1, 1, 1});
  expect_fails(spora_tape_gradient(a.get(), y.get(), wrong.get(), src, 1, g), SPORA_ERROR_INVALID_ARGUMENT,
               "sens is f32 (3,) but the target is f32 (2,)");
  expect_fails(spora_tape_gradient(nullptr, y.get(), nullptr, src, 1, g), SPORA_ERROR_INVALID_ARGUMENT,
               "[spora_tape_gradient] tape is null");
  expect_fails(spora_tape_gradient(a.get(), nullptr, nullptr, src, 1, g), SPORA_ERROR_INVALID_ARGUMENT,
               "target is null");
  expect_fails(spora_tape_gradient(a.get(), y.get(), nullptr, src, 1, nullptr), SPORA_ERROR_INVALID_ARGUMENT,
               "grads is null");
  expect_fails(spora_tape_gradient(a.get(), y.get(), nullptr, nullptr, 1, g), SPORA_ERROR_INVALID_ARGUMENT,
               "sources is null");
  for (auto* t : g) EXPECT_EQ(t, nullptr);  // nothing written on failure

  spora_graph_t* graph = nullptr;
  const spora_tensor_t* outs[1] = {stranger.get()};
  expect_fails(spora_tape_graph(a.get(), outs, 1, &graph), SPORA_ERROR_INVALID_ARGUMENT,
               "output 0 was neither produced nor used");
  expect_fails(spora_tape_graph(a.get(), outs, 1, nullptr), SPORA_ERROR_INVALID_ARGUMENT, "out is null");
  expect_fails(spora_tape_start(nullptr), SPORA_ERROR_INVALID_ARGUMENT, "tape is null");
  expect_fails(spora_tape_stop(nullptr), SPORA_ERROR_INVALID_ARGUMENT, "tape is null");
  expect_fails(spora_tape_watch(a.get(), nullptr), SPORA_ERROR_INVALID_ARGUMENT, "tensor is null");
  expect_fails(spora_tape_create(nullptr), SPORA_ERROR_INVALID_ARGUMENT, "out is null");
  EXPECT_EQ(spora_tape_free(nullptr), SPORA_OK);

  // An eager op's error names the caller's source line.
  auto m = spora::Tensor::from<float>(d, {2, 3}, std::vector<float>(6, 1.f));
  try {
    spora::call_at("model.py", 17, "matmul", {&m, &m});
    FAIL();
  } catch (const spora::Error& e) {
    EXPECT_NE(std::string(e.what()).find("[matmul] shapes (2,3) and (2,3) do not contract"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("(model.py:17)"), std::string::npos) << e.what();
  }
}

TEST(TapeErrors, FreeingAStartedTapeStopsIt) {
  auto d = ctx().device("cpu");
  auto x = spora::Tensor::from<float>(d, {2}, {1, 2});
  spora::Tape outer;
  outer.start();
  {
    spora::Tape inner;
    inner.start();
  }  // freed while started (innermost)
  spora_tape_t *middle = nullptr, *innermost = nullptr;
  ASSERT_EQ(spora_tape_create(&middle), SPORA_OK);
  ASSERT_EQ(spora_tape_create(&innermost), SPORA_OK);
  ASSERT_EQ(spora_tape_start(middle), SPORA_OK);
  ASSERT_EQ(spora_tape_start(innermost), SPORA_OK);
  EXPECT_EQ(spora_tape_free(middle), SPORA_OK);  // not the innermost: leaves the stack anyway
  EXPECT_EQ(spora_tape_stop(innermost), SPORA_OK);
  EXPECT_EQ(spora_tape_free(innermost), SPORA_OK);
  auto y = spora::op("exp", {&x});
  outer.stop();  // the innermost again
  EXPECT_EQ(outer.gradient(y, {&y})[0].read<float>(), (std::vector<float>{1, 1}));
  // A tape freed while started on another thread is dropped there.
  spora_tape_t* t = nullptr;
  ASSERT_EQ(spora_tape_create(&t), SPORA_OK);
  std::thread([&] {
    ASSERT_EQ(spora_tape_start(t), SPORA_OK);
    auto a = spora::op("exp", {&x});
    std::thread([&] { EXPECT_EQ(spora_tape_free(t), SPORA_OK); }).join();
    auto b = spora::op("exp", {&a});  // not recorded, no crash
    EXPECT_EQ(b.read<float>()[0], std::exp(std::exp(1.f)));
  }).join();
}

}  // namespace
