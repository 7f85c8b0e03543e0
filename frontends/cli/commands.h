// Subcommands of the `spora` tool.
#pragma once

namespace spora::cli {

// spora devices [--plugin-path P]...: every plugin found, its devices and
// properties, or why it is unavailable. Returns the process exit code.
int devices(int argc, char** argv);

// spora plugin check <name | path> [--cases DIR] [--ops a,b] [--quick]
// [--report file.json]: the conformance kit (sdk/conformance). Returns 0
// when the plugin is certified, 1 on any failure, 2 for usage errors.
int plugin(int argc, char** argv);

}  // namespace spora::cli
