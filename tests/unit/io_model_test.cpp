// Model files: save, load and run against the original graph on every
// device, control flow, mismatches and damaged files, the C API; and the
// JSON round-trip check of issue 4.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

#include "autodiff/grad.h"
#include "io/checkpoint.h"
#include "io/model.h"
#include "io/safetensors.h"
#include "io_test_util.h"
#include "ir/serialize.h"
#include "passes/pass.h"
#include "runtime/interpreter.h"
#include "sched/executor.h"
#include "support/error.h"

namespace spora {
namespace {

using iotest::TempDir;

Shape S(std::initializer_list<int64_t> d) {
  std::vector<int64_t> v(d);
  return Shape::from(v.data(), static_cast<int32_t>(v.size()), "test");
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

Tensor rand_f32(Device* d, const Shape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  std::vector<float> v(static_cast<size_t>(s.numel()));
  for (auto& x : v) x = nd(rng);
  return tensor_from_host(d, SPORA_DTYPE_F32, s, v.data(), v.size() * 4);
}

std::vector<float> values(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.shape.numel()));
  tensor_read(t, v.data(), v.size() * 4);
  return v;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-5f * (1 + std::fabs(want[i]))) << what << "[" << i << "]";
}

// Inputs and weights interleaved, to check that the model binds them right:
// out0 = softmax(relu(x @ w1^T + b1) @ w2^T + b2) * scale, out1 = relu(..).
ir::Graph mlp() {
  ir::Graph g("mlp");
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({4, 8}));
  auto w1 = g.add_weight("fc1.weight", SPORA_DTYPE_F32, S({16, 8}));
  auto b1 = g.add_weight("fc1.bias", SPORA_DTYPE_F32, S({16}));
  auto scale = g.add_input("scale", SPORA_DTYPE_F32, S({4, 3}));
  auto w2 = g.add_weight("fc2.weight", SPORA_DTYPE_F32, S({3, 16}));
  auto b2 = g.add_weight("fc2.bias", SPORA_DTYPE_F32, S({3}));
  auto h = g.add_op("relu", {g.add_op("linear", {x, w1, b1}, {}, {"model.py", 10})[0]}, {}, {"model.py", 11})[0];
  auto l = g.add_op("linear", {h, w2, b2}, {}, {"model.py", 12})[0];
  auto y = g.add_op("mul", {g.add_op("softmax", {l}, {}, {"model.py", 13})[0], scale}, {}, {"model.py", 14})[0];
  g.set_outputs({y, h});
  return g;
}

struct MlpData {
  Tensor x, scale, w1, b1, w2, b2;
  explicit MlpData(Device* d)
      : x(rand_f32(d, S({4, 8}), 1)), scale(rand_f32(d, S({4, 3}), 2)), w1(rand_f32(d, S({16, 8}), 3)),
        b1(rand_f32(d, S({16}), 4)), w2(rand_f32(d, S({3, 16}), 5)), b2(rand_f32(d, S({3}), 6)) {}
  std::vector<const Tensor*> weights() const { return {&w1, &b1, &w2, &b2}; }
  std::vector<const Tensor*> params() const { return {&x, &w1, &b1, &scale, &w2, &b2}; }
};

class ModelFile : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelFile, LoadedModelRunsLikeTheOriginalGraph) {
  Device* dev = iotest::device(GetParam());
  TempDir dir;
  const ir::Graph g = mlp();
  const MlpData data(dev);
  io::save_model(dir.file("mlp.spora"), g, data.weights());

  sched::Executable exe(g, dev);
  const std::vector<Tensor> want = exe.run(data.params());
  const std::vector<Tensor> want_eager = run_eager(g, dev, data.params());

