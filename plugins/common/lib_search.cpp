// Finding vendor libraries in NVIDIA's pip wheels, then on the system.
#include "lib_search.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>

namespace spora::plugin {

namespace {

bool is_dir(const std::string& path) {
  struct stat st {};
  return !path.empty() && stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_file(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode);
}

std::string parent(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return "";
  return slash == 0 ? "/" : path.substr(0, slash);
}

void add_unique(std::vector<std::string>* out, std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (is_dir(dir) && std::find(out->begin(), out->end(), dir) == out->end()) out->push_back(dir);
}

}  // namespace

std::vector<std::string> nvidia_wheel_parts(int cuda_major) {
  return {"cu" + std::to_string(cuda_major), "cublas", "cuda_nvrtc", "cudnn", "nccl"};
}

std::vector<std::string> library_search_dirs(const char* path_list, const std::string& plugin_dir,
                                             const std::vector<std::string>& parts) {
  std::vector<std::string> out;
  if (path_list) {
    const std::string list = path_list;
    size_t start = 0;
    while (start <= list.size()) {
      size_t end = list.find(':', start);
      if (end == std::string::npos) end = list.size();
      if (end > start) add_unique(&out, list.substr(start, end - start));
      start = end + 1;
    }
  }
  const std::string site = parent(plugin_dir);
  if (!site.empty()) {
    for (const std::string& part : parts) add_unique(&out, site + "/nvidia/" + part + "/lib");
  }
  return out;
}

std::string directory_of(const void* address) {
  Dl_info info{};
  if (!dladdr(address, &info) || !info.dli_fname || !*info.dli_fname) return "";
  char* real = realpath(info.dli_fname, nullptr);
  std::string path = real ? real : info.dli_fname;
  std::free(real);
  return parent(path);
}

void* open_library(const std::string& soname, const std::vector<std::string>& dirs, std::string* opened,
                   std::string* why) {
  std::string tried;
  for (const std::string& dir : dirs) {
    const std::string path = dir + "/" + soname;
    if (!is_file(path)) continue;
    if (void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      *opened = path;
      return h;
    }
    // There but unusable (another architecture, a dependency missing): say
    // so, and go on to the next place.
    const char* e = dlerror();
    tried += (tried.empty() ? "" : "; ") + (e ? std::string(e) : path + ": cannot be opened");
  }
  if (void* h = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL)) {
    *opened = soname + " (system)";
    return h;
  }
  const char* e = dlerror();
  tried += (tried.empty() ? "" : "; ") + (e ? std::string(e) : soname + " not found");
  if (dirs.empty()) {
    tried += " (no NVIDIA pip wheel directories: none beside the plugin, " + std::string(kNvidiaLibraryPathEnv) +
             " unset)";
  } else {
    std::string list;
    for (const std::string& d : dirs) list += (list.empty() ? "" : ":") + d;
    tried += " (nor in " + list + ")";
  }
  *why = tried;
  return nullptr;
}

std::vector<std::string> nvidia_library_dirs(int cuda_major) {
  // An object of this file: it lies in the plugin's own shared object.
  static const char anchor = 0;
  return library_search_dirs(std::getenv(kNvidiaLibraryPathEnv), directory_of(&anchor),
                             nvidia_wheel_parts(cuda_major));
}

}  // namespace spora::plugin
