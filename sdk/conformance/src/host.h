// A minimal plugin host for the ABI and runtime checks: dlopens the plugin
// itself, offers the host services of spora/plugin.h, and inspects every
// error object the plugin hands back. Used only inside a child process.
#pragma once

#include <spora/plugin.h>

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

namespace spora::conformance {

struct PluginFile {
  void* handle = nullptr;
  spora_plugin_probe_fn probe = nullptr;  // optional
  spora_plugin_entry_fn entry = nullptr;
  std::string error;  // dlopen's message when handle is null
};

// dlopen(RTLD_NOW | RTLD_LOCAL) of an absolute path, kept for the process.
PluginFile open_plugin(const std::string& path);

// A host description with its services. `abi_major`, `abi_minor` and
// `abi_minor_floor` are what the host claims. Lives for the process (the
// plugin may keep the pointer).
const spora_host_t* make_host(uint32_t abi_major, uint32_t abi_minor, uint32_t abi_minor_floor);

// What the host services saw.
struct HostLog {
  std::mutex mu;
  std::vector<std::string> lines;  // "[level] plugin: message"
  std::atomic<int> errors_created{0};
  std::atomic<int> errors_destroyed{0};
};
HostLog& host_log();

// An error object the plugin returned, read and released.
struct TakenError {
  bool present = false;  // the plugin returned non-NULL
  int32_t code = 0;
  std::string message;
  std::string problem;  // non-empty when the object breaks the contract
};

// Takes ownership of `err`: checks struct_size, code, message and destroy,
// copies what it says and releases it with its own destroy. Problems are
// also collected for the summary check (error_problems()).
TakenError take_error(spora_plugin_error_t* err, const std::string& from);

struct ErrorStats {
  int seen = 0;
  std::vector<std::string> malformed;   // "<from>: <problem>"
  std::vector<std::string> unbracketed; // messages not starting with "[part]"
};
ErrorStats& error_stats();

// Threads of this process (/proc/self/task), or -1 if unknown.
int thread_count();

const char* code_name(int32_t code);

}  // namespace spora::conformance
