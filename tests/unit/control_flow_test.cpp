// Control flow in graphs: if and while nodes built, verified, serialised,
// run compiled and eagerly on every device, and differentiated (against
// float64 finite differences).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "autodiff/grad.h"
#include "ir_test_util.h"
#include "ir/printer.h"
#include "ir/serialize.h"
#include "ir/verifier.h"
#include "runtime/context.h"
#include "runtime/device.h"
#include "runtime/interpreter.h"
#include "sched/executor.h"
#include "support/error.h"

namespace spora {
namespace {

Context& ctx() {
  static Context* c = [] {
    auto* c = new Context;
    c->add_plugin_path(SPORA_TEST_PLUGIN_DIR);
    return c;
  }();
  return *c;
}

template <class T>
Tensor make(Device* d, DType dt, const Shape& s, const std::vector<T>& v) {
  return tensor_from_host(d, dt, s, v.data(), v.size() * sizeof(T));
}
Tensor f32(Device* d, const Shape& s, const std::vector<float>& v) { return make(d, SPORA_DTYPE_F32, s, v); }
Tensor f64(Device* d, const Shape& s, const std::vector<double>& v) { return make(d, SPORA_DTYPE_F64, s, v); }
Tensor flag(Device* d, bool b) {
  return make(d, SPORA_DTYPE_BOOL, Shape(), std::vector<uint8_t>{b ? uint8_t{1} : uint8_t{0}});
}

template <class T>
std::vector<T> read(const Tensor& t) {
  std::vector<T> v(static_cast<size_t>(t.shape.numel()));
  tensor_read(t, v.data(), v.size() * sizeof(T));
  return v;
}

ir::Value op(ir::Graph& g, const char* name, std::vector<ir::Value> in, int line = 0) {
  return g.add_op(name, in, {}, {"model.py", line})[0];
}
ir::Value scalar(ir::Graph& g, DType dt, double v) {
  std::vector<uint8_t> b(dtype_size(dt));
  if (dt == SPORA_DTYPE_F32) {
    const float f = static_cast<float>(v);
    std::memcpy(b.data(), &f, 4);
  } else if (dt == SPORA_DTYPE_F64) {
    std::memcpy(b.data(), &v, 8);
  } else if (dt == SPORA_DTYPE_I64) {
    const int64_t i = static_cast<int64_t>(v);
    std::memcpy(b.data(), &i, 8);
  } else {
    b[0] = v != 0;
  }
  return g.add_constant(dt, Shape(), b);
}

// Runs compiled and eagerly; both must agree.
std::vector<Tensor> run_both(const ir::Graph& g, Device* d, const std::vector<const Tensor*>& params) {
  sched::Executable exe(g, d);
  auto a = exe.run(params);
  auto b = run_eager(g, d, params);
  EXPECT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].dtype, b[i].dtype);
    EXPECT_EQ(a[i].shape, b[i].shape);
    std::vector<uint8_t> x(a[i].nbytes()), y(b[i].nbytes());
    tensor_read(a[i], x.data(), x.size());
    tensor_read(b[i], y.data(), y.size());
    EXPECT_EQ(x, y) << "output " << i << " differs between compiled and eager";
  }
  return a;
}

// then: (x*2, sum(x)); else: (x-1, max(x)).
ir::Graph if_graph(DType dt = SPORA_DTYPE_F32) {
  ir::Graph then_g("then"), else_g("else");
  auto tx = then_g.add_input("x", dt, S({4}));
  then_g.set_outputs({op(then_g, "mul", {tx, scalar(then_g, dt, 2)}), op(then_g, "sum", {tx})});
  auto ex = else_g.add_input("x", dt, S({4}));
  else_g.set_outputs({op(else_g, "sub", {ex, scalar(else_g, dt, 1)}), op(else_g, "max", {ex})});
  ir::Graph g("if");
  auto c = g.add_input("c", SPORA_DTYPE_BOOL, Shape());
  auto x = g.add_input("x", dt, S({4}));
  auto r = g.add_if(c, then_g, else_g, {x}, {"model.py", 3});
  g.set_outputs({r[0], op(g, "neg", {r[1]})});
  return g;
}

