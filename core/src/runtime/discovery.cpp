// Plugin discovery: where to look and which files are candidates.
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "runtime/context.h"
#include "support/log.h"

namespace spora {
namespace fs = std::filesystem;

std::string libspora_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&libspora_dir), &info) && info.dli_fname) {
    std::error_code ec;
    fs::path p = fs::canonical(info.dli_fname, ec);
    if (!ec) return p.parent_path().string();
  }
  return {};
}

namespace {
// A path the user named that does not exist is most likely a typo: say so,
// with the path and where it came from. (The default directory may
// legitimately be absent, e.g. a libspora without plugins.)
void warn_if_missing(const std::string& path, const char* source) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    logger().warn("[loader] plugin path '{}' ({}) does not exist; no plugins are loaded from it", path, source);
}
}  // namespace

std::vector<std::string> plugin_search_path(const std::vector<std::string>& explicit_paths) {
  std::vector<std::string> out = explicit_paths;
  for (const auto& p : explicit_paths) warn_if_missing(p, "added with spora_context_add_plugin_path");
  if (const char* env = std::getenv("SPORA_PLUGIN_PATH")) {
    std::stringstream ss(env);
    std::string item;
    while (std::getline(ss, item, ':')) {
      if (item.empty()) continue;
      warn_if_missing(item, "from SPORA_PLUGIN_PATH");
      out.push_back(item);
    }
  }
  const std::string dir = libspora_dir();
  if (!dir.empty()) out.push_back(dir + "/spora/plugins");
  return out;
}

std::vector<std::string> plugin_candidates(const std::string& path) {
  std::vector<std::string> out;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    for (const auto& e : fs::directory_iterator(path, ec)) {
      const std::string f = e.path().filename().string();
      const bool named = (f.rfind("libspora-device-", 0) == 0 || f.rfind("libspora-collective-", 0) == 0) &&
                         f.size() > 3 && f.compare(f.size() - 3, 3, ".so") == 0;
      if (named) out.push_back(fs::absolute(e.path()).string());
    }
    std::sort(out.begin(), out.end());
  } else if (fs::exists(path, ec)) {
    out.push_back(fs::absolute(path).string());
  } else {
    logger().debug("[loader] plugin path {} does not exist", path);
  }
  return out;
}

}  // namespace spora
