// Exported entry points, the collective table and the communicator
// lifecycle of the NCCL plugin. Collectives are in nccl_collectives.cpp.
//
// No CUDA device exists where this was written: past initialize's
// cudaGetDeviceCount (error 35 there), nothing here ever ran.
#include <dlfcn.h>

#include <cstring>
#include <string>

#include "error.h"
#include "handle_table.h"
#include "nccl_api.h"
#include "nccl_comm.h"

namespace spora::nccl {

using spora::plugin::guard;
using spora::plugin::make_error;

plugin::HandleTable<Comm>& comms() {
  static plugin::HandleTable<Comm> t;
  return t;
}

spora_plugin_error_t* get_comm(const char* what, spora_comm_t* handle, std::shared_ptr<Comm>* out) {
  *out = comms().find(handle);
  if (!*out) return invalid(std::string(what) + ": " + (handle ? "unknown or destroyed communicator" : "comm is NULL"));
  return nullptr;
}

spora_plugin_error_t* initialize() { return guard("nccl", [] { return open_lib(); }); }

namespace {

spora_plugin_error_t* ready() {
  if (!lib()) return make_error(SPORA_PLUGIN_UNAVAILABLE, "[nccl] not initialised (initialize failed or was not called)");
  return nullptr;
}

}  // namespace

spora_plugin_error_t* get_unique_id(spora_comm_id_t* out) {
  return guard("nccl", [&]() -> spora_plugin_error_t* {
    if (!out) return invalid("get_unique_id: out is NULL");
    if (auto* e = ready()) return e;
    static_assert(sizeof(ncclUniqueId) <= sizeof(spora_comm_id_t), "NCCL's unique id must fit spora_comm_id_t");
    ncclUniqueId id;
    if (ncclResult_t r = lib()->ncclGetUniqueId(&id); r != ncclSuccess)
      return nccl_error(r, "get_unique_id", "ncclGetUniqueId");
    std::memset(out, 0, sizeof *out);
    std::memcpy(out->bytes, &id, sizeof id);
    return nullptr;
  });
}

namespace {

// Wraps a freshly created (possibly still initialising) communicator and
// waits for its initialisation: forever, or SPORA_NCCL_INIT_TIMEOUT_MS
// (the table's comm_init has no timeout argument, and until it returns
// nobody holds a handle to abort it with).
spora_plugin_error_t* adopt(ncclComm_t c, int32_t device, const char* what, spora_comm_t** out) {
  auto comm = std::make_shared<Comm>(c, device);
  if (auto* e = comm->wait_issued(what, config_int("nccl.init_timeout_ms", -1))) return e;
  *out = static_cast<spora_comm_t*>(comms().add(std::move(comm)));
  return nullptr;
}

}  // namespace

spora_plugin_error_t* comm_init(const spora_comm_id_t* id, int32_t rank, int32_t size, int32_t device,
                                spora_comm_t** out) {
  return guard("nccl", [&]() -> spora_plugin_error_t* {
    if (!id || !out) return invalid("comm_init: id or out is NULL");
    if (auto* e = ready()) return e;
    if (device < 0) return invalid("comm_init: NCCL communicators live on a CUDA device; device must be >= 0");
    if (size < 1 || rank < 0 || rank >= size)
      return invalid("comm_init: rank " + std::to_string(rank) + " is not in [0, " + std::to_string(size) + ")");
    if (cudaError_t r = cudaSetDevice(device); r != cudaSuccess) return cuda_error(r, "comm_init", "cudaSetDevice");
    ncclUniqueId uid;
    std::memcpy(&uid, id->bytes, sizeof uid);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // see nccl_comm.h
    ncclComm_t c = nullptr;
    const ncclResult_t r = lib()->ncclCommInitRankConfig(&c, size, uid, rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) return nccl_error(r, "comm_init", "ncclCommInitRankConfig");
    return adopt(c, device, "comm_init", out);
  });
}

spora_plugin_error_t* comm_split(spora_comm_t* comm, int32_t color, int32_t key, spora_comm_t** out) {
  return guard("nccl", [&]() -> spora_plugin_error_t* {
    if (!out) return invalid("comm_split: out is NULL");
    std::shared_ptr<Comm> c;
    if (auto* e = get_comm("comm_split", comm, &c)) return e;
    ncclComm_t child = nullptr;
    if (auto* e = c->split(color, key, &child)) return e;
    *out = nullptr;
    if (color < 0 || !child) return nullptr;  // not part of any group
    return adopt(child, c->device(), "comm_split", out);
  });
}

spora_plugin_error_t* comm_abort(spora_comm_t* comm) {
  return guard("nccl", [&]() -> spora_plugin_error_t* {
    std::shared_ptr<Comm> c;
    if (auto* e = get_comm("comm_abort", comm, &c)) return e;
    c->abort(SPORA_PLUGIN_ABORTED, "[nccl] communicator aborted by comm_abort");
    return nullptr;
  });
}

spora_plugin_error_t* comm_destroy(spora_comm_t* comm) {
  return guard("nccl", [&]() -> spora_plugin_error_t* {
    std::shared_ptr<Comm> c = comms().remove(comm);
    if (!c) return invalid(std::string("comm_destroy: ") + (comm ? "unknown or destroyed communicator" : "comm is NULL"));
    return c->destroy();
  });
}

spora_plugin_error_t* comm_async_error(spora_comm_t* comm, spora_plugin_error_t** out) {
  return guard("nccl", [&]() -> spora_plugin_error_t* {
    if (!out) return invalid("comm_async_error: out is NULL");
    std::shared_ptr<Comm> c;
    if (auto* e = get_comm("comm_async_error", comm, &c)) return e;
    *out = c->health();
    return nullptr;
  });
}

spora_plugin_error_t* comm_rank(spora_comm_t* comm, int32_t* out_rank, int32_t* out_size) {
  return guard("nccl", [&]() -> spora_plugin_error_t* {
    std::shared_ptr<Comm> c;
    if (auto* e = get_comm("comm_rank", comm, &c)) return e;
    return c->rank(out_rank, out_size);
  });
}

void shutdown() {
  // Communicators the host forgot: destroy them so NCCL's proxy threads end.
  for (auto& c : comms().all())
    if (spora_plugin_error_t* e = c->destroy()) e->destroy(e);
  comms().clear();
}

namespace {

// NCCL moves CUDA device memory on CUDA streams: the host binds each
// communicator to a cuda device and passes device tensors and the cuda
// plugin's native streams (plugin.h, SPORA_EXT_COLLECTIVE_DEVICE).
constexpr spora_ext_collective_device_t kOnCuda = {{sizeof(spora_ext_collective_device_t), SPORA_EXT_COLLECTIVE_DEVICE, nullptr},
                                                   "cuda"};
spora_collective_api_t make_table() {
  spora_collective_api_t t = SPORA_SDK_TABLE(spora_collective_api_t, SPORA_NCCL_COLLECTIVE_FUNCTIONS);
  t.extensions = &kOnCuda.header;
  return t;
}
const spora_collective_api_t kTable = make_table();

#define SPORA_NCCL_STR2(x) #x
#define SPORA_NCCL_STR(x) SPORA_NCCL_STR2(x)
constexpr const char* kBuild = "NCCL " SPORA_NCCL_STR(NCCL_MAJOR) "." SPORA_NCCL_STR(NCCL_MINOR)
    " headers (libnccl.so.2 opened at run time), CUDA runtime linked statically";

}  // namespace
}  // namespace spora::nccl