  io::Model m(dir.file("mlp.spora"), dev);
  EXPECT_EQ(ir::to_json(m.graph()), ir::to_json(g)) << "the graph comes back as saved";
  {
    // A model file is also a checkpoint of its weights.
    io::Checkpoint c(dir.file("mlp.spora"));
    EXPECT_EQ(c.entries().size(), 4u);
    EXPECT_EQ(values(c.read("fc2.weight", dev)), values(data.w2));
  }
  ASSERT_EQ(m.inputs().size(), 2u);
  EXPECT_EQ(m.graph().node(m.inputs()[0]).name, "x");
  EXPECT_EQ(m.graph().node(m.inputs()[1]).name, "scale");
  for (int rep = 0; rep < 2; ++rep) {  // the second run reuses the compiled plan
    const std::vector<Tensor> got = m.run({&data.x, &data.scale});
    ASSERT_EQ(got.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(got[i].device(), dev);
      expect_close(values(got[i]), values(want[i]), "vs compiled graph");
      expect_close(values(got[i]), values(want_eager[i]), "vs eager graph");
    }
  }
  // Inputs on another device are copied to the model's.
  Device* other = iotest::device(GetParam() == "cpu" ? "sim" : "cpu");
  const Tensor x2 = tensor_to(data.x, other), s2 = tensor_to(data.scale, other);
  expect_close(values(m.run({&x2, &s2})[0]), values(want[0]), "inputs from another device");

  // Wrong inputs name the input.
  EXPECT_NE(error_of([&] { m.run({&data.x}); }).find("takes 2 inputs, got 1"), std::string::npos);
  // Swapped inputs have the right ranks: the first op that cannot take them
  // is named, with its line.
  const std::string swapped = error_of([&] { m.run({&data.scale, &data.x}); });
  EXPECT_NE(swapped.find("[linear"), std::string::npos) << swapped;
  EXPECT_NE(swapped.find("model.py:10"), std::string::npos) << swapped;
  EXPECT_NE(error_of([&] { m.run({&data.x, nullptr}); }).find("input 'scale' is null"), std::string::npos);
}

// A model with a while loop (sub-graphs travel in the graph JSON).
TEST_P(ModelFile, ControlFlowModel) {
  Device* dev = iotest::device(GetParam());
  TempDir dir;
  const DType F = SPORA_DTYPE_F32, I = SPORA_DTYPE_I64;
  auto scalar_i64 = [](ir::Graph& g, int64_t v) {
    std::vector<uint8_t> b(8);
    std::memcpy(b.data(), &v, 8);
    return g.add_constant(I, Shape(), b);
  };
  // while i < 3: x = tanh(x) * w + x; i += 1
  ir::Graph cond("cond"), body("body");
  cond.add_input("x", F, S({5}));
  cond.add_input("w", F, S({5}));
  auto ci = cond.add_input("i", I, Shape());
  cond.set_outputs({cond.add_op("less", {ci, scalar_i64(cond, 3)}, {})[0]});
  auto bx = body.add_input("x", F, S({5}));
  auto bw = body.add_input("w", F, S({5}));
  auto bi = body.add_input("i", I, Shape());
  auto t = body.add_op("mul", {body.add_op("tanh", {bx}, {})[0], bw}, {})[0];
  body.set_outputs({body.add_op("add", {t, bx}, {})[0], bw, body.add_op("add", {bi, scalar_i64(body, 1)}, {})[0]});
  ir::Graph g("loop");
  auto x = g.add_input("x", F, S({5}));
  auto w = g.add_weight("w", F, S({5}));
  auto r = g.add_while(cond, body, {x, w, scalar_i64(g, 0)}, {"model.py", 3});
  g.set_outputs({r[0]});
  const Tensor xv = rand_f32(dev, S({5}), 7), wv = rand_f32(dev, S({5}), 8);
  io::save_model(dir.file("loop.spora"), g, {&wv});
  io::Model m(dir.file("loop.spora"), dev);
  const auto got = values(m.run({&xv})[0]);
  // numpy-style reference on the host.
  std::vector<float> hx = values(xv), hw = values(wv);
  for (int i = 0; i < 3; ++i)
    for (size_t k = 0; k < 5; ++k) hx[k] = std::tanh(hx[k]) * hw[k] + hx[k];
  expect_close(got, hx, "while model");
}

