// A context: the plugin search path and the view of plugins and devices it
// yields. Plugin records themselves are process-wide (see plugin_library.h).
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/plugin_library.h"

namespace spora {

class Device;

// One candidate plugin file as this context sees it.
struct PluginEntry {
  PluginRecord* record = nullptr;
  std::string shadowed_by;  // non-empty when another file of the same name won

  bool usable() const { return shadowed_by.empty() && record->available(); }
  std::string reason() const;
};

class Context {
 public:
  void add_plugin_path(const std::string& path);

  const std::vector<std::unique_ptr<PluginEntry>>& plugins();
  const std::vector<Device*>& devices();  // initialises every usable device plugin
  // "cpu", "cpu:0", "sim:1". Throws kNotFound / kUnavailable with the reason.
  Device* find_device(const std::string& name);

 private:
  void discover_locked();

  std::mutex mu_;
  bool discovered_ = false;
  bool devices_listed_ = false;
  std::vector<std::string> paths_;
  std::vector<std::unique_ptr<PluginEntry>> plugins_;
  std::vector<Device*> devices_;
};

// The directories and files searched, in order: explicit paths, then
// SPORA_PLUGIN_PATH, then <dir of libspora.so>/spora/plugins.
std::vector<std::string> plugin_search_path(const std::vector<std::string>& explicit_paths);
// The directory of libspora.so (of the executable, when the core's objects
// are linked into it), by real path; "" if unknown.
std::string libspora_dir();
// Plugin files named libspora-{device,collective}-<name>.so in a directory
// (sorted), or the path itself when it names a file.
std::vector<std::string> plugin_candidates(const std::string& path);

}  // namespace spora
