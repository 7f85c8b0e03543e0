// The collective functions of the NCCL plugin's table (nccl_collectives.cpp)
// and the communicator lookup they share (nccl_entry.cpp).
#pragma once
#include <spora/plugin.h>

#include <memory>

namespace spora::nccl {

class Comm;
spora_plugin_error_t* get_comm(const char* what, spora_comm_t* handle, std::shared_ptr<Comm>* out);

spora_plugin_error_t* all_reduce(spora_comm_t* comm, const void* send, void* recv, size_t count, int32_t dtype,
                                 int32_t op, void* native_stream, int64_t timeout_ms);
spora_plugin_error_t* all_gather(spora_comm_t* comm, const void* send, void* recv, size_t count, int32_t dtype,
                                 void* native_stream, int64_t timeout_ms);
spora_plugin_error_t* reduce_scatter(spora_comm_t* comm, const void* send, void* recv, size_t recv_count,
                                     int32_t dtype, int32_t op, void* native_stream, int64_t timeout_ms);
spora_plugin_error_t* broadcast(spora_comm_t* comm, const void* send, void* recv, size_t count, int32_t dtype,
                                int32_t root, void* native_stream, int64_t timeout_ms);
spora_plugin_error_t* all_to_all(spora_comm_t* comm, const void* send, void* recv, size_t count, int32_t dtype,
                                 void* native_stream, int64_t timeout_ms);
spora_plugin_error_t* send(spora_comm_t* comm, const void* buf, size_t count, int32_t dtype, int32_t peer,
                           void* native_stream, int64_t timeout_ms);
spora_plugin_error_t* recv(spora_comm_t* comm, void* buf, size_t count, int32_t dtype, int32_t peer,
                           void* native_stream, int64_t timeout_ms);
spora_plugin_error_t* barrier(spora_comm_t* comm, void* native_stream, int64_t timeout_ms);

}  // namespace spora::nccl