// x*2 until sum(x) > 100, counting the iterations.
ir::Graph doubling_while() {
  ir::Graph cond("cond"), body("body");
  auto cx = cond.add_input("x", SPORA_DTYPE_F32, S({3}));
  cond.add_input("n", SPORA_DTYPE_I64, Shape());
  cond.set_outputs({op(cond, "less_equal", {op(cond, "sum", {cx}), scalar(cond, SPORA_DTYPE_F32, 100)})});
  auto bx = body.add_input("x", SPORA_DTYPE_F32, S({3}));
  auto bn = body.add_input("n", SPORA_DTYPE_I64, Shape());
  body.set_outputs({op(body, "mul", {bx, scalar(body, SPORA_DTYPE_F32, 2)}),
                    op(body, "add", {bn, scalar(body, SPORA_DTYPE_I64, 1)})});
  ir::Graph g("loop");
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({3}));
  auto r = g.add_while(cond, body, {x, scalar(g, SPORA_DTYPE_I64, 0)}, {"model.py", 7});
  g.set_outputs({r[0], r[1]});
  return g;
}

class ControlFlow : public ::testing::TestWithParam<std::string> {
 protected:
  Device* dev() { return ctx().find_device(GetParam()); }
};

TEST_P(ControlFlow, IfRunsTheChosenBranch) {
  Device* d = dev();
  const ir::Graph g = if_graph();
  Tensor x = f32(d, S({4}), {1, -2, 3, 0.5f});
  for (bool c : {true, false}) {
    Tensor ct = flag(d, c);
    auto out = run_both(g, d, {&ct, &x});
    if (c) {
      EXPECT_EQ(read<float>(out[0]), (std::vector<float>{2, -4, 6, 1}));
      EXPECT_EQ(read<float>(out[1]), (std::vector<float>{-2.5f}));
    } else {
      EXPECT_EQ(read<float>(out[0]), (std::vector<float>{0, -3, 2, -0.5f}));
      EXPECT_EQ(read<float>(out[1]), (std::vector<float>{-3}));
    }
  }
}

TEST_P(ControlFlow, WhileLoopsUntilTheConditionFails) {
  Device* d = dev();
  const ir::Graph g = doubling_while();
  sched::Executable exe(g, d);
  for (auto start : std::vector<std::vector<float>>{{1, 2, 3}, {50, 60, 0}, {0.25f, 0, 0}}) {
    std::vector<float> want = start;
    int64_t n = 0;
    while (want[0] + want[1] + want[2] <= 100) {
      for (float& v : want) v *= 2;
      ++n;
    }
    Tensor x = f32(d, S({3}), start);
    auto out = run_both(g, d, {&x});
    EXPECT_EQ(read<float>(out[0]), want);
    EXPECT_EQ(read<int64_t>(out[1]), (std::vector<int64_t>{n}));
    auto again = exe.run({&x});  // the cached nested plans run again
    EXPECT_EQ(read<float>(again[0]), want);
  }
}

