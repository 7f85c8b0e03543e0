#include "runtime/plugin_verdict_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/host_services.h"
#include "support/log.h"

namespace spora {
namespace fs = std::filesystem;

namespace {

// Verdicts of another libspora (another host ABI) do not count here.
std::string header() {
  const spora_host_t* h = host_description();
  return "spora-plugin-verdicts 1 host " + std::string(h->host_version ? h->host_version : "?") + " abi " +
         std::to_string(h->abi_major) + "." + std::to_string(h->abi_minor);
}

// Keeps each record one line of tab-separated fields.
std::string one_field(std::string s) {
  for (char& c : s)
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  return s;
}

bool file_identity(const std::string& path, uint64_t* size, int64_t* mtime_ns) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return false;
  *size = static_cast<uint64_t>(st.st_size);
  *mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return true;
}

}  // namespace

std::string verdict_cache_file() {
  std::string dir;
  if (config_lookup("plugin.cache_dir", &dir)) {
    if (dir.empty()) return "";
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x == '/') {
    dir = std::string(x) + "/spora";
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    dir = std::string(home) + "/.cache/spora";
  } else {
    return "";
  }
  return dir + "/plugin-verdicts.txt";
}

VerdictCache::VerdictCache(std::string file) : file_(std::move(file)) {
  if (file_.empty()) return;
  std::ifstream in(file_);
  std::string line;
  if (!in || !std::getline(in, line) || line != header()) return;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string size, mtime, timeout, verdict, path, reason;
    if (!std::getline(f, size, '\t') || !std::getline(f, mtime, '\t') || !std::getline(f, timeout, '\t') ||
        !std::getline(f, verdict, '\t') || !std::getline(f, path, '\t'))
      continue;
    std::getline(f, reason);
    char* end = nullptr;
    Entry e;
    e.size = std::strtoull(size.c_str(), &end, 10);
    if (size.empty() || *end) continue;
    e.mtime_ns = std::strtoll(mtime.c_str(), &end, 10);
    if (mtime.empty() || *end) continue;
    e.verdict.timeout_s = std::strtod(timeout.c_str(), &end);
    if (timeout.empty() || *end) continue;
    if (verdict != "survived" && verdict != "died") continue;
    e.verdict.survived = verdict == "survived";
    e.verdict.reason = reason;
    if (path.empty() || path[0] != '/') continue;
    entries_[path] = std::move(e);
  }
}

const CachedVerdict* VerdictCache::lookup(const std::string& real_path, uint64_t* size, int64_t* mtime_ns) const {
  if (!file_identity(real_path, size, mtime_ns)) return nullptr;
  auto it = entries_.find(real_path);
  if (it == entries_.end() || it->second.size != *size || it->second.mtime_ns != *mtime_ns) return nullptr;
  return &it->second.verdict;
}

void VerdictCache::store(const std::string& real_path, uint64_t size, int64_t mtime_ns, CachedVerdict v) {
  if (file_.empty() || real_path.find_first_of("\t\n\r") != std::string::npos) return;
  v.reason = one_field(std::move(v.reason));
  entries_[real_path] = Entry{size, mtime_ns, std::move(v)};
  dirty_ = true;
}

void VerdictCache::save() {
  if (file_.empty() || !dirty_) return;
  dirty_ = false;
  std::error_code ec;
  const fs::path target(file_);
  fs::create_directories(target.parent_path(), ec);
  // Plugins that are gone would only grow the file.
  for (auto it = entries_.begin(); it != entries_.end();)
    it = fs::exists(it->first, ec) ? std::next(it) : entries_.erase(it);
  const std::string tmp = file_ + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << header() << '\n';
    for (const auto& [path, e] : entries_) {
      char timeout[32];
      std::snprintf(timeout, sizeof timeout, "%.17g", e.verdict.timeout_s);
      out << e.size << '\t' << e.mtime_ns << '\t' << timeout << '\t' << (e.verdict.survived ? "survived" : "died")
          << '\t' << path << '\t' << e.verdict.reason << '\n';
    }
    out.close();
    if (!out) {
      logger().debug("[loader] cannot write the plugin verdict cache {}; going on without it", tmp);
      fs::remove(tmp, ec);
      return;
    }
  }
  // Concurrent starts each rename a whole file: the last one wins, none is torn.
  if (std::rename(tmp.c_str(), file_.c_str()) != 0) {
    logger().debug("[loader] cannot replace the plugin verdict cache {}; going on without it", file_);
    fs::remove(tmp, ec);
  }
}

}  // namespace spora