// A classifier exported at batch 8: logits = relu(x @ w1^T + b1) @ w2^T + b2.
ir::Graph classifier(int64_t batch) {
  ir::Graph g("classifier");
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({batch, 6}));
  auto w1 = g.add_weight("fc1.weight", SPORA_DTYPE_F32, S({10, 6}));
  auto b1 = g.add_weight("fc1.bias", SPORA_DTYPE_F32, S({10}));
  auto w2 = g.add_weight("fc2.weight", SPORA_DTYPE_F32, S({4, 10}));
  auto b2 = g.add_weight("fc2.bias", SPORA_DTYPE_F32, S({4}));
  auto h = g.add_op("relu", {g.add_op("linear", {x, w1, b1}, {}, {"model.py", 20})[0]}, {}, {"model.py", 21})[0];
  g.set_outputs({g.add_op("softmax", {g.add_op("linear", {h, w2, b2}, {}, {"model.py", 22})[0]}, {},
                          {"model.py", 23})[0]});
  return g;
}

// The host reference of classifier(): row r of x (6 wide) to 4 probabilities.
std::vector<float> classify_ref(const std::vector<float>& x, const std::vector<float>& w1,
                                const std::vector<float>& b1, const std::vector<float>& w2,
                                const std::vector<float>& b2, size_t rows) {
  std::vector<float> out;
  for (size_t r = 0; r < rows; ++r) {
    double h[10], l[4], mx = -1e300, sum = 0;
    for (size_t j = 0; j < 10; ++j) {
      double s = b1[j];
      for (size_t k = 0; k < 6; ++k) s += static_cast<double>(x[r * 6 + k]) * w1[j * 6 + k];
      h[j] = s > 0 ? s : 0;
    }
    for (size_t j = 0; j < 4; ++j) {
      double s = b2[j];
      for (size_t k = 0; k < 10; ++k) s += h[k] * w2[j * 10 + k];
      l[j] = s;
      mx = std::max(mx, s);
    }
    for (double v : l) sum += std::exp(v - mx);
    for (double v : l) out.push_back(static_cast<float>(std::exp(v - mx) / sum));
  }
  return out;
}

// A model file runs at other batch sizes than the one it was exported at.
TEST_P(ModelFile, ExportedAtBatch8RunsAtBatch3) {
  Device* dev = iotest::device(GetParam());
  TempDir dir;
  const Tensor w1 = rand_f32(dev, S({10, 6}), 11), b1 = rand_f32(dev, S({10}), 12), w2 = rand_f32(dev, S({4, 10}), 13),
               b2 = rand_f32(dev, S({4}), 14);
  io::save_model(dir.file("clf.spora"), classifier(8), {&w1, &b1, &w2, &b2});
  io::Model m(dir.file("clf.spora"), dev);
  for (int64_t batch : {8, 3, 8, 3, 1}) {
    const Tensor x = rand_f32(dev, S({batch, 6}), 20 + static_cast<uint32_t>(batch));
    const std::vector<Tensor> got = m.run({&x});
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].shape, S({batch, 4}));
    expect_close(values(got[0]),
                 classify_ref(values(x), values(w1), values(b1), values(w2), values(b2), static_cast<size_t>(batch)),
                 "batch");
  }
  // Another rank, or a width the weights cannot take, is refused: the
  // rank by the model, the width by the op that cannot take it (linear,
  // fused with its activation at O1).
  const Tensor flat = rand_f32(dev, S({18}), 30), wide = rand_f32(dev, S({3, 7}), 31);
  const std::string rank_err = error_of([&] { m.run({&flat}); });
  EXPECT_NE(rank_err.find("input 'x' must be f32 (8,6) (or another shape of that rank), got f32 (18,)"),
            std::string::npos)
      << rank_err;
  const std::string width_err = error_of([&] { m.run({&wide}); });
  EXPECT_NE(width_err.find("[linear"), std::string::npos) << width_err;
  EXPECT_NE(width_err.find("model.py:20"), std::string::npos) << width_err;
  EXPECT_NE(width_err.find("clf.spora"), std::string::npos) << width_err;
}

