// Entry points of libspora-collective-mpi.so: probe, the version handshake
// and the function table (mpi_api.h lists it).
#include <mpi.h>

#include <cstdio>

#include "mpi_state.h"

namespace spora::mpi {
namespace {
constexpr spora_collective_api_t kTable = SPORA_SDK_TABLE(spora_collective_api_t, SPORA_MPI_COLLECTIVE_FUNCTIONS);
char g_build[160];
}  // namespace
}  // namespace spora::mpi

extern "C" {

SPORA_PLUGIN_EXPORT void spora_plugin_probe_v1(spora_probe_result_t* out) {
  // Linking libmpi already proved the library is present; the query below
  // is allowed before MPI_Init and checks it answers.
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int len = 0;
  if (MPI_Get_library_version(version, &len) != MPI_SUCCESS)
    return spora_sdk_probe_answer(out, 0, "libmpi does not answer MPI_Get_library_version; reinstall openmpi");
  spora_sdk_probe_answer(out, 10, "");
}

SPORA_PLUGIN_EXPORT spora_plugin_error_t* spora_plugin_entry_v1(const spora_host_t* host, spora_plugin_info_t* out) {
  char why[SPORA_SDK_MESSAGE_MAX];
  if (const int32_t code = spora_sdk_check_entry(host, out, "mpi", why, sizeof why))
    return spora::plugin::make_error(code, why);
  spora::mpi::g_host = host;
  int major = 0, minor = 0;
  MPI_Get_version(&major, &minor);
  std::snprintf(spora::mpi::g_build, sizeof spora::mpi::g_build, "MPI %d.%d (Open MPI %d.%d.%d headers)", major,
                minor, OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION, OMPI_RELEASE_VERSION);
  spora_sdk_fill_info(out, SPORA_PLUGIN_KIND_COLLECTIVE, "mpi", "0.1.0", spora::mpi::g_build, &spora::mpi::kTable);
  return nullptr;
}

}  // extern "C"
