// Helpers shared by the ABI and runtime checks (child process side), and the
// entry points of those two parts.
#pragma once

#include <spora/plugin.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "host.h"
#include "isolate.h"

namespace spora::conformance {

struct Outcome {
  Status status = Status::kPass;
  std::string detail;
  static Outcome pass(std::string d = "") { return {Status::kPass, std::move(d)}; }
  static Outcome fail(std::string d) { return {Status::kFail, std::move(d)}; }
  static Outcome warn(std::string d) { return {Status::kWarn, std::move(d)}; }
  static Outcome skip(std::string d) { return {Status::kSkip, std::move(d)}; }
  static Outcome not_implemented(std::string d = "") { return {Status::kNotImplemented, std::move(d)}; }
};

// Thrown inside a check when a step it depends on went wrong; the check
// fails with the message.
struct CheckFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Runs one named check and reports it; a CheckFailed (or any exception)
// becomes a failure with its message.
void run_check(Channel& ch, const std::string& part, const std::string& name, const std::function<Outcome()>& fn);

// The result of one plugin call that returns an error object.
struct Call {
  bool ok = true;    // returned NULL
  int32_t code = 0;  // when !ok
  std::string text;  // when !ok: "CODE: message" (plus any problem with the error object)
};
Call call(spora_plugin_error_t* err, const std::string& what);
// Throws CheckFailed("<what> failed: <text>") unless `c` succeeded.
void must(const Call& c, const std::string& what);

// What the ABI part learned, for the runtime part in the same child.
struct AbiState {
  std::string path;
  PluginFile file;
  std::string name;
  uint32_t abi_minor = 0;
  const spora_device_api_t* device = nullptr;
  const spora_collective_api_t* collective = nullptr;
  bool can_run = true;        // probe did not say 0
  bool runtime_ready = false; // every function the runtime checks call is present
};

// ABI part: dlopen, probe, entry handshakes, info, function table.
void check_abi(const std::string& path, Channel& ch, AbiState* state);
// Runtime part on device 0 (runtime_memory.cpp, runtime_streams.cpp).
void check_runtime(Channel& ch, const AbiState& state);

// Runtime helpers shared by the two runtime files.
struct Rt {
  Channel& ch;
  const spora_device_api_t* api;
  int32_t device = 0;
  int32_t device_count = 0;
  spora_device_properties_t props{};
};
void check_memory(Rt& rt);
void check_memory_stats(Rt& rt);  // ABI 1.1, when the plugin has it
void check_streams(Rt& rt);
void check_capture(Rt& rt);  // ABI 1.2, when the plugin has it
void check_bad_handles(Rt& rt);

// Deterministic bytes for copy checks.
std::vector<unsigned char> pattern(size_t n, uint32_t seed);
// "" when equal, else where the first difference is.
std::string compare_bytes(const unsigned char* got, const unsigned char* want, size_t n);

}  // namespace spora::conformance