extern "C" {

// Side-effect free: it only checks, by dlopen and dlclose (which plugin.h
// allows), that the CUDA driver library exists. Without it the CUDA runtime
// cannot see a device: cudaGetDeviceCount returns error 35, which
// initialize() reports word for word if the host calls it anyway.
SPORA_PLUGIN_EXPORT void spora_plugin_probe_v1(spora_probe_result_t* out) {
  if (void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL)) {
    dlclose(h);
    return spora_sdk_probe_answer(out, 50, "");
  }
  spora_sdk_probe_answer(out, 0,
                         "no device: no CUDA driver (libcuda.so.1 not found), so cudaGetDeviceCount returns 35 "
                         "(cudaErrorInsufficientDriver) and NCCL cannot run; install the NVIDIA driver");
}

SPORA_PLUGIN_EXPORT spora_plugin_error_t* spora_plugin_entry_v1(const spora_host_t* host, spora_plugin_info_t* out) {
  char why[SPORA_SDK_MESSAGE_MAX];
  if (const int32_t code = spora_sdk_check_entry(host, out, "nccl", why, sizeof why))
    return spora::plugin::make_error(code, why);
  spora::nccl::g_host = host;
  spora_sdk_fill_info(out, SPORA_PLUGIN_KIND_COLLECTIVE, "nccl", "0.1.0", spora::nccl::kBuild, &spora::nccl::kTable);
  return nullptr;
}

}  // extern "C"