TEST_P(ControlFlow, NestedControlFlow) {
  // while i < 6: x = sum(x) > 10 ? x - 3 : x * 2, with an if inside the
  // loop body and a (one-trip) while computing x + x inside its else branch.
  Device* d = dev();
  const DType F = SPORA_DTYPE_F32, I = SPORA_DTYPE_I64;
  // Inner while (in the else branch): y, k -> while k < 1: (y + y, k + 1).
  ir::Graph icond("icond"), ibody("ibody");
  {
    icond.add_input("y", F, S({2}));
    auto k = icond.add_input("k", I, Shape());
    icond.set_outputs({op(icond, "less", {k, scalar(icond, I, 1)})});
    auto y = ibody.add_input("y", F, S({2}));
    auto k2 = ibody.add_input("k", I, Shape());
    ibody.set_outputs({op(ibody, "add", {y, y}), op(ibody, "add", {k2, scalar(ibody, I, 1)})});
  }
  ir::Graph then_g("then"), else_g("else");
  {
    auto x = then_g.add_input("x", F, S({2}));
    then_g.set_outputs({op(then_g, "sub", {x, scalar(then_g, F, 3)})});
    auto y = else_g.add_input("x", F, S({2}));
    else_g.set_outputs({else_g.add_while(icond, ibody, {y, scalar(else_g, I, 0)}, {"model.py", 30})[0]});
  }
  ir::Graph cond("cond"), body("body");
  {
    cond.add_input("x", F, S({2}));
    auto i = cond.add_input("i", I, Shape());
    cond.set_outputs({op(cond, "less", {i, scalar(cond, I, 6)})});
    auto x = body.add_input("x", F, S({2}));
    auto i2 = body.add_input("i", I, Shape());
    auto big = op(body, "greater", {op(body, "sum", {x}), scalar(body, F, 10)});
    auto nx = body.add_if(big, then_g, else_g, {x}, {"model.py", 20})[0];
    body.set_outputs({nx, op(body, "add", {i2, scalar(body, I, 1)})});
  }
  ir::Graph g("nested");
  auto x = g.add_input("x", F, S({2}));
  auto r = g.add_while(cond, body, {x, scalar(g, I, 0)}, {"model.py", 10});
  g.set_outputs({r[0]});
  std::vector<float> want = {1, 2};
  for (int i = 0; i < 6; ++i) {
    const bool big = want[0] + want[1] > 10;
    for (float& v : want) v = big ? v - 3 : v * 2;
  }
  Tensor xt = f32(d, S({2}), {1, 2});
  EXPECT_EQ(read<float>(run_both(g, d, {&xt})[0]), want);
  // The JSON round trip keeps every level.
  const std::string j = ir::to_json(g);
  const ir::Graph back = ir::from_json(j);
  EXPECT_EQ(ir::to_json(back), j);
  EXPECT_EQ(read<float>(run_both(back, d, {&xt})[0]), want);
}

TEST_P(ControlFlow, RunawayLoopsAreStoppedNamingTheNode) {
  Device* d = dev();
  ir::Graph cond("cond"), body("body");
  cond.add_input("x", SPORA_DTYPE_F32, S({1}));
  cond.set_outputs({scalar(cond, SPORA_DTYPE_BOOL, 1)});
  auto bx = body.add_input("x", SPORA_DTYPE_F32, S({1}));
  body.set_outputs({op(body, "add", {bx, scalar(body, SPORA_DTYPE_F32, 1)})});
  ir::Graph g;
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({1}));
  g.set_outputs({g.add_while(cond, body, {x}, {"model.py", 42})[0]});
  Tensor xt = f32(d, S({1}), {0});
  setenv("SPORA_MAX_WHILE_ITERATIONS", "50", 1);
  sched::Executable exe(g, d);
  for (int eager = 0; eager < 2; ++eager) {
    try {
      if (eager) {
        run_eager(g, d, {&xt});
      } else {
        exe.run({&xt});
      }
      ADD_FAILURE() << "the loop was not stopped";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::kAborted);
      EXPECT_STREQ(e.what(),
                   "[while] loop still running after 50 iterations (the limit set by SPORA_MAX_WHILE_ITERATIONS); "
                   "raise the limit or check the loop condition (model.py:42)");
    }
  }
  setenv("SPORA_MAX_WHILE_ITERATIONS", "banana", 1);
  EXPECT_THROW(exe.run({&xt}), Error);
  unsetenv("SPORA_MAX_WHILE_ITERATIONS");
  EXPECT_EQ(max_while_iterations(), 1000000);
}

// Central differences of output `out` (summed) w.r.t. param `p` (f64).
std::vector<double> numeric_grad(const ir::Graph& g, Device* d, std::vector<std::vector<double>> params,
                                 const std::vector<Shape>& shapes, size_t p, size_t out, double h = 1e-6) {
  sched::Executable exe(g, d);
  auto f = [&](const std::vector<std::vector<double>>& ps) {
    std::vector<Tensor> ts;
    std::vector<const Tensor*> ptrs;
    for (size_t i = 0; i < ps.size(); ++i) ts.push_back(f64(d, shapes[i], ps[i]));
    for (auto& t : ts) ptrs.push_back(&t);
    double s = 0;
    for (double v : read<double>(exe.run(ptrs)[out])) s += v;
    return s;
  };
  std::vector<double> gr(params[p].size());
  for (size_t i = 0; i < gr.size(); ++i) {
    auto plus = params, minus = params;
    plus[p][i] += h;
    minus[p][i] -= h;
    gr[i] = (f(plus) - f(minus)) / (2 * h);
  }
  return gr;
}

