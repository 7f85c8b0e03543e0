// One plugin file: loading it (Boost.DLL), the version handshake, lazy
// initialisation and its devices. Records are process-wide, keyed by the
// file's real path, and never destroyed: plugins are never unloaded.
#pragma once
#include <spora/plugin.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace spora {

class Device;

class PluginRecord {
 public:
  // Loads (or returns the already loaded) plugin at `path`. Never throws for
  // a bad plugin: the failure is recorded in the result.
  static PluginRecord* open(const std::string& path);
  // A loaded, initialised device plugin of this name, if any context has
  // loaded one (the host fallback uses "cpu").
  static PluginRecord* find_ready(const std::string& name);

  const std::string& path() const { return path_; }
  const std::string& name() const { return name_; }
  const std::string& kind() const { return kind_; }  // "device" | "collective" | "unknown"
  const std::string& version() const { return version_; }
  int score() const { return score_; }

  // Loaded and handshaken (initialisation may still fail later).
  bool loaded() const { return loaded_; }
  // Runs `initialize` once and enumerates devices; false (with reason()) on
  // failure. Thread-safe.
  bool ensure_ready();
  bool available() const;  // loaded and, once initialised, initialised fine
  std::string reason() const;

  const spora_device_api_t* device_api() const { return device_api_; }
  const spora_collective_api_t* collective_api() const { return collective_api_; }
  const std::vector<std::unique_ptr<Device>>& devices() const { return devices_; }

 private:
  PluginRecord() = default;
  void load();
  void fail(std::string why);

  std::string path_, file_, name_, kind_ = "unknown", version_, build_;
  int score_ = 0;
  bool loaded_ = false;
  bool init_done_ = false;
  bool init_ok_ = false;
  std::string reason_;
  const spora_device_api_t* device_api_ = nullptr;
  const spora_collective_api_t* collective_api_ = nullptr;
  std::vector<std::unique_ptr<Device>> devices_;
  // The Boost.DLL handle object, never freed (its destructor would dlclose);
  // held here so it stays reachable, not a leak to LeakSanitizer.
  const void* library_ = nullptr;
  mutable std::mutex mu_;
};

// Converts a plugin error into a spora::Error (taking ownership of it) and
// throws; returns normally when `err` is null.
void throw_if_error(spora_plugin_error_t* err, const std::string& context);

}  // namespace spora
