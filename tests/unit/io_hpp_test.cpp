// spora.hpp's wrappers of checkpoint and model files, through libspora.so.
#include <gtest/gtest.h>
#include <spora/spora.hpp>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

namespace {

std::string temp_dir() {
  std::string t = (std::filesystem::temp_directory_path() / "spora_io_hpp_XXXXXX").string();
  if (!mkdtemp(t.data())) throw std::runtime_error("mkdtemp");
  return t;
}

TEST(IoHpp, CheckpointAndModelRoundTrip) {
  spora::Context ctx;
  spora::Device cpu = ctx.device("cpu");
  const std::string dir = temp_dir();

  auto w = spora::Tensor::from<float>(cpu, {2, 3}, {1, -2, 3, -4, 5, -6});
  auto b = spora::Tensor::from<double>(cpu, {2}, {0.5, -0.25});
  spora::save_checkpoint(dir + "/c", {{"w", &w}, {"b", &b}}, R"({"step": "10"})");
  spora::Checkpoint c(dir + "/c");
  const auto entries = c.entries();
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].name, "b");  // f64 before f32
  EXPECT_EQ(entries[0].dtype, SPORA_DTYPE_F64);
  EXPECT_EQ(entries[1].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(c.metadata_json(), R"({"step":"10"})");
  EXPECT_EQ(c.read("w", cpu).read<float>(), (std::vector<float>{1, -2, 3, -4, 5, -6}));
  try {
    c.read("missing", cpu);
    ADD_FAILURE();
  } catch (const spora::Error& e) {
    EXPECT_EQ(e.status(), SPORA_ERROR_NOT_FOUND);
  }

  // y = relu(x @ w^T) with w as a weight: x (1,3) -> (1,2).
  spora::Graph g("m");
  auto x = g.input("x", SPORA_DTYPE_F32, {1, 3});
  auto wv = g.weight("w", SPORA_DTYPE_F32, {2, 3});
  spora::Attrs tb;
  tb.set("transpose_b", true);
  g.set_outputs({g.op("relu", {g.op("matmul", {x, wv}, &tb)})});
  spora::Model::save(dir + "/m.spora", g, {&w});
  spora::Model m(dir + "/m.spora", cpu);
  EXPECT_EQ(m.num_inputs(), 1u);
  EXPECT_EQ(m.input_name(0), "x");
  EXPECT_EQ(m.input_type(0).second, (std::vector<int64_t>{1, 3}));
  auto xin = spora::Tensor::from<float>(cpu, {1, 3}, {1, 1, 1});
  const auto out = m.run({&xin});
  ASSERT_EQ(out.size(), 1u);
  // rows of w: (1,-2,3) -> 2, (-4,5,-6) -> -5 -> relu 0
  EXPECT_EQ(out[0].read<float>(), (std::vector<float>{2, 0}));
  EXPECT_NE(m.graph(), nullptr);
  std::filesystem::remove_all(dir);
}

}  // namespace