std::vector<Tensor> bind_run(const ir::Graph& g, Device* d, const std::vector<std::vector<double>>& params,
                             const std::vector<Shape>& shapes) {
  std::vector<Tensor> ts;
  std::vector<const Tensor*> ptrs;
  for (size_t i = 0; i < params.size(); ++i) ts.push_back(f64(d, shapes[i], params[i]));
  for (auto& t : ts) ptrs.push_back(&t);
  return run_both(g, d, ptrs);
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want, double tol, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << what << "[" << i << "]";
}

TEST_P(ControlFlow, GradientOfIfMatchesFiniteDifferences) {
  Device* d = dev();
  const DType F = SPORA_DTYPE_F64;
  // y = sum(x) > 0 ? x*x*w : sin(x)*w + w   (branch inputs: x, w)
  ir::Graph then_g("then"), else_g("else");
  {
    auto x = then_g.add_input("x", F, S({3}));
    auto w = then_g.add_input("w", F, S({3}));
    then_g.set_outputs({op(then_g, "mul", {op(then_g, "mul", {x, x}), w})});
    auto ex = else_g.add_input("x", F, S({3}));
    auto ew = else_g.add_input("w", F, S({3}));
    else_g.set_outputs({op(else_g, "add", {op(else_g, "mul", {op(else_g, "sin", {ex}), ew}), ew})});
  }
  ir::Graph g("f");
  auto x = g.add_input("x", F, S({3}));
  auto w = g.add_weight("w", F, S({3}));
  auto c = op(g, "greater", {op(g, "sum", {x}), scalar(g, F, 0)});
  auto y = g.add_if(c, then_g, else_g, {x, w}, {"model.py", 5})[0];
  g.set_outputs({op(g, "exp", {op(g, "mul", {y, scalar(g, F, 0.5)})})});
  const ir::Graph dg = autodiff::value_and_grad(g, {x.node, w.node}, 0);
  ir::verify(dg);
  EXPECT_NE(ir::to_text(dg).find("if("), std::string::npos) << ir::to_text(dg);
  const std::vector<Shape> shapes = {S({3}), S({3})};
  for (auto xv : std::vector<std::vector<double>>{{0.3, -0.2, 0.7}, {-0.3, 0.1, -0.5}}) {
    const std::vector<std::vector<double>> ps = {xv, {0.5, -1.5, 2.0}};
    auto out = bind_run(dg, d, ps, shapes);
    expect_near(read<double>(out[1]), numeric_grad(g, d, ps, shapes, 0, 0), 1e-6, "dx");
    expect_near(read<double>(out[2]), numeric_grad(g, d, ps, shapes, 1, 0), 1e-6, "dw");
  }
  // The gradient graph serialises like any other.
  EXPECT_EQ(ir::to_json(ir::from_json(ir::to_json(dg))), ir::to_json(dg));
}

