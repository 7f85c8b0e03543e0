// SPORA_DUMP_IR=<dir> end to end through the public C API: a graph with a
// dead op, a duplicate op and a constant expression is optimised (level 1),
// compiled and run; the directory then holds the IR before and after every
// pass (text, JSON, Graphviz), numbered in the order the passes ran, and
// the dumps show what each pass did. The variable is read once per process
// (the default pass context), so this binary holds this one test and sets
// it before its first call into Spora.
#include <gtest/gtest.h>
#include <spora/spora.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

spora_value_t op1(spora_graph_t* g, const char* op, std::vector<spora_value_t> in) {
  spora_value_t out = -1;
  size_t n = 0;
  EXPECT_EQ(spora_graph_add_op(g, op, in.data(), in.size(), nullptr, "dump_ir_test.cpp", 0, &out, 1, &n), SPORA_OK)
      << spora_last_error();
  return out;
}

// One pass's dumps: its sequence number and its six files.
struct PassDump {
  std::string pass;
  std::map<std::string, fs::path> files;  // "before.txt" -> path
};

TEST(DumpIr, OptimizeWritesTheIrBeforeAndAfterEveryPass) {
  std::string tmpl = (fs::temp_directory_path() / "spora_dump_ir_XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const fs::path dir = fs::path(tmpl) / "dumps";  // created by the dump itself
  ASSERT_EQ(setenv("SPORA_DUMP_IR", dir.c_str(), 1), 0);

  spora_context_t* ctx = nullptr;
  ASSERT_EQ(spora_context_create(&ctx), SPORA_OK) << spora_last_error();
  spora_device_t* cpu = nullptr;
  ASSERT_EQ(spora_device_find(ctx, "cpu", &cpu), SPORA_OK) << spora_last_error();

  // y = x * (1 + 2) + x * (1 + 2), with exp(x) computed and never used.
  spora_graph_t* g = nullptr;
  ASSERT_EQ(spora_graph_create("dumped", &g), SPORA_OK);
  const int64_t n = 4;
  spora_value_t x = -1, c1 = -1, c2 = -1;
  ASSERT_EQ(spora_graph_add_input(g, "x", SPORA_DTYPE_F32, &n, 1, &x), SPORA_OK);
  const float ones[4] = {1, 1, 1, 1}, twos[4] = {2, 2, 2, 2};
  spora_tensor_t *t1 = nullptr, *t2 = nullptr;
  ASSERT_EQ(spora_tensor_create(cpu, SPORA_DTYPE_F32, &n, 1, ones, sizeof ones, &t1), SPORA_OK);
  ASSERT_EQ(spora_tensor_create(cpu, SPORA_DTYPE_F32, &n, 1, twos, sizeof twos, &t2), SPORA_OK);
  ASSERT_EQ(spora_graph_add_constant(g, t1, &c1), SPORA_OK);
  ASSERT_EQ(spora_graph_add_constant(g, t2, &c2), SPORA_OK);
  op1(g, "exp", {x});
  const spora_value_t k = op1(g, "add", {c1, c2});
  const spora_value_t y = op1(g, "add", {op1(g, "mul", {x, k}), op1(g, "mul", {x, k})});
  ASSERT_EQ(spora_graph_set_outputs(g, &y, 1), SPORA_OK);
  ASSERT_EQ(spora_graph_optimize(g, 1), SPORA_OK) << spora_last_error();
  const char* optimized = nullptr;
  ASSERT_EQ(spora_graph_to_text(g, &optimized), SPORA_OK);
  const std::string optimized_text = optimized;

  // The optimised graph compiles and computes 6x.
  spora_executable_t* exe = nullptr;
  ASSERT_EQ(spora_graph_compile(g, cpu, &exe), SPORA_OK) << spora_last_error();
  const float xs[4] = {1, 2, 3, -4};
  spora_tensor_t* xt = nullptr;
  ASSERT_EQ(spora_tensor_create(cpu, SPORA_DTYPE_F32, &n, 1, xs, sizeof xs, &xt), SPORA_OK);
  spora_tensor_t* out = nullptr;
  ASSERT_EQ(spora_executable_run(exe, &xt, 1, &out, 1), SPORA_OK) << spora_last_error();
  float got[4] = {};
  ASSERT_EQ(spora_tensor_read(out, got, sizeof got), SPORA_OK);
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(got[i], 6 * xs[i]);

  // <graph>.<seq>.<pass>.<before|after>.<txt|json|dot>, seq from 000 up.
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  std::map<int, PassDump> by_seq;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    std::vector<std::string> parts;
    std::stringstream ss(name);
    for (std::string p; std::getline(ss, p, '.');) parts.push_back(p);
    ASSERT_EQ(parts.size(), 5u) << name;
    EXPECT_EQ(parts[0], "dumped") << name;
    ASSERT_EQ(parts[1].size(), 3u) << name;
    PassDump& d = by_seq[std::stoi(parts[1])];
    if (d.pass.empty()) d.pass = parts[2];
    EXPECT_EQ(d.pass, parts[2]) << "two passes share sequence number " << parts[1];
    d.files[parts[3] + "." + parts[4]] = e.path();
  }
  std::vector<std::string> order;
  std::map<std::string, PassDump> by_pass;
  int want_seq = by_seq.empty() ? 0 : by_seq.begin()->first;
  for (const auto& [seq, d] : by_seq) {
    EXPECT_EQ(seq, want_seq++) << "sequence numbers are consecutive";
    EXPECT_EQ(d.files.size(), 6u) << d.pass << ": before and after, each as txt, json and dot";
    for (const char* f : {"before.txt", "before.json", "before.dot", "after.txt", "after.json", "after.dot"})
      EXPECT_EQ(d.files.count(f), 1u) << d.pass << " has no " << f;
    order.push_back(d.pass);
    by_pass[d.pass] = d;
  }
  // The level-1 pipeline, in its order (passes without a dump would be a bug).
  ASSERT_FALSE(order.empty());
  std::string listed;
  for (const auto& p : order) listed += " " + p;
  std::printf("passes dumped:%s\n", listed.c_str());
  EXPECT_EQ(order.front(), "shape_inference");
  auto at = [&](const std::string& p) { return std::find(order.begin(), order.end(), p) - order.begin(); };
  for (const char* p : {"dce", "cse", "algebraic_simplify", "constant_folding"})
    ASSERT_LT(at(p), static_cast<long>(order.size())) << p << " left no dump";
  EXPECT_LT(at("dce"), at("cse"));
  EXPECT_LT(at("cse"), at("constant_folding"));

  // Each pass's dumps show its work; each after is the next before.
  auto text = [&](const std::string& pass, const std::string& f) { return slurp(by_pass[pass].files[f]); };
  EXPECT_EQ(count(text("dce", "before.txt"), "exp("), 1u) << text("dce", "before.txt");
  EXPECT_EQ(count(text("dce", "after.txt"), "exp("), 0u) << text("dce", "after.txt");
  EXPECT_EQ(count(text("cse", "before.txt"), "mul("), 2u) << text("cse", "before.txt");
  EXPECT_EQ(count(text("cse", "after.txt"), "mul("), 1u) << text("cse", "after.txt");
  EXPECT_LT(count(text("constant_folding", "after.txt"), "add("),
            count(text("constant_folding", "before.txt"), "add("))
      << text("constant_folding", "before.txt") << text("constant_folding", "after.txt");
  for (size_t i = 0; i + 1 < order.size(); ++i)
    EXPECT_EQ(text(order[i], "after.txt"), text(order[i + 1], "before.txt")) << order[i] << " -> " << order[i + 1];
  EXPECT_EQ(text(order.back(), "after.txt"), optimized_text);
  EXPECT_NE(text("dce", "before.dot").find("digraph"), std::string::npos);

  // The JSON dump is the lossless form: it loads back as the same graph.
  const std::string json = text(order.back(), "after.json");
  spora_graph_t* back = nullptr;
  ASSERT_EQ(spora_graph_from_json(json.data(), json.size(), &back), SPORA_OK) << spora_last_error();
  const char* back_text = nullptr;
  ASSERT_EQ(spora_graph_to_text(back, &back_text), SPORA_OK);
  EXPECT_EQ(std::string(back_text), optimized_text);

  spora_graph_free(back);
  spora_tensor_free(out);
  spora_tensor_free(xt);
  spora_executable_free(exe);
  spora_tensor_free(t1);
  spora_tensor_free(t2);
  spora_graph_free(g);
  spora_context_free(ctx);
  fs::remove_all(tmpl);
}

}  // namespace
