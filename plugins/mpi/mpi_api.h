// The functions behind the mpi plugin's spora_collective_api_t table, by the
// file that defines them.
#pragma once
#include <spora/sdk/plugin_table.h>

#define SPORA_MPI_COLLECTIVE_FUNCTIONS(X)                                                   \
  /* mpi_comm.cpp: MPI setup and communicators */                                            \
  X(initialize) X(shutdown) X(get_unique_id) X(comm_init) X(comm_split) X(comm_abort)       \
  X(comm_destroy) X(comm_async_error) X(comm_rank)                                          \
  /* mpi_ops.cpp: host-memory collectives over non-blocking MPI calls, polled */            \
  X(all_reduce) X(all_gather) X(reduce_scatter) X(broadcast) X(all_to_all) X(send) X(recv)  \
  X(barrier)

namespace spora::mpi {
SPORA_SDK_DECLARE_COLLECTIVE_FUNCTIONS(SPORA_MPI_COLLECTIVE_FUNCTIONS)
}  // namespace spora::mpi
