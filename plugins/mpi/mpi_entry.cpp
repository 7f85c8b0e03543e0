// Entry points of libspora-collective-mpi.so: probe, the version handshake
// and the function table.
#include <mpi.h>

#include <cstdio>
#include <cstring>

#include "mpi_state.h"

namespace spora::mpi {
extern const spora_host_t* g_host;
spora_plugin_error_t* initialize();
void shutdown();
spora_plugin_error_t* get_unique_id(spora_comm_id_t*);
spora_plugin_error_t* comm_init(const spora_comm_id_t*, int32_t, int32_t, int32_t, spora_comm_t**);
spora_plugin_error_t* comm_split(spora_comm_t*, int32_t, int32_t, spora_comm_t**);
spora_plugin_error_t* comm_abort(spora_comm_t*);
spora_plugin_error_t* comm_destroy(spora_comm_t*);
spora_plugin_error_t* comm_async_error(spora_comm_t*, spora_plugin_error_t**);
spora_plugin_error_t* comm_rank(spora_comm_t*, int32_t*, int32_t*);

namespace {
const spora_collective_api_t kApi = [] {
  spora_collective_api_t t{};
  t.struct_size = sizeof(t);
  t.initialize = initialize;
  t.get_unique_id = get_unique_id;
  t.comm_init = comm_init;
  t.comm_split = comm_split;
  t.comm_abort = comm_abort;
  t.comm_destroy = comm_destroy;
  t.comm_async_error = comm_async_error;
  t.comm_rank = comm_rank;
  t.all_reduce = all_reduce;
  t.all_gather = all_gather;
  t.reduce_scatter = reduce_scatter;
  t.broadcast = broadcast;
  t.all_to_all = all_to_all;
  t.send = send;
  t.recv = recv;
  t.barrier = barrier;
  t.shutdown = shutdown;
  return t;
}();

char g_build[160];
}  // namespace
}  // namespace spora::mpi

extern "C" {

SPORA_PLUGIN_EXPORT void spora_plugin_probe_v1(spora_probe_result_t* out) {
  if (!out) return;
  // Linking libmpi already proved the library is present; the query below
  // is allowed before MPI_Init and checks it answers.
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int len = 0;
  if (MPI_Get_library_version(version, &len) != MPI_SUCCESS) {
    out->score = 0;
    std::snprintf(out->reason, sizeof out->reason, "libmpi does not answer MPI_Get_library_version; reinstall openmpi");
    return;
  }
  out->score = 10;
}

SPORA_PLUGIN_EXPORT spora_plugin_error_t* spora_plugin_entry_v1(const spora_host_t* host, spora_plugin_info_t* out) {
  if (!host || !out)
    return spora::plugin::make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[mpi] entry: host or out is null");
  if (host->abi_major != SPORA_PLUGIN_ABI_MAJOR)
    return spora::plugin::make_error(SPORA_PLUGIN_UNIMPLEMENTED, "[mpi] entry: host speaks plugin ABI " +
                                                                     std::to_string(host->abi_major) + ", plugin 1");
  spora::mpi::g_host = host;
  int major = 0, minor = 0;
  MPI_Get_version(&major, &minor);
  std::snprintf(spora::mpi::g_build, sizeof spora::mpi::g_build, "MPI %d.%d (Open MPI %d.%d.%d headers)", major,
                minor, OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION, OMPI_RELEASE_VERSION);
  out->abi_major = SPORA_PLUGIN_ABI_MAJOR;
  out->abi_minor = SPORA_PLUGIN_ABI_MINOR;
  out->kind = SPORA_PLUGIN_KIND_COLLECTIVE;
  out->name = "mpi";
  out->version = "0.1.0";
  out->build = spora::mpi::g_build;
  out->api = &spora::mpi::kApi;
  return nullptr;
}

}  // extern "C"
