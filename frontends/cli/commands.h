// Subcommands of the `spora` tool.
#pragma once

namespace spora::cli {

// spora devices [--plugin-path P]...: every plugin found, its devices and
// properties, or why it is unavailable. Returns the process exit code.
int devices(int argc, char** argv);

}  // namespace spora::cli