TEST_P(ControlFlow, SecondOrderThroughIfByReapplication) {
  Device* d = dev();
  const DType F = SPORA_DTYPE_F64;
  // f(x) = x > 0 ? x^3 : sin(x); f'' = 6x or -sin(x).
  ir::Graph then_g("then"), else_g("else");
  auto tx = then_g.add_input("x", F, Shape());
  then_g.set_outputs({op(then_g, "mul", {op(then_g, "mul", {tx, tx}), tx})});
  auto ex = else_g.add_input("x", F, Shape());
  else_g.set_outputs({op(else_g, "sin", {ex})});
  ir::Graph g("f");
  auto x = g.add_input("x", F, Shape());
  auto y = g.add_if(op(g, "greater", {x, scalar(g, F, 0)}), then_g, else_g, {x}, {"model.py", 9})[0];
  g.set_outputs({y});
  const ir::Graph g1 = autodiff::value_and_grad(g, {x.node}, 0);
  const ir::Graph g2 = autodiff::value_and_grad(g1, {x.node}, 1);
  for (double xv : {0.7, -0.4}) {
    auto out = bind_run(g2, d, {{xv}}, {Shape()});
    ASSERT_EQ(out.size(), 3u);
    EXPECT_NEAR(read<double>(out[1])[0], xv > 0 ? 3 * xv * xv : std::cos(xv), 1e-12);
    EXPECT_NEAR(read<double>(out[2])[0], xv > 0 ? 6 * xv : -std::sin(xv), 1e-12);
  }
}

TEST_P(ControlFlow, GradientOfWhileMatchesFiniteDifferences) {
  Device* d = dev();
  const DType F = SPORA_DTYPE_F64, I = SPORA_DTYPE_I64;
  // (x, w, i): while i < 4: x = sin(x) * w + x; i += 1. Output sum(x * x).
  ir::Graph cond("cond"), body("body");
  cond.add_input("x", F, S({2}));
  cond.add_input("w", F, S({2}));
  auto ci = cond.add_input("i", I, Shape());
  cond.set_outputs({op(cond, "less", {ci, scalar(cond, I, 4)})});
  auto bx = body.add_input("x", F, S({2}));
  auto bw = body.add_input("w", F, S({2}));
  auto bi = body.add_input("i", I, Shape());
  body.set_outputs({op(body, "add", {op(body, "mul", {op(body, "sin", {bx}), bw}), bx}), bw,
                    op(body, "add", {bi, scalar(body, I, 1)})});
  ir::Graph g("f");
  auto x = g.add_input("x", F, S({2}));
  auto w = g.add_input("w", F, S({2}));
  auto r = g.add_while(cond, body, {x, w, scalar(g, I, 0)}, {"model.py", 11});
  g.set_outputs({op(g, "sum", {op(g, "mul", {r[0], r[0]})})});
  const ir::Graph dg = autodiff::value_and_grad(g, {x.node, w.node}, 0);
  ir::verify(dg);
  const std::vector<Shape> shapes = {S({2}), S({2})};
  const std::vector<std::vector<double>> ps = {{0.3, -0.8}, {0.9, 0.4}};
  auto out = bind_run(dg, d, ps, shapes);
  expect_near(read<double>(out[1]), numeric_grad(g, d, ps, shapes, 0, 0), 1e-6, "dx");
  expect_near(read<double>(out[2]), numeric_grad(g, d, ps, shapes, 1, 0), 1e-6, "dw");
  // Data-dependent trip count: x * 2 until sum(x) > 100 gives d sum(x) / dx = 2^N.
  ir::Graph c2("cond"), b2("body");
  auto c2x = c2.add_input("x", F, S({3}));
  c2.set_outputs({op(c2, "less_equal", {op(c2, "sum", {c2x}), scalar(c2, F, 100)})});
  auto b2x = b2.add_input("x", F, S({3}));
  b2.set_outputs({op(b2, "mul", {b2x, scalar(b2, F, 2)})});
  ir::Graph h("h");
  auto hx = h.add_input("x", F, S({3}));
  h.set_outputs({h.add_while(c2, b2, {hx}, {"model.py", 12})[0]});
  const ir::Graph dh = autodiff::value_and_grad(h, {hx.node}, 0);
  auto hout = bind_run(dh, d, {{1, 2, 3}}, {S({3})});
  // 6 -> 12 -> 24 -> 48 -> 96 -> 192: five doublings.
  EXPECT_EQ(read<double>(hout[0]), (std::vector<double>{32, 64, 96}));
  EXPECT_EQ(read<double>(hout[1]), (std::vector<double>{32, 32, 32}));
}

