// Where the NVIDIA plugins (cuda, nccl) find the vendor libraries they open
// at run time (cuBLAS, cuBLASLt, cuDNN, NVRTC, NCCL): first in the lib
// directories of NVIDIA's pip wheels (nvidia-cublas, nvidia-cudnn-cu13,
// nvidia-nccl-cu13, ...), so `pip install spora-plugin-cuda nvidia-cudnn-cu13`
// works without LD_LIBRARY_PATH; then the system's own search.
//
// The wheels unpack into <site-packages>/nvidia/<part>/lib: CUDA 13's
// (nvidia-cublas 13.x, nvidia-cuda-nvrtc 13.x) share nvidia/cu13/lib,
// cuDNN's is nvidia/cudnn/lib, NCCL's nvidia/nccl/lib, and CUDA 12's
// nvidia-*-cu12 wheels have one per library (nvidia/cublas/lib, ...).
#pragma once

#include <string>
#include <vector>

namespace spora::plugin {

// The environment variable holding extra directories to search first
// (':'-separated); `import spora` sets it to the nvidia/<part>/lib
// directories of every site-packages on sys.path when it is unset.
inline constexpr const char* kNvidiaLibraryPathEnv = "SPORA_NVIDIA_LIBRARY_PATH";

// The <part> directories under nvidia/ that may hold the libraries of CUDA
// `cuda_major`, most specific first: "cu<major>", then CUDA 12's per-library
// ones (cublas, cuda_nvrtc, cudnn, nccl).
std::vector<std::string> nvidia_wheel_parts(int cuda_major);

// The directories to search, in order, without duplicates and keeping only
// those that exist: each entry of `path_list` (a ':'-separated list, e.g.
// the value of kNvidiaLibraryPathEnv; may be null), then
// <site>/nvidia/<part>/lib for each of `parts`, where <site> is the parent
// of `plugin_dir` (the plugin wheel's package directory lies in
// site-packages, beside the nvidia/ namespace package).
std::vector<std::string> library_search_dirs(const char* path_list, const std::string& plugin_dir,
                                             const std::vector<std::string>& parts);

// The directory of the shared object that contains `address` (a function of
// the calling plugin); "" if it cannot be told.
std::string directory_of(const void* address);

// dlopen(RTLD_NOW | RTLD_LOCAL) `soname` from the first of `dirs` that has
// it, else by `soname` alone (the system: LD_LIBRARY_PATH, ld.so.cache, the
// default directories). Returns the handle, or null with *why saying what
// was tried and why each failed. *opened gets the file opened, or
// "<soname> (system)" for the system's search.
void* open_library(const std::string& soname, const std::vector<std::string>& dirs, std::string* opened,
                   std::string* why);

// library_search_dirs(getenv(kNvidiaLibraryPathEnv), <the directory of the
// plugin this file is linked into>, nvidia_wheel_parts(cuda_major)): what a
// plugin calls.
std::vector<std::string> nvidia_library_dirs(int cuda_major);

}  // namespace spora::plugin
