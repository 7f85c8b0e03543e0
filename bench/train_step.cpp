// One SGD-momentum training step of an MLP (784-512-512-10, batch 128) and
// a LeNet-style CNN (batch 64), built once as a graph through the C API:
// forward, cross-entropy loss, spora_graph_grad, momentum update. Runs it
// compiled (graph mode: optimised, planned kernels, one memory arena) and
// op by op (eager mode: spora_graph_run_eager, the same ops dispatched one
// at a time) on cpu. Prints samples/s and bytes: planned arena vs the sum of
// every tensor's bytes.
#include <spora/spora.h>

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

bool ok(spora_status_t s, const char* what) {
  if (s != SPORA_OK) std::fprintf(stderr, "%s: %s\n", what, spora_last_error());
  return s == SPORA_OK;
}
#define TRY(x) \
  if (!ok((x), #x)) return false

struct Model {
  spora_graph_t* g = nullptr;
  std::vector<spora_tensor_t*> params;  // bound in creation order
  std::vector<size_t> state_slots;      // params refreshed from outputs each step
  size_t num_outputs = 0;
  int batch = 0;
};

struct Builder {
  spora_graph_t* g;
  spora_device_t* dev;
  Model* m;
  std::mt19937 rng{0};
  std::vector<spora_value_t> weights, momenta;

  spora_value_t op(const char* name, std::vector<spora_value_t> in, spora_attrs_t* attrs = nullptr) {
    spora_value_t out[8];
    size_t n = 0;
    if (!ok(spora_graph_add_op(g, name, in.data(), in.size(), attrs, "train_step.cpp", __LINE__, out, 8, &n), name))
      std::exit(1);
    return out[0];
  }
  spora_tensor_t* tensor(spora_dtype_t dt, const std::vector<int64_t>& shape, float scale) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    spora_tensor_t* t = nullptr;
    if (dt == SPORA_DTYPE_I64) {
      std::vector<int64_t> v(n);
      for (auto& x : v) x = static_cast<int64_t>(rng() % 10);
      ok(spora_tensor_create(dev, dt, shape.data(), static_cast<int32_t>(shape.size()), v.data(), n * 8, &t), "t");
    } else {
      std::normal_distribution<float> nd(0, scale);
      std::vector<float> v(n);
      for (auto& x : v) x = scale == 0 ? 0 : nd(rng);
      ok(spora_tensor_create(dev, dt, shape.data(), static_cast<int32_t>(shape.size()), v.data(), n * 4, &t), "t");
    }
    return t;
  }
  spora_value_t input(const char* name, spora_dtype_t dt, const std::vector<int64_t>& shape) {
    spora_value_t v;
    ok(spora_graph_add_input(g, name, dt, shape.data(), static_cast<int32_t>(shape.size()), &v), name);
    m->params.push_back(tensor(dt, shape, 1.0f));
    return v;
  }
  spora_value_t weight(const std::string& name, const std::vector<int64_t>& shape, float scale) {
    spora_value_t v, mv;
    ok(spora_graph_add_weight(g, name.c_str(), SPORA_DTYPE_F32, shape.data(), static_cast<int32_t>(shape.size()), &v),
       "w");
    m->params.push_back(tensor(SPORA_DTYPE_F32, shape, scale));
    const std::string mom = name + ".momentum";
    ok(spora_graph_add_weight(g, mom.c_str(), SPORA_DTYPE_F32, shape.data(), static_cast<int32_t>(shape.size()), &mv),
       "m");
    m->params.push_back(tensor(SPORA_DTYPE_F32, shape, 0.0f));
    weights.push_back(v);
    momenta.push_back(mv);
    return v;
  }
};

spora_attrs_t* attrs_ints(const char* name, std::vector<int64_t> v) {
  spora_attrs_t* a;
  spora_attrs_create(&a);
  spora_attrs_set_ints(a, name, v.data(), v.size());
  return a;
}

// Appends loss, gradients and the momentum update; outputs: loss, new
// weights, new momenta.
bool finish(Builder& b, spora_value_t loss, spora_graph_t** out) {
  spora_value_t outs[1] = {loss};
  TRY(spora_graph_set_outputs(b.g, outs, 1));
  spora_graph_t* gg;
  TRY(spora_graph_grad(b.g, b.weights.data(), b.weights.size(), 0, &gg));
  std::vector<spora_value_t> go(1 + b.weights.size());
  size_t n;
  TRY(spora_graph_outputs(gg, go.data(), go.size(), &n));
  Builder u = b;
  u.g = gg;
  float lr = 0.01f, mu = 0.9f;
  spora_tensor_t *tlr, *tmu;
  const int64_t scalar[1] = {1};
  TRY(spora_tensor_create(b.dev, SPORA_DTYPE_F32, scalar, 0, &lr, 4, &tlr));
  TRY(spora_tensor_create(b.dev, SPORA_DTYPE_F32, scalar, 0, &mu, 4, &tmu));
  spora_value_t clr, cmu;
  TRY(spora_graph_add_constant(gg, tlr, &clr));
  TRY(spora_graph_add_constant(gg, tmu, &cmu));
  std::vector<spora_value_t> final_outs = {go[0]}, new_m;
  for (size_t i = 0; i < b.weights.size(); ++i) {
    const spora_value_t v = u.op("add", {u.op("mul", {b.momenta[i], cmu}), go[1 + i]});
    final_outs.push_back(u.op("sub", {b.weights[i], u.op("mul", {v, clr})}));
    new_m.push_back(v);
  }
  for (auto v : new_m) final_outs.push_back(v);
  TRY(spora_graph_set_outputs(gg, final_outs.data(), final_outs.size()));
  spora_tensor_free(tlr);
  spora_tensor_free(tmu);
  *out = gg;
  return true;
}

bool mlp(spora_device_t* dev, Model* m) {
  const int64_t B = 128;
  spora_graph_create("mlp", &m->g);
  Builder b{m->g, dev, m};
  m->batch = static_cast<int>(B);
  const spora_value_t x = b.input("x", SPORA_DTYPE_F32, {B, 784});
  const spora_value_t y = b.input("labels", SPORA_DTYPE_I64, {B});
  const int64_t sizes[4] = {784, 512, 512, 10};
  spora_value_t h = x;
  for (int l = 0; l < 3; ++l) {
    const spora_value_t w = b.weight("w" + std::to_string(l), {sizes[l + 1], sizes[l]}, 0.05f);
    const spora_value_t bias = b.weight("b" + std::to_string(l), {sizes[l + 1]}, 0.0f);
    h = b.op("linear", {h, w, bias});
    if (l < 2) h = b.op("relu", {h});
  }
  const spora_value_t loss = b.op("cross_entropy", {h, y});
  spora_graph_t* gg;
  if (!finish(b, loss, &gg)) return false;
  spora_graph_free(m->g);
  m->g = gg;
  return true;
}

bool lenet(spora_device_t* dev, Model* m) {
  const int64_t B = 64;
  spora_graph_create("lenet", &m->g);
  Builder b{m->g, dev, m};
  m->batch = static_cast<int>(B);
  const spora_value_t x = b.input("x", SPORA_DTYPE_F32, {B, 1, 28, 28});
  const spora_value_t y = b.input("labels", SPORA_DTYPE_I64, {B});
  spora_attrs_t* pad2 = attrs_ints("padding", {2, 2});
  spora_attrs_t* pool = attrs_ints("kernel_size", {2, 2});
  const spora_value_t c1 = b.op("relu", {b.op("conv2d_bias", {x, b.weight("c1", {6, 1, 5, 5}, 0.2f),
                                                               b.weight("c1b", {6}, 0.0f)}, pad2)});
  const spora_value_t p1 = b.op("max_pool2d", {c1}, pool);
  const spora_value_t c2 = b.op("relu", {b.op("conv2d_bias", {p1, b.weight("c2", {16, 6, 5, 5}, 0.1f),
                                                               b.weight("c2b", {16}, 0.0f)})});
  const spora_value_t p2 = b.op("max_pool2d", {c2}, pool);
  spora_attrs_t* flat = attrs_ints("shape", {B, 16 * 5 * 5});
  spora_value_t h = b.op("reshape", {p2}, flat);
  h = b.op("relu", {b.op("linear", {h, b.weight("f1", {120, 400}, 0.05f), b.weight("f1b", {120}, 0.0f)})});
  h = b.op("relu", {b.op("linear", {h, b.weight("f2", {84, 120}, 0.1f), b.weight("f2b", {84}, 0.0f)})});
  h = b.op("linear", {h, b.weight("f3", {10, 84}, 0.1f), b.weight("f3b", {10}, 0.0f)});
  const spora_value_t loss = b.op("cross_entropy", {h, y});
  spora_attrs_free(pad2);
  spora_attrs_free(pool);
  spora_attrs_free(flat);
  spora_graph_t* gg;
  if (!finish(b, loss, &gg)) return false;
  spora_graph_free(m->g);
  m->g = gg;
  return true;
}

// Samples/s of `step` (which trains in place), median of several runs.
double throughput(int batch, const std::function<bool()>& step, int iters) {
  for (int i = 0; i < 3; ++i)
    if (!step()) return 0;
  std::vector<double> rates;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i)
      if (!step()) return 0;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back(batch * iters / s);
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

void run(const char* name, spora_device_t* dev, bool (*build)(spora_device_t*, Model*), int iters) {
  Model m;
  if (!build(dev, &m)) return;
  size_t nout;
  spora_graph_outputs(m.g, nullptr, 0, &nout);
  // Weights and momenta follow the two inputs, in pairs; the outputs are
  // loss, new weights, new momenta.
  const size_t nw = (m.params.size() - 2) / 2;
  auto step_with = [&](auto&& run_fn) {
    std::vector<spora_tensor_t*> outs(nout);
    if (!run_fn(outs.data())) return false;
    for (size_t i = 0; i < nw; ++i) {
      std::swap(m.params[2 + 2 * i], outs[1 + i]);
      std::swap(m.params[3 + 2 * i], outs[1 + nw + i]);
    }
    for (auto* t : outs) spora_tensor_free(t);
    return true;
  };
  spora_graph_t* opt;
  const char* json;
  spora_graph_to_json(m.g, &json);
  std::string text(json);
  spora_graph_from_json(text.data(), text.size(), &opt);
  if (!ok(spora_graph_optimize(opt, std::getenv("OPT") ? std::atoi(std::getenv("OPT")) : 1), "optimize")) return;
  spora_executable_t* exe;
  if (!ok(spora_graph_compile(opt, dev, &exe), "compile")) return;
  const double graph = throughput(m.batch, [&] {
    return step_with([&](spora_tensor_t** o) {
      return ok(spora_executable_run(exe, m.params.data(), m.params.size(), o, nout), "run");
    });
  }, iters);
  const double eager = throughput(m.batch, [&] {
    return step_with([&](spora_tensor_t** o) {
      return ok(spora_graph_run_eager(m.g, dev, m.params.data(), m.params.size(), o, nout), "eager");
    });
  }, iters);
  uint64_t planned = 0, naive = 0;
  spora_executable_memory(exe, &planned, &naive);
  std::printf("  %-6s graph %9.0f samples/s   eager %9.0f samples/s   graph/eager %.2f   "
              "arena %6.1f MB vs %6.1f MB naive (%.2f)\n",
              name, graph, eager, graph / eager, planned / 1e6, naive / 1e6, static_cast<double>(planned) / naive);
  spora_executable_free(exe);
  spora_graph_free(opt);
  spora_graph_free(m.g);
  for (auto* t : m.params) spora_tensor_free(t);
}

}  // namespace