TEST(ControlFlowBuild, TypeMismatchesNameTheNodeAndTheLine) {
  const DType F = SPORA_DTYPE_F32;
  auto expect_error = [](auto&& fn, const std::string& want) {
    try {
      fn();
      ADD_FAILURE() << "accepted; wanted: " << want;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::kInvalidArgument);
      EXPECT_EQ(std::string(e.what()), want);
    }
  };
  ir::Graph then_g("then");
  auto tx = then_g.add_input("x", F, S({3}));
  then_g.set_outputs({tx});
  ir::Graph else64("else64");
  auto e64 = else64.add_input("x", F, S({3}));
  Attrs to64;
  to64.set("dtype", AttrValue::of_string("f64"));
  else64.set_outputs({else64.add_op("cast", {e64}, to64)[0]});
  ir::Graph g;
  auto c = g.add_input("c", SPORA_DTYPE_BOOL, Shape());
  auto x = g.add_input("x", F, S({3}));
  auto y = g.add_input("y", F, S({4}));
  expect_error([&] { g.add_if(c, then_g, else64, {x}, {"model.py", 3}); },
               "[if] output 0 is f32 (3,) in the then graph but f64 (3,) in the else graph (model.py:3)");
  expect_error([&] { g.add_if(x, then_g, then_g, {x}, {"model.py", 4}); },
               "[if] the condition must be a bool scalar, got f32 (3,) (model.py:4)");
  expect_error([&] { g.add_if(c, then_g, then_g, {y}, {"model.py", 5}); },
               "[if] then graph 'then' input 0 ('x') is f32 (3,), the node passes f32 (4,) (model.py:5)");
  expect_error([&] { g.add_if(c, then_g, then_g, {x, y}, {"model.py", 6}); },
               "[if] then graph 'then' takes 1 inputs, the node passes 2 (model.py:6)");
  ir::Graph cond("cond"), body("body");
  auto cx = cond.add_input("x", F, S({3}));
  cond.set_outputs({op(cond, "sum", {cx})});
  auto bx = body.add_input("x", F, S({3}));
  body.set_outputs({bx});
  expect_error([&] { g.add_while(cond, body, {x}, {"model.py", 7}); },
               "[while] the cond graph must return one bool scalar, it returns f32 () (model.py:7)");
  ir::Graph cond_ok("cond"), body64("body");
  auto cox = cond_ok.add_input("x", F, S({3}));
  cond_ok.set_outputs({op(cond_ok, "greater", {op(cond_ok, "sum", {cox}), scalar(cond_ok, F, 0)})});
  auto b64 = body64.add_input("x", F, S({3}));
  body64.set_outputs({body64.add_op("cast", {b64}, to64)[0]});
  expect_error([&] { g.add_while(cond_ok, body64, {x}, {"model.py", 8}); },
               "[while] loop-carried value 0 is f32 (3,) but the body graph returns f64 (3,) for it (model.py:8)");
  expect_error([&] { g.add_while(cond_ok, body, {y}, {"model.py", 9}); },
               "[while] cond graph 'cond' input 0 ('x') is f32 (3,), the node passes f32 (4,) (model.py:9)");
  ir::Graph with_weight("w");
  auto wx = with_weight.add_input("x", F, S({3}));
  auto ww = with_weight.add_weight("w", F, S({3}));
  with_weight.set_outputs({op(with_weight, "mul", {wx, ww})});
  expect_error([&] { g.add_if(c, with_weight, with_weight, {x}, {"model.py", 10}); },
               "[if] then graph 'w' has weight 'w'; sub-graphs take only inputs (pass the weight in as an input) "
               "(model.py:10)");
  // Nothing was added by the failed calls.
  EXPECT_EQ(g.nodes().size(), 3u);
  // The verifier catches hand-made nodes whose sub-graph inputs disagree.
  auto ok = g.add_if(c, then_g, then_g, {x}, {"model.py", 11});
  g.set_outputs(ok);
  ir::Graph bad = g;
  ir::Node& n = bad.mutable_node(ok[0].node);
  n.inputs[1] = y;
  EXPECT_THROW(ir::verify(bad), Error);
}

INSTANTIATE_TEST_SUITE_P(Devices, ControlFlow, ::testing::Values("cpu", "sim"));

}  // namespace
}  // namespace spora
