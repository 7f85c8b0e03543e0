// `spora ir dump` and `spora ir view`: a model's graph as IR text, or as a
// Graphviz dot file, as stored or after the optimisation passes.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>
#include <spora/spora.hpp>

#include "commands.h"

namespace spora::cli {
namespace {

void ir_usage(FILE* f) {
  std::fprintf(f,
               "usage: spora ir dump <model.spora | model.onnx> [--after-passes O1|O2]\n"
               "       spora ir view <model.spora | model.onnx> [--after-passes O1|O2] [-o FILE.dot]\n"
               "\n"
               "dump prints the model's graph as IR text; view writes it as a Graphviz\n"
               "dot graph (to stdout, or -o FILE; render with `dot -Tsvg`). Without\n"
               "--after-passes the graph is shown as stored in the file; O1/O2 run the\n"
               "optimisation passes of that level first (what spora run compiles is O1).\n");
}

std::string dot_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}

std::string meta_str(const nlohmann::json& m) {
  std::string s = m.value("dtype", std::string("?")) + "[";
  bool first = true;
  for (const auto& d : m["shape"]) {
    s += (first ? "" : ",") + std::to_string(d.get<int64_t>());
    first = false;
  }
  return s + "]";
}

// One cluster per (sub)graph; node ids are prefixed so subgraphs do not clash.
void emit_dot(std::string& out, const nlohmann::json& g, const std::string& prefix, int depth) {
  const auto& nodes = g["nodes"];
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto& n = nodes[i];
    const std::string kind = n.value("kind", std::string("?"));
    std::string label = n.contains("op") ? n["op"].get<std::string>() : kind;
    if (n.contains("name")) label += "\\n" + dot_escape(n["name"].get<std::string>());
    for (const auto& o : n["outputs"]) label += "\\n" + meta_str(o);
    const char* shape = kind == "input" ? "invhouse" : kind == "weight" ? "box3d" : kind == "constant" ? "note" : "box";
    out += "  " + prefix + std::to_string(i) + " [shape=" + shape + ", label=\"" + label + "\"];\n";
    if (n.contains("inputs"))
      for (const auto& v : n["inputs"])
        out += "  " + prefix + std::to_string(v[0].get<int64_t>()) + " -> " + prefix + std::to_string(i) +
               (v[1].get<int64_t>() ? " [label=\"" + std::to_string(v[1].get<int64_t>()) + "\"]" : "") + ";\n";
    if (n.contains("subgraphs") && depth < 16) {
      int k = 0;
      for (const auto& s : n["subgraphs"]) {
        const std::string p = prefix + std::to_string(i) + "_" + std::to_string(k++) + "_";
        out += "  subgraph cluster_" + p + " {\n  label=\"" + dot_escape(s.value("name", std::string())) + "\";\n";
        emit_dot(out, s, p, depth + 1);
        out += "  }\n  " + p + "out [shape=point];\n  " + p + "out -> " + prefix + std::to_string(i) +
               " [style=dashed];\n";
      }
    }
  }
  int k = 0;
  for (const auto& v : g["outputs"]) {
    const std::string o = prefix + "out" + std::to_string(k);
    out += "  " + o + " [shape=oval, label=\"output " + std::to_string(k++) + "\"];\n";
    out += "  " + prefix + std::to_string(v[0].get<int64_t>()) + " -> " + o + ";\n";
  }
}

}  // namespace

int ir(int argc, char** argv) {
  if (argc < 1 || !std::strcmp(argv[0], "-h") || !std::strcmp(argv[0], "--help")) {
    ir_usage(argc < 1 ? stderr : stdout);
    return argc < 1 ? 2 : 0;
  }
  const std::string sub = argv[0];
  if (sub != "dump" && sub != "view") {
    std::fprintf(stderr, "spora ir: unknown subcommand '%s'\n\n", sub.c_str());
    ir_usage(stderr);
    return 2;
  }
  std::string model, out_file;
  int level = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--after-passes" && i + 1 < argc) {
      const std::string l = argv[++i];
      if (l == "O0" || l == "0") level = 0;
      else if (l == "O1" || l == "1") level = 1;
      else if (l == "O2" || l == "2") level = 2;
      else {
        std::fprintf(stderr, "spora ir: --after-passes takes O0, O1 or O2, not '%s'\n", l.c_str());
        return 2;
      }
    } else if (a == "-o" && sub == "view" && i + 1 < argc) {
      out_file = argv[++i];
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "spora ir %s: unknown option or missing value '%s'\n\n", sub.c_str(), a.c_str());
      ir_usage(stderr);
      return 2;
    } else if (model.empty()) {
      model = a;
    } else {
      std::fprintf(stderr, "spora ir: one model at a time ('%s' and '%s')\n", model.c_str(), a.c_str());
      return 2;
    }
  }
  if (model.empty()) {
    ir_usage(stderr);
    return 2;
  }
  Context ctx;
  Model m(model, ctx.device("cpu"));
  spora_graph_t* raw = nullptr;
  check(spora_graph_copy(m.graph(), &raw));
  Graph g(raw);
  if (level >= 0) check(spora_graph_optimize(g.get(), level));
  const char* s = nullptr;
  if (sub == "dump") {
    check(spora_graph_to_text(g.get(), &s));
    std::fputs(s, stdout);
    return 0;
  }
  check(spora_graph_to_json(g.get(), &s));
  const auto j = nlohmann::json::parse(s);
  std::string dot = "digraph \"" + dot_escape(j.value("name", std::string("main"))) + "\" {\n  rankdir=TB;\n";
  emit_dot(dot, j, "n", 0);
  dot += "}\n";
  if (out_file.empty()) {
    std::fputs(dot.c_str(), stdout);
  } else {
    std::ofstream f(out_file, std::ios::trunc);
    if (!(f << dot)) {
      std::fprintf(stderr, "spora ir view: cannot write %s\n", out_file.c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace spora::cli
