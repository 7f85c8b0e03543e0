// Where the cuda and nccl plugins look for cuBLAS, cuDNN, NVRTC and NCCL
// (plugins/common/lib_search.h): NVIDIA's pip wheel directories beside the
// plugin's package, in order, then the system's own search.
#include "lib_search.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using spora::plugin::directory_of;
using spora::plugin::library_search_dirs;
using spora::plugin::nvidia_library_dirs;
using spora::plugin::nvidia_wheel_parts;
using spora::plugin::open_library;

namespace {

// A site-packages directory as pip leaves it after
// `pip install spora-plugin-cuda nvidia-cublas nvidia-cudnn-cu13 nvidia-nccl-cu13`
// (the layout of those wheels' RECORD files), without the libraries.
struct Site {
  fs::path root;
  Site() {
    char tmpl[] = "/tmp/spora-lib-search.XXXXXX";
    root = mkdtemp(tmpl);
    fs::create_directories(root / "spora_plugin_cuda");
    for (const char* part : {"cu13", "cudnn", "nccl"}) fs::create_directories(root / "nvidia" / part / "lib");
    fs::create_directories(root / "nvidia" / "cusparse" / "lib");  // not one the plugins open
  }
  ~Site() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  std::string plugin_dir() const { return (root / "spora_plugin_cuda").string(); }
  std::string lib(const char* part) const { return (root / "nvidia" / part / "lib").string(); }
};

// The system's copy of a library every Linux system has (zlib), from
// ld.so.cache.
std::string system_path_of(const char* soname) {
  void* h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!h) return "";
  char path[4096] = {};
  const bool ok = dlinfo(h, RTLD_DI_ORIGIN, path) == 0;
  dlclose(h);
  return ok ? std::string(path) + "/" + soname : "";
}

// Which file a handle came from.
std::string file_of(void* handle) {
  struct link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map) return "";
  return fs::canonical(map->l_name).string();
}

}  // namespace

TEST(LibSearch, WheelPartsForCuda13ThenCuda12Layouts) {
  EXPECT_EQ(nvidia_wheel_parts(13), (std::vector<std::string>{"cu13", "cublas", "cuda_nvrtc", "cudnn", "nccl"}));
  EXPECT_EQ(nvidia_wheel_parts(12)[0], "cu12");
}

TEST(LibSearch, WheelDirectoriesBesideThePluginPackageInOrder) {
  Site site;
  // Only the parts that exist, in the order asked (cublas and cuda_nvrtc
  // are CUDA 12 layouts, absent here); cusparse is not asked for.
  EXPECT_EQ(library_search_dirs(nullptr, site.plugin_dir(), nvidia_wheel_parts(13)),
            (std::vector<std::string>{site.lib("cu13"), site.lib("cudnn"), site.lib("nccl")}));
  // A trailing slash on the plugin directory changes nothing.
  EXPECT_EQ(library_search_dirs(nullptr, site.plugin_dir() + "/", {"nccl"}),
            (std::vector<std::string>{site.lib("nccl")}));
}

TEST(LibSearch, PathListFirstThenWheelsWithoutDuplicatesOrMissingDirectories) {
  Site site;
  Site other;  // nvidia wheels in another site-packages (pip --user, --system-site-packages)
  const std::string list = other.lib("cudnn") + "::/no/such/dir:" + site.lib("nccl") + "/:" + other.lib("cu13");
  EXPECT_EQ(library_search_dirs(list.c_str(), site.plugin_dir(), nvidia_wheel_parts(13)),
            (std::vector<std::string>{other.lib("cudnn"), site.lib("nccl"), other.lib("cu13"), site.lib("cu13"),
                                      site.lib("cudnn")}));
  EXPECT_EQ(library_search_dirs("", "", nvidia_wheel_parts(13)), std::vector<std::string>{});
}

TEST(LibSearch, WithoutWheelsTheSystemLibraryIsOpened) {
  const std::string system_zlib = system_path_of("libz.so.1");
  ASSERT_FALSE(system_zlib.empty()) << "this system has no libz.so.1 on its library path";
  // The test binary's directory has no nvidia/ beside it and the path list
  // is unset: nothing to search but the system.
  unsetenv(spora::plugin::kNvidiaLibraryPathEnv);
  const std::vector<std::string> dirs = nvidia_library_dirs(13);
  EXPECT_EQ(dirs, std::vector<std::string>{});
  std::string opened, why;
  void* h = open_library("libz.so.1", dirs, &opened, &why);
  ASSERT_NE(h, nullptr) << why;
  EXPECT_EQ(opened, "libz.so.1 (system)");
  EXPECT_EQ(file_of(h), fs::canonical(system_zlib).string());
  EXPECT_NE(dlsym(h, "zlibVersion"), nullptr);
}