// A graph that bakes the batch into an attribute (a reshape to (8, 12))
// cannot take another batch: the error names that op and its line.
TEST(ModelBatch, ShapeBakedIntoAnAttributeNamesTheOp) {
  Device* dev = iotest::device("cpu");
  TempDir dir;
  ir::Graph g("flat");
  auto x = g.add_input("x", SPORA_DTYPE_F32, S({8, 3, 4}));
  Attrs to;
  to.set("shape", AttrValue::of_ints({8, 12}));
  g.set_outputs({g.add_op("exp", {g.add_op("reshape", {x}, to, {"model.py", 5})[0]}, {})[0]});
  io::save_model(dir.file("flat.spora"), g, {});
  io::Model m(dir.file("flat.spora"), dev);
  const Tensor x8 = rand_f32(dev, S({8, 3, 4}), 1), x3 = rand_f32(dev, S({3, 3, 4}), 2);
  EXPECT_EQ(m.run({&x8})[0].shape, S({8, 12}));
  const std::string err = error_of([&] { m.run({&x3}); });
  EXPECT_NE(err.find("[reshape] cannot reshape (3,3,4)"), std::string::npos) << err;
  EXPECT_NE(err.find("model.py:5"), std::string::npos) << err;
}

INSTANTIATE_TEST_SUITE_P(Devices, ModelFile, ::testing::Values("cpu", "sim"));

