// The `spora` command-line tool.
#include <cstdio>
#include <cstring>
#include <exception>

#include <spora/spora.hpp>

#include "commands.h"

namespace {

void usage(FILE* f) {
  std::fprintf(f,
               "usage: spora <command> [options]\n"
               "\n"
               "commands:\n"
               "  devices [--plugin-path P]   list plugins, their devices and properties,\n"
               "                              or why a plugin is unavailable\n"
               "  plugin check <name|path>    certify a plugin: ABI, runtime semantics, and its\n"
               "                              kernels vs cpu (spora plugin --help for options)\n"
               "  run <model> [--input N=F.npy]  run a model file (.spora or .onnx) on .npy\n"
               "                              inputs; print outputs and timing (run --help)\n"
               "  bench <model> [--batch N]   time runs: warm-up, min, median, p90\n"
               "  ir dump|view <model>        the graph as IR text or Graphviz dot,\n"
               "                              [--after-passes O1|O2]\n"
               "  launch -n N -- PROGRAM ...  start N ranks over mpirun, output prefixed by rank;\n"
               "                              exits naming the first rank that failed (launch --help)\n"
               "  version                     print the library version\n"
               "\n"
               "environment: SPORA_PLUGIN_PATH (extra plugin dirs), SPORA_LOG_LEVEL\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  try {
    if (!std::strcmp(argv[1], "devices")) return spora::cli::devices(argc - 2, argv + 2);
    if (!std::strcmp(argv[1], "plugin")) return spora::cli::plugin(argc - 2, argv + 2);
    if (!std::strcmp(argv[1], "run")) return spora::cli::run(argc - 2, argv + 2);
    if (!std::strcmp(argv[1], "bench")) return spora::cli::bench(argc - 2, argv + 2);
    if (!std::strcmp(argv[1], "ir")) return spora::cli::ir(argc - 2, argv + 2);
    if (!std::strcmp(argv[1], "launch")) return spora::cli::launch(argc - 2, argv + 2);
    if (!std::strcmp(argv[1], "version")) {
      int32_t a, b, c;
      spora::check(spora_version(&a, &b, &c));
      std::printf("spora %d.%d.%d\n", a, b, c);
      return 0;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "spora: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "spora: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return 2;
}
