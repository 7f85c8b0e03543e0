// `spora devices`: what the loader found and why anything is missing.
#include <cstdio>
#include <cstring>
#include <string>

#include <spora/spora.hpp>

#include "commands.h"

namespace spora::cli {

int devices(int argc, char** argv) {
  Context ctx;
  for (int i = 0; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--plugin-path") && i + 1 < argc) {
      ctx.add_plugin_path(argv[++i]);
    } else {
      std::fprintf(stderr, "spora devices: unknown option '%s'\n", argv[i]);
      return 2;
    }
  }
  // Listing devices initialises every usable device plugin; do it first so
  // initialisation failures show up in the plugin list below.
  const auto devs = ctx.devices();
  const auto plugins = ctx.plugins();
  if (plugins.empty()) {
    std::printf("no plugins found; set SPORA_PLUGIN_PATH or install plugins next to libspora.so (spora/plugins/)\n");
    return 1;
  }
  std::printf("plugins:\n");
  for (const auto& p : plugins) {
    std::printf("  %-10s %-10s %-8s %s\n", p.name.c_str(), p.kind.c_str(), p.available ? "ok" : "UNAVAILABLE",
                p.path.c_str());
    if (!p.available) std::printf("             reason: %s\n", p.reason.c_str());
  }
  std::printf("devices:\n");
  for (const auto& d : devs) {
    std::printf("  %s\n", d.name().c_str());
    for (const auto& [k, v] : d.properties()) std::printf("    %-15s %s\n", k.c_str(), v.c_str());
  }
  if (devs.empty()) std::printf("  (none usable)\n");
  return 0;
}

}  // namespace spora::cli
