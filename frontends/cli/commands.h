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

// spora run <model> [--input NAME=FILE.npy]... [--device D] [--output-dir
// DIR] [--repeat N]: runs a model file (.spora or .onnx), prints outputs and
// timing, writes outputs as .npy. 0 ok, 1 error, 2 usage.
int run(int argc, char** argv);

// spora bench <model> [--batch N] [--device D] [--warmup N] [--iters N]:
// times runs on generated inputs (min, median, p90, samples/s).
int bench(int argc, char** argv);

// spora ir dump|view <model> [--after-passes O1|O2] [-o FILE.dot]: the
// graph as IR text or Graphviz dot.
int ir(int argc, char** argv);

// spora launch -n N [--hosts ...] [--mpirun PATH] -- PROGRAM [ARGS...]: N
// ranks over Open MPI's mpirun, each line prefixed "[rank R] "; exits with
// the first failing rank's status, naming it. (--worker: one rank's side.)
int launch(int argc, char** argv);

}  // namespace spora::cli
