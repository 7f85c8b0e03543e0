// A later start for sandbox_test.cpp: the probe sandbox keeps verdicts per
// process, so "the next start" must be a new process.
//   sandbox_start <plugins dir> cached        check_start(dir, cached verdicts); prints "start fine"
//   sandbox_start <plugins dir> list          prints "<file> <0|1> <reason>" per plugin
// Exits 0 when it could do its job (the test judges the output).
#include <cstdio>
#include <cstring>

#include "sandbox_checks.h"

// Under ASan (SPORA_SANITIZE): this host is meant to die the way a
// plugin makes it die when the sandbox is off (killed by SIGSEGV), not by
// ASan's exit status 1; its leaks are the loader tests' to find.
extern "C" __attribute__((visibility("default"), used)) const char* __asan_default_options() {
  return "handle_segv=0:handle_sigbus=0:handle_sigfpe=0:detect_leaks=0";
}

int main(int argc, char** argv) {
  using namespace sandbox_test;
  if (argc != 3) return std::fprintf(stderr, "usage: sandbox_start <dir> cached|list\n"), 2;
  try {
    if (!std::strcmp(argv[2], "cached")) {
      const std::string bad = check_start(argv[1], /*expect_cached=*/true);
      std::printf("%s", bad.empty() ? "start fine\n" : bad.c_str());
      return 0;
    }
    spora::Context ctx;
    ctx.add_plugin_path(argv[1]);
    for (const auto& [file, p] : plugins_under(ctx, argv[1]))
      std::printf("%s %d %s\n", file.c_str(), p.available ? 1 : 0, p.reason.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::printf("exception: %s\n", e.what());
    return 1;
  }
}