int main() {
  spora_context_t* ctx;
  spora_device_t* cpu;
  if (!ok(spora_context_create(&ctx), "ctx") || !ok(spora_device_find(ctx, "cpu", &cpu), "cpu")) return 1;
  std::printf("training step on cpu (SGD momentum, f32); goals: graph >= 1.3x eager, arena <= 0.5x naive\n");
  // The instruction set the cpu plugin's kernels run on (oneDNN's, lowered
  // by ONEDNN_MAX_CPU_ISA): figures from different ones do not compare.
  size_t nprops = 0;
  spora_device_property_count(cpu, &nprops);
  for (size_t i = 0; i < nprops; ++i) {
    const char *k = nullptr, *v = nullptr;
    if (spora_device_property_at(cpu, i, &k, &v) == SPORA_OK && std::string(k) == "arch")
      std::printf("cpu arch %s%s%s\n", v, std::getenv("ONEDNN_MAX_CPU_ISA") ? ", ONEDNN_MAX_CPU_ISA=" : "",
                  std::getenv("ONEDNN_MAX_CPU_ISA") ? std::getenv("ONEDNN_MAX_CPU_ISA") : "");
  }
  run("mlp", cpu, mlp, 20);
  run("lenet", cpu, lenet, 10);
  spora_context_free(ctx);
  return 0;
}
