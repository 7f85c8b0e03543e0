// The functions behind the NCCL plugin's spora_collective_api_t table, by
// the file that defines them, and the communicator lookup they share.
#pragma once
#include <spora/sdk/plugin_table.h>

#include <memory>

#define SPORA_NCCL_COLLECTIVE_FUNCTIONS(X)                                                  \
  /* nccl_entry.cpp: libnccl.so.2 opened at initialize, communicators */                     \
  X(initialize) X(shutdown) X(get_unique_id) X(comm_init) X(comm_split) X(comm_abort)       \
  X(comm_destroy) X(comm_async_error) X(comm_rank)                                          \
  /* nccl_collectives.cpp: NCCL calls on the device plugin's native stream */               \
  X(all_reduce) X(all_gather) X(reduce_scatter) X(broadcast) X(all_to_all) X(send) X(recv)  \
  X(barrier)

namespace spora::nccl {

class Comm;
spora_plugin_error_t* get_comm(const char* what, spora_comm_t* handle, std::shared_ptr<Comm>* out);

SPORA_SDK_DECLARE_COLLECTIVE_FUNCTIONS(SPORA_NCCL_COLLECTIVE_FUNCTIONS)

}  // namespace spora::nccl