TEST(ModelSave, MismatchesNameTheWeightAndWriteNothing) {
  Device* dev = iotest::device("cpu");
  TempDir dir;
  const ir::Graph g = mlp();
  const MlpData d(dev);
  const std::string p = dir.file("m");
  EXPECT_NE(error_of([&] { io::save_model(p, g, {&d.w1, &d.b1, &d.w2}); }).find("has 4 weights, 3 given"),
            std::string::npos);
  EXPECT_NE(error_of([&] { io::save_model(p, g, {&d.w1, &d.b1, &d.b2, &d.w2}); })
                .find("weight 'fc2.weight' must be f32 (3,16), got f32 (3,)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { io::save_model(p, g, {&d.w1, nullptr, &d.w2, &d.b2}); }).find("'fc1.bias' is null"),
            std::string::npos);
  ir::Graph no_out("empty");
  no_out.add_input("x", SPORA_DTYPE_F32, S({1}));
  EXPECT_NE(error_of([&] { io::save_model(p, no_out, {}); }).find("has no outputs"), std::string::npos);
  EXPECT_TRUE(dir.list().empty());
}

// Files that are not (good) models: each a clean error naming the file.
TEST(ModelLoad, DamagedOrForeignFilesAreCleanErrors) {
  Device* dev = iotest::device("cpu");
  TempDir dir;
  const ir::Graph g = mlp();
  const MlpData d(dev);
  auto load_error = [&](const std::string& p) { return error_of([&] { io::Model m(p, dev); }); };
  auto src = [](const std::string& name, const Tensor& t) { return io::tensor_source(name, t); };
  const std::map<std::string, std::string> meta = {
      {"spora.format", "model"}, {"spora.version", "1"}, {"spora.graph", ir::to_json(g)}};
  const std::vector<io::TensorSource> all = {src("fc1.weight", d.w1), src("fc1.bias", d.b1), src("fc2.weight", d.w2),
                                             src("fc2.bias", d.b2)};

  // A checkpoint is not a model.
  const std::string ck = dir.file("ck");
  io::save_checkpoint(ck, {"fc1.weight"}, {&d.w1}, {});
  EXPECT_NE(load_error(ck).find("is not a Spora model file (it is a checkpoint)"), std::string::npos)
      << load_error(ck);

  const std::string p = dir.file("m");
  io::write_safetensors(p, "model", {all[0], all[1], all[2]}, meta);
  EXPECT_NE(load_error(p).find("weight 'fc2.bias' is not in the file"), std::string::npos) << load_error(p);
  EXPECT_NE(load_error(p).find(p), std::string::npos);

  auto extra = all;
  extra.push_back(src("stray", d.b2));
  io::write_safetensors(p, "model", extra, meta);
  EXPECT_NE(load_error(p).find("tensor 'stray' is not a weight of the graph"), std::string::npos) << load_error(p);

  io::write_safetensors(p, "model", {all[0], all[1], src("fc2.weight", d.w1), all[3]}, meta);
  EXPECT_NE(load_error(p).find("weight 'fc2.weight' is f32 (16,8) in the file but f32 (3,16) in the graph"),
            std::string::npos)
      << load_error(p);

  auto bad_graph = meta;
  bad_graph["spora.graph"] = "{\"format\": \"spora-graph\", \"version\": 1, \"nodes\": [{\"kind\": \"frob\"}]}";
  io::write_safetensors(p, "model", all, bad_graph);
  EXPECT_NE(load_error(p).find("unknown node kind 'frob'"), std::string::npos) << load_error(p);
  EXPECT_NE(load_error(p).find(p), std::string::npos);

  auto no_graph = meta;
  no_graph.erase("spora.graph");
  io::write_safetensors(p, "model", all, no_graph);
  EXPECT_NE(load_error(p).find("holds no graph"), std::string::npos) << load_error(p);

  // A flipped bit in a weight: the CRC names it.
  io::save_model(p, g, d.weights());
  std::vector<uint8_t> bytes = iotest::slurp(p);
  bytes[bytes.size() - 5] ^= 0x10;  // inside the last tensor in the file
  iotest::spit(p, bytes);
  const std::string err = load_error(p);
  EXPECT_NE(err.find("is corrupted"), std::string::npos) << err;
  EXPECT_NE(err.find("tensor 'fc"), std::string::npos) << err;
}

TEST(ModelCApi, SaveLoadInspectRun) {
  Device* dev = iotest::device("cpu");
  spora_device_t* dh = iotest::handle(dev);
  TempDir dir;
  const MlpData d(dev);
  spora_graph_t graph{mlp(), {}};
  const std::string p = dir.file("m.spora");
  auto h = [](const Tensor& t) { return new spora_tensor{t}; };
  spora_tensor_t* w[4] = {h(d.w1), h(d.b1), h(d.w2), h(d.b2)};
  ASSERT_EQ(spora_model_save(p.c_str(), &graph, w, 4), SPORA_OK) << spora_last_error();
  EXPECT_EQ(spora_model_save(p.c_str(), &graph, w, 3), SPORA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(spora_model_save(p.c_str(), nullptr, w, 4), SPORA_ERROR_INVALID_ARGUMENT);

  spora_model_t* m = nullptr;
  EXPECT_EQ(spora_model_load(p.c_str(), nullptr, &m), SPORA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(spora_model_load(dir.file("none").c_str(), dh, &m), SPORA_ERROR_NOT_FOUND);
  ASSERT_EQ(spora_model_load(p.c_str(), dh, &m), SPORA_OK) << spora_last_error();
  size_t n = 0;
  ASSERT_EQ(spora_model_num_inputs(m, &n), SPORA_OK);
  EXPECT_EQ(n, 2u);
  ASSERT_EQ(spora_model_num_outputs(m, &n), SPORA_OK);
  EXPECT_EQ(n, 2u);
  const char* name = nullptr;
  ASSERT_EQ(spora_model_input_name(m, 1, &name), SPORA_OK);
  EXPECT_STREQ(name, "scale");
  spora_dtype_t dt;
  int64_t dims[SPORA_MAX_NDIM];
  int32_t nd = 0;
  ASSERT_EQ(spora_model_input_type(m, 0, &dt, dims, SPORA_MAX_NDIM, &nd), SPORA_OK);
  EXPECT_EQ(dt, SPORA_DTYPE_F32);
  EXPECT_EQ(nd, 2);
  EXPECT_EQ(dims[0], 4);
  EXPECT_EQ(dims[1], 8);
  EXPECT_EQ(spora_model_input_type(m, 2, &dt, dims, SPORA_MAX_NDIM, &nd), SPORA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(spora_model_input_type(m, 0, &dt, dims, 1, &nd), SPORA_ERROR_INVALID_ARGUMENT);
  const spora_graph_t* mg = nullptr;
  ASSERT_EQ(spora_model_graph(m, &mg), SPORA_OK);
  size_t nout = 0;
  ASSERT_EQ(spora_graph_outputs(mg, nullptr, 0, &nout), SPORA_OK);
  EXPECT_EQ(nout, 2u);

  spora_tensor_t* in[2] = {h(d.x), h(d.scale)};
  spora_tensor_t* out[2] = {nullptr, nullptr};
  EXPECT_EQ(spora_model_run(m, in, 2, out, 1), SPORA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(spora_model_run(m, in, 1, out, 2), SPORA_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(spora_model_run(m, in, 2, out, 2), SPORA_OK) << spora_last_error();
  sched::Executable exe(graph.g, dev);
  const auto want = exe.run(d.params());
  expect_close(values(out[0]->t), values(want[0]), "C API out0");
  expect_close(values(out[1]->t), values(want[1]), "C API out1");
  for (auto* t : out) spora_tensor_free(t);
  for (auto* t : in) spora_tensor_free(t);
  for (auto* t : w) spora_tensor_free(t);
  EXPECT_EQ(spora_model_free(m), SPORA_OK);
  EXPECT_EQ(spora_model_free(nullptr), SPORA_OK);
}

// ---- issue 4: the JSON round-trip check ----

class EnvVar {
 public:
  EnvVar(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~EnvVar() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST(JsonRoundTripCheck, PassesOnGoodGraphsAndCatchesWhatJsonCannotHold) {
  Device* dev = iotest::device("cpu");
  // A name that is not UTF-8 cannot be written as JSON text.
  ir::Graph bad("bad");
  auto x = bad.add_input("x\xff", SPORA_DTYPE_F32, S({2}));
  bad.set_outputs({bad.add_op("neg", {x}, {})[0]});
  {
    EnvVar on("SPORA_CHECK_JSON_ROUNDTRIP", "1");
    EXPECT_NO_THROW(ir::check_json_roundtrip(mlp(), "test"));
    // Attributes keep their order through JSON: Attrs keeps them sorted by
    // name, so the transpose_a that inference adds comes before the user's
    // transpose_b, before and after the round trip.
    ir::Graph mm("mm");
    auto a = mm.add_input("a", SPORA_DTYPE_F32, S({2, 3}));
    auto b = mm.add_input("b", SPORA_DTYPE_F32, S({4, 3}));
    Attrs tb;
    tb.set("transpose_b", AttrValue::of_bool(true));
    mm.set_outputs({mm.add_op("matmul", {a, b}, tb)[0]});
    ASSERT_EQ(mm.node(2).attrs.items().front().first, "transpose_a");
    EXPECT_NO_THROW(ir::check_json_roundtrip(mm, "test"));
    EXPECT_EQ(ir::from_json(ir::to_json(mm)).node(2).attrs.items().front().first, "transpose_a");
    EXPECT_EQ(ir::from_json(ir::to_json(mm)).node(2).attrs.hash(), mm.node(2).attrs.hash());
    try {
      ir::check_json_roundtrip(bad, "test");
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::kInternal);
      EXPECT_NE(std::string(e.what()).find("[json round trip] graph 'bad' (test)"), std::string::npos) << e.what();
    }
    // The places every graph passes through run the check.
    const std::string err = error_of([&] { sched::Executable exe(bad, dev); });
    EXPECT_NE(err.find("(compile)"), std::string::npos) << err;
    const Tensor t = rand_f32(dev, S({2}), 1);
    EXPECT_NE(error_of([&] { run_eager(bad, dev, {&t}); }).find("(run_eager)"), std::string::npos);
    ir::Graph b2 = bad;
    EXPECT_NE(error_of([&] { passes::optimize(b2, 1); }).find("(optimize, input)"), std::string::npos);
    EXPECT_NE(error_of([&] { autodiff::value_and_grad(bad, {x.node}, 0); }).find("(grad, input)"), std::string::npos);
  }
  {
    EnvVar off("SPORA_CHECK_JSON_ROUNDTRIP", "0");
    EXPECT_NO_THROW(ir::check_json_roundtrip(bad, "test"));
    sched::Executable exe(bad, dev);  // the check is off: compiles
  }
}

}  // namespace
}  // namespace spora
