#include "runtime/context.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "runtime/device.h"
#include "runtime/plugin_vetting.h"
#include "support/error.h"

namespace spora {

std::string PluginEntry::reason() const {
  if (!shadowed_by.empty())
    return "[loader] " + record->path() + ": not used; plugin '" + record->name() + "' is provided by " + shadowed_by;
  return record->reason();
}

void Context::add_plugin_path(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  if (discovered_)
    fail(Code::kInvalidArgument, "[context] plugin path {} added after discovery; add paths before querying devices",
         path);
  paths_.push_back(path);
}

void Context::discover_locked() {
  if (discovered_) return;
  discovered_ = true;
  std::vector<std::string> files;
  for (const auto& dir : plugin_search_path(paths_))
    for (auto& file : plugin_candidates(dir)) files.push_back(std::move(file));
  // Every candidate's handshake runs in a probe process first, all at once
  // (runtime/plugin_vetting.h); open() loads only those that survive.
  vet_plugins(files);
  std::vector<PluginRecord*> seen;
  for (const auto& file : files) {
    PluginRecord* rec = PluginRecord::open(file);
    if (std::find(seen.begin(), seen.end(), rec) != seen.end()) continue;  // same real path
    seen.push_back(rec);
    auto e = std::make_unique<PluginEntry>();
    e->record = rec;
    plugins_.push_back(std::move(e));
  }
  // Several loadable files may provide one name: the highest probe score
  // wins, then the earliest in the search path.
  std::map<std::string, PluginEntry*> best;
  for (auto& e : plugins_) {
    if (!e->record->loaded()) continue;
    const std::string key = e->record->kind() + "/" + e->record->name();
    auto it = best.find(key);
    if (it == best.end()) {
      best[key] = e.get();
    } else if (e->record->score() > it->second->record->score()) {
      it->second->shadowed_by = e->record->path();
      it->second = e.get();
    } else {
      e->shadowed_by = it->second->record->path();
    }
  }
  // Re-point entries shadowed by a candidate that later lost, too.
  for (auto& e : plugins_) {
    if (e->shadowed_by.empty()) continue;
    e->shadowed_by = best[e->record->kind() + "/" + e->record->name()]->record->path();
  }
}

const std::vector<std::unique_ptr<PluginEntry>>& Context::plugins() {
  std::lock_guard<std::mutex> lock(mu_);
  discover_locked();
  return plugins_;
}

const std::vector<Device*>& Context::devices() {
  std::lock_guard<std::mutex> lock(mu_);
  discover_locked();
  if (!devices_listed_) {
    devices_listed_ = true;
    for (auto& e : plugins_) {
      if (!e->shadowed_by.empty() || e->record->kind() != "device") continue;
      if (!e->record->ensure_ready()) continue;
      for (const auto& d : e->record->devices()) devices_.push_back(d.get());
    }
  }
  return devices_;
}

Device* Context::find_device(const std::string& spec) {
  std::string name = spec;
  int64_t index = 0;
  const auto colon = spec.rfind(':');
  if (colon != std::string::npos) {
    name = spec.substr(0, colon);
    const std::string idx = spec.substr(colon + 1);
    char* end = nullptr;
    index = std::strtoll(idx.c_str(), &end, 10);
    if (idx.empty() || *end != '\0' || index < 0)
      fail(Code::kInvalidArgument, "[device] '{}' is not a device name; expected <backend> or <backend>:<index>", spec);
  }
  // Backend names are lower case ("CUDA:0" and "Sim" mean cuda:0 and sim).
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::lock_guard<std::mutex> lock(mu_);
  discover_locked();
  PluginEntry* failed = nullptr;
  std::vector<std::string> known;
  for (auto& e : plugins_) {
    if (e->record->name() != name || e->record->kind() == "collective") {
      if (e->record->loaded() && e->shadowed_by.empty() && e->record->kind() == "device")
        known.push_back(e->record->name());
      continue;
    }
    if (!e->shadowed_by.empty()) continue;
    if (!e->record->loaded() || !e->record->ensure_ready()) {
      failed = e.get();
      continue;
    }
    const auto& devs = e->record->devices();
    if (index >= static_cast<int64_t>(devs.size()))
      fail(Code::kNotFound, "[device] {} has {} device(s); index {} does not exist", name, devs.size(), index);
    return devs[static_cast<size_t>(index)].get();
  }
  if (failed)
    fail(Code::kUnavailable, "[device] backend '{}' is unavailable: {}. Check `spora devices` for details", name,
         failed->reason());
  // Unloadable files whose name we only know from the file name.
  fail(Code::kNotFound, "[device] unknown backend '{}' (available: {}); install its plugin or set SPORA_PLUGIN_PATH",
       name, known.empty() ? std::string("none") : fmt::format("{}", fmt::join(known, ", ")));
}

}  // namespace spora