TEST(LibSearch, AWheelCopyWinsOverTheSystemOne) {
  const std::string system_zlib = system_path_of("libz.so.1");
  ASSERT_FALSE(system_zlib.empty());
  Site site;
  // A real library, a copy (another file than the system's) in the wheel.
  fs::copy_file(system_zlib, site.lib("cu13") + "/libz.so.1");
  const std::vector<std::string> dirs = library_search_dirs(nullptr, site.plugin_dir(), nvidia_wheel_parts(13));
  std::string opened, why;
  void* h = open_library("libz.so.1", dirs, &opened, &why);
  ASSERT_NE(h, nullptr) << why;
  EXPECT_EQ(opened, site.lib("cu13") + "/libz.so.1");
  EXPECT_EQ(file_of(h), fs::canonical(opened).string());
}

TEST(LibSearch, AnUnusableFileIsSkippedAndReported) {
  Site site;
  std::ofstream(site.lib("cu13") + "/libspora-no-such.so.1") << "not an ELF file\n";
  const std::vector<std::string> dirs = library_search_dirs(nullptr, site.plugin_dir(), nvidia_wheel_parts(13));
  std::string opened, why;
  EXPECT_EQ(open_library("libspora-no-such.so.1", dirs, &opened, &why), nullptr);
  // Both failures are named: the wheel's file, and the system's search.
  EXPECT_NE(why.find(site.lib("cu13") + "/libspora-no-such.so.1"), std::string::npos) << why;
  EXPECT_NE(why.find("libspora-no-such.so.1: cannot open shared object file"), std::string::npos) << why;
  EXPECT_NE(why.find("nor in " + site.lib("cu13") + ":" + site.lib("cudnn") + ":" + site.lib("nccl")),
            std::string::npos)
      << why;
  why.clear();
  EXPECT_EQ(open_library("libspora-no-such.so.1", {}, &opened, &why), nullptr);
  EXPECT_NE(why.find("no NVIDIA pip wheel directories"), std::string::npos) << why;
}

TEST(LibSearch, ThePathListReachesTheSearchFromTheEnvironment) {
  Site site;
  setenv(spora::plugin::kNvidiaLibraryPathEnv, (site.lib("nccl") + ":" + site.lib("cu13")).c_str(), 1);
  EXPECT_EQ(nvidia_library_dirs(13), (std::vector<std::string>{site.lib("nccl"), site.lib("cu13")}));
  unsetenv(spora::plugin::kNvidiaLibraryPathEnv);
}

// The real NVIDIA library where this machine has one (the CUDA toolkit's
// NCCL in ld.so.cache): by soname from the system without a wheel, and from
// a wheel's layout (nvidia/nccl/lib) when one is beside the plugin.
TEST(LibSearch, RealNcclFromTheSystemAndFromTheWheelLayout) {
  const std::string system_nccl = system_path_of("libnccl.so.2");
  if (system_nccl.empty()) GTEST_SKIP() << "no libnccl.so.2 on this system";
  std::string opened, why;
  void* h = open_library("libnccl.so.2", {}, &opened, &why);
  ASSERT_NE(h, nullptr) << why;
  EXPECT_EQ(opened, "libnccl.so.2 (system)");
  EXPECT_NE(dlsym(h, "ncclGetVersion"), nullptr);

  Site site;
  fs::create_symlink(fs::canonical(system_nccl), site.lib("nccl") + "/libnccl.so.2");
  const std::vector<std::string> dirs = library_search_dirs(nullptr, site.plugin_dir(), nvidia_wheel_parts(13));
  void* w = open_library("libnccl.so.2", dirs, &opened, &why);
  ASSERT_NE(w, nullptr) << why;
  EXPECT_EQ(opened, site.lib("nccl") + "/libnccl.so.2");
  EXPECT_NE(dlsym(w, "ncclGetVersion"), nullptr);
}

TEST(LibSearch, DirectoryOfAFunctionIsItsBinarysDirectory) {
  char self[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  ASSERT_GT(n, 0);
  static const int here = 0;
  EXPECT_EQ(directory_of(&here), fs::path(self).parent_path().string());
}
