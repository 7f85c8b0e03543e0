// libnccl.so.2, opened at initialize with dlopen rather than linked, so the
// plugin loads (and reports why it cannot run) on machines without NCCL.
// The function pointer types come from nccl.h itself, so a signature change
// there is a compile error here.
#pragma once
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <spora/plugin.h>

#include <string>

namespace spora::nccl {

struct Lib {
#define SPORA_NCCL_FN(name) decltype(&::name) name = nullptr;
  SPORA_NCCL_FN(ncclGetVersion)
  SPORA_NCCL_FN(ncclGetUniqueId)
  SPORA_NCCL_FN(ncclCommInitRankConfig)
  SPORA_NCCL_FN(ncclCommSplit)
  SPORA_NCCL_FN(ncclCommAbort)
  SPORA_NCCL_FN(ncclCommDestroy)
  SPORA_NCCL_FN(ncclCommGetAsyncError)
  SPORA_NCCL_FN(ncclCommCount)
  SPORA_NCCL_FN(ncclCommUserRank)
  SPORA_NCCL_FN(ncclGetErrorString)
  SPORA_NCCL_FN(ncclGetLastError)
  SPORA_NCCL_FN(ncclAllReduce)
  SPORA_NCCL_FN(ncclAllGather)
  SPORA_NCCL_FN(ncclReduceScatter)
  SPORA_NCCL_FN(ncclBroadcast)
  SPORA_NCCL_FN(ncclSend)
  SPORA_NCCL_FN(ncclRecv)
  SPORA_NCCL_FN(ncclGroupStart)
  SPORA_NCCL_FN(ncclGroupEnd)
#undef SPORA_NCCL_FN
  int version = 0;
};

// The library, or NULL before a successful initialize.
const Lib* lib();
// dlopens libnccl.so.2 and checks the CUDA runtime sees a device; the error
// names what is missing ("no device: cudaGetDeviceCount returned 35 ...").
spora_plugin_error_t* open_lib();

// "[nccl] <what>: <call> returned <nccl error string>".
spora_plugin_error_t* nccl_error(ncclResult_t r, const std::string& what, const char* call);
spora_plugin_error_t* cuda_error(cudaError_t r, const std::string& what, const char* call);
spora_plugin_error_t* invalid(const std::string& message);

void host_log(int32_t level, const std::string& message);
// An integer from the host's config ("nccl.init_timeout_ms" is
// SPORA_NCCL_INIT_TIMEOUT_MS); `fallback` when unset or not a number.
int64_t config_int(const char* key, int64_t fallback);
extern const spora_host_t* g_host;

}  // namespace spora::nccl
