// `spora plugin check`: the conformance kit (sdk/conformance).
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include <spora/spora.hpp>
#include <spora_conformance/conformance.h>

#include "commands.h"

namespace spora::cli {
namespace {

void plugin_usage(FILE* f) {
  std::fprintf(f,
               "usage: spora plugin check <name | path/to/libspora-device-x.so> [options]\n"
               "\n"
               "Certifies a plugin against the plugin ABI v1 contract:\n"
               "  ABI      the file loads; probe and entry behave (version handshake, refusal of\n"
               "           another major, no threads before initialize); info and function table\n"
               "           complete (required: memory, copies, streams, events)\n"
               "  runtime  on its first device: alloc/free, sync and async copies, memset, stream\n"
               "           order, events across streams, host callbacks, errors on bad handles\n"
               "  kernels  every conformance case on the plugin's own kernels vs the cpu plugin,\n"
               "           and value_and_grad graphs of every differentiable op\n"
               "then prints a table op x dtype -> pass / FAIL / - (unsupported).\n"
               "Exit status: 0 certified, 1 any failure or the plugin cannot be checked, 2 usage.\n"
               "\n"
               "options:\n"
               "  --cases DIR      case files (default: <prefix>/share/spora/conformance/cases)\n"
               "  --ops a,b        only these ops (and their gradients)\n"
               "  --quick          one case per op x dtype, one gradient case per op\n"
               "  --report FILE    also write the results as JSON\n"
               "  --timeout SEC    a check or case making no progress for SEC seconds is\n"
               "                   a hang (default 120)\n"
               "\n"
               "A name is searched like the host does (SPORA_PLUGIN_PATH, then the plugin\n"
               "directory next to libspora.so); a path is checked as given.\n");
}

std::vector<std::string> split_ops(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

int check(int argc, char** argv) {
  conformance::Options o;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* opt) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "spora plugin check: %s needs a value\n", opt);
        return nullptr;
      }
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      plugin_usage(stdout);
      return 0;
    } else if (a == "--cases") {
      const char* v = value("--cases");
      if (!v) return 2;
      o.cases_dir = v;
    } else if (a == "--ops") {
      const char* v = value("--ops");
      if (!v) return 2;
      o.ops = split_ops(v);
      if (o.ops.empty()) {
        std::fprintf(stderr, "spora plugin check: --ops needs op names, e.g. --ops add,matmul\n");
        return 2;
      }
    } else if (a == "--quick") {
      o.quick = true;
    } else if (a == "--report") {
      const char* v = value("--report");
      if (!v) return 2;
      o.report_path = v;
    } else if (a == "--timeout") {
      const char* v = value("--timeout");
      if (!v) return 2;
      char* end = nullptr;
      o.child_timeout_s = std::strtod(v, &end);
      if (end == v || *end || !(o.child_timeout_s > 0) || o.child_timeout_s > 86400) {
        std::fprintf(stderr, "spora plugin check: --timeout '%s' is not a number of seconds in (0, 86400]\n", v);
        return 2;
      }
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "spora plugin check: unknown option '%s'\n\n", a.c_str());
      plugin_usage(stderr);
      return 2;
    } else if (o.target.empty()) {
      o.target = a;
    } else {
      std::fprintf(stderr, "spora plugin check: one plugin at a time ('%s' and '%s')\n", o.target.c_str(), a.c_str());
      return 2;
    }
  }
  if (o.target.empty()) {
    std::fprintf(stderr, "spora plugin check: which plugin? give a name (sim) or a file path\n\n");
    plugin_usage(stderr);
    return 2;
  }
  for (const auto& op : o.ops) {
    const char* schema = nullptr;
    if (spora_op_schema(op.c_str(), &schema) != SPORA_OK) {
      std::fprintf(stderr, "spora plugin check: --ops: '%s' is not a registered op\n", op.c_str());
      return 2;
    }
  }
  if (!o.report_path.empty() && !std::ofstream(o.report_path, std::ios::app)) {
    std::fprintf(stderr, "spora plugin check: cannot write the report to %s\n", o.report_path.c_str());
    return 2;
  }
  return conformance::run(o, stdout);
}

}  // namespace

int plugin(int argc, char** argv) {
  if (argc < 1 || !std::strcmp(argv[0], "-h") || !std::strcmp(argv[0], "--help")) {
    plugin_usage(argc < 1 ? stderr : stdout);
    return argc < 1 ? 2 : 0;
  }
  if (!std::strcmp(argv[0], "check")) return check(argc - 1, argv + 1);
  std::fprintf(stderr, "spora plugin: unknown subcommand '%s'\n\n", argv[0]);
  plugin_usage(stderr);
  return 2;
}

}  // namespace spora::cli
