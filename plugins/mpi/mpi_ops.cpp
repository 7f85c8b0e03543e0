// The data-moving collectives over MPI's non-blocking calls, for host
// memory and every spora dtype. 16-bit floats reduce through user-defined
// MPI ops that compute in float; AVG is a sum divided by the size after the
// reduction (integers truncate toward zero, as C division does).
#include <climits>
#include <cstring>

#include "dtypes.h"
#include "mpi_state.h"

namespace spora::mpi {
namespace {

using plugin::bf16;
using plugin::f16;

// [sum, prod, max, min] for f16 and bf16.
MPI_Op g_half_ops[2][4] = {{MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL},
                           {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL}};

template <class H, int Op>
void half_reduce(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const H*>(in);
  auto* b = static_cast<H*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = static_cast<float>(a[i]), y = static_cast<float>(b[i]);
    float r;
    if constexpr (Op == 0) r = x + y;
    else if constexpr (Op == 1) r = x * y;
    else if constexpr (Op == 2) r = (x > y || x != x) ? x : y;  // a NaN wins, as in the cpu kernels
    else r = (x < y || x != x) ? x : y;
    b[i] = H(r);
  }
}

const char* op_name(int32_t op) {
  switch (op) {
    case SPORA_REDUCE_SUM: return "sum";
    case SPORA_REDUCE_PROD: return "prod";
    case SPORA_REDUCE_MAX: return "max";
    case SPORA_REDUCE_MIN: return "min";
    case SPORA_REDUCE_AVG: return "avg";
    default: return "?";
  }
}

size_t elem_size(int32_t dtype) {
  switch (dtype) {
    case SPORA_DTYPE_F64: case SPORA_DTYPE_I64: return 8;
    case SPORA_DTYPE_F32: case SPORA_DTYPE_I32: return 4;
    case SPORA_DTYPE_F16: case SPORA_DTYPE_BF16: return 2;
    case SPORA_DTYPE_U8: case SPORA_DTYPE_BOOL: return 1;
    default: return 0;
  }
}

// The MPI type that moves elements of `dtype` (16-bit floats as raw bits).
MPI_Datatype mpi_type(int32_t dtype) {
  switch (dtype) {
    case SPORA_DTYPE_F32: return MPI_FLOAT;
    case SPORA_DTYPE_F64: return MPI_DOUBLE;
    case SPORA_DTYPE_F16: case SPORA_DTYPE_BF16: return MPI_UINT16_T;
    case SPORA_DTYPE_I32: return MPI_INT32_T;
    case SPORA_DTYPE_I64: return MPI_INT64_T;
    case SPORA_DTYPE_U8: case SPORA_DTYPE_BOOL: return MPI_UINT8_T;
    default: return MPI_DATATYPE_NULL;
  }
}

// The MPI op for a reduction (AVG reduces as SUM). Bool reduces logically:
// sum and max are "or", prod and min are "and", on 0/1 bytes.
spora_plugin_error_t* mpi_op(int32_t dtype, int32_t op, const char* what, MPI_Op* out) {
  const int32_t base = op == SPORA_REDUCE_AVG ? SPORA_REDUCE_SUM : op;
  if (base < SPORA_REDUCE_SUM || base > SPORA_REDUCE_MIN)
    return make_error(SPORA_PLUGIN_INVALID_ARGUMENT,
                      std::string("[mpi] ") + what + ": unknown reduce op " + std::to_string(op));
  if (dtype == SPORA_DTYPE_BOOL) {
    if (op == SPORA_REDUCE_AVG)
      return make_error(SPORA_PLUGIN_UNIMPLEMENTED, std::string("[mpi] ") + what + ": avg of bool is not defined");
    *out = (base == SPORA_REDUCE_SUM || base == SPORA_REDUCE_MAX) ? MPI_MAX : MPI_MIN;
    return nullptr;
  }
  if (dtype == SPORA_DTYPE_F16 || dtype == SPORA_DTYPE_BF16) {
    *out = g_half_ops[dtype == SPORA_DTYPE_BF16][base - 1];
    return nullptr;
  }
  static const MPI_Op ops[4] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN};
  *out = ops[base - 1];
  return nullptr;
}

template <class T>
void divide(void* buf, size_t n, int size) {
  auto* p = static_cast<T*>(buf);
  for (size_t i = 0; i < n; ++i) {
    if constexpr (plugin::is_half_v<T>) p[i] = T(static_cast<float>(p[i]) / static_cast<float>(size));
    else p[i] = static_cast<T>(p[i] / static_cast<T>(size));
  }
}

void divide_by_size(void* buf, size_t n, int32_t dtype, int size) {
  switch (dtype) {
    case SPORA_DTYPE_F32: divide<float>(buf, n, size); break;
    case SPORA_DTYPE_F64: divide<double>(buf, n, size); break;
    case SPORA_DTYPE_F16: divide<f16>(buf, n, size); break;
    case SPORA_DTYPE_BF16: divide<bf16>(buf, n, size); break;
    case SPORA_DTYPE_I32: divide<int32_t>(buf, n, size); break;
    case SPORA_DTYPE_I64: divide<int64_t>(buf, n, size); break;
    case SPORA_DTYPE_U8: divide<uint8_t>(buf, n, size); break;
    default: break;
  }
}

// Checks shared by every data-moving call. `elems` is the largest element
// count one MPI call carries (MPI counts are int).
spora_plugin_error_t* check_call(spora_comm_t* comm, const char* what, int32_t dtype, size_t elems,
                                 void* native_stream, std::initializer_list<const void*> bufs) {
  if (auto* e = check_usable(comm, what)) return e;
  if (native_stream)
    return make_error(SPORA_PLUGIN_INVALID_ARGUMENT,
                      std::string("[mpi] ") + what +
                          ": this plugin moves host memory synchronously; pass native_stream = NULL");
  if (mpi_type(dtype) == MPI_DATATYPE_NULL)
    return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, std::string("[mpi] ") + what + ": unknown dtype " +
                                                         std::to_string(dtype));
  if (elems > static_cast<size_t>(INT_MAX))
    return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, std::string("[mpi] ") + what + ": " + std::to_string(elems) +
                                                         " elements exceed MPI's int count; split the buffer");
  for (const void* b : bufs)
    if (!b && elems > 0)
      return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, std::string("[mpi] ") + what + ": a buffer is null");
  return nullptr;
}

// Starts a request with `start` (under the MPI lock) and waits for it.
template <class Start>
spora_plugin_error_t* run(spora_comm_t* comm, const char* what, int64_t timeout_ms, Start&& start) {
  MPI_Request req = MPI_REQUEST_NULL;
  {
    auto lock = mpi_lock();
    if (auto* e = mpi_error(start(&req), what)) return e;
  }
  return wait(comm, req, what, timeout_ms);
}

const void* in_place(const void* send, const void* recv) { return send == recv ? MPI_IN_PLACE : send; }

// From this size all_reduce runs as a ring (bench_collective_allreduce: the
// ring wins from 256 KiB on 2 ranks; below, MPI_Iallreduce's latency did).
// Below it, 2 ranks swap whole buffers (mpi_pair.cpp): as fast as the ring
// or faster up to 128 KiB (32 KiB: 11-13 us against 14-16), and 0.6-0.75x
// MPI_Iallreduce's time from 4 to 128 KiB. More ranks keep MPI_Iallreduce,
// not measured against anything else (2 cores).
constexpr size_t kRingBytes = 256 << 10;

}  // namespace

void create_half_ops() {
  MPI_Op_create(&half_reduce<f16, 0>, 1, &g_half_ops[0][0]);
  MPI_Op_create(&half_reduce<f16, 1>, 1, &g_half_ops[0][1]);
  MPI_Op_create(&half_reduce<f16, 2>, 1, &g_half_ops[0][2]);
  MPI_Op_create(&half_reduce<f16, 3>, 1, &g_half_ops[0][3]);
  MPI_Op_create(&half_reduce<bf16, 0>, 1, &g_half_ops[1][0]);
  MPI_Op_create(&half_reduce<bf16, 1>, 1, &g_half_ops[1][1]);
  MPI_Op_create(&half_reduce<bf16, 2>, 1, &g_half_ops[1][2]);
  MPI_Op_create(&half_reduce<bf16, 3>, 1, &g_half_ops[1][3]);
}

void free_half_ops() {
  for (auto& row : g_half_ops)
    for (MPI_Op& op : row)
      if (op != MPI_OP_NULL) MPI_Op_free(&op);
}

spora_plugin_error_t* all_reduce(spora_comm_t* comm, const void* send, void* recv, size_t count, int32_t dtype,
                                 int32_t op, void* native_stream, int64_t timeout_ms) {
  return plugin::guard("mpi all_reduce", [&]() -> spora_plugin_error_t* {
    const std::string what = std::string("all_reduce(") + op_name(op) + ")";
    if (auto* e = check_call(comm, what.c_str(), dtype, count, native_stream, {send, recv})) return e;
    MPI_Op mop;
    if (auto* e = mpi_op(dtype, op, what.c_str(), &mop)) return e;
    if (count == 0) return nullptr;
    // Large buffers: a ring of point-to-point steps (mpi_ring.cpp: Open MPI's
    // MPI_Iallreduce runs at half its blocking call's speed there); small
    // ones on 2 ranks: one exchange (mpi_pair.cpp); small ones on more
    // ranks: MPI_Iallreduce, whose latency a ring's 2(n-1) steps would exceed.
    const size_t bytes = count * elem_size(dtype);
    const bool ring = comm->size > 1 && bytes >= kRingBytes && count >= static_cast<size_t>(comm->size);
    if (ring || comm->size == 2) {
      if (send != recv) std::memcpy(recv, send, bytes);
      auto* algo = ring ? &ring_all_reduce : &pair_all_reduce;
      if (auto* e = algo(comm, recv, count, elem_size(dtype), mpi_type(dtype), mop, what.c_str(), timeout_ms)) return e;
    } else if (auto* e = run(comm, what.c_str(), timeout_ms, [&](MPI_Request* r) {
                 return MPI_Iallreduce(in_place(send, recv), recv, static_cast<int>(count), mpi_type(dtype), mop,
                                       comm->comm, r);
               })) {
      return e;
    }
    if (op == SPORA_REDUCE_AVG) divide_by_size(recv, count, dtype, comm->size);
    return nullptr;
  });
}

spora_plugin_error_t* all_gather(spora_comm_t* comm, const void* send, void* recv, size_t count, int32_t dtype,
                                 void* native_stream, int64_t timeout_ms) {
  return plugin::guard("mpi all_gather", [&]() -> spora_plugin_error_t* {
    if (auto* e = check_call(comm, "all_gather", dtype, count * static_cast<size_t>(comm ? comm->size : 1),
                             native_stream, {send, recv}))
      return e;
    if (count == 0) return nullptr;
    // In place when this rank's block already sits where it belongs.
    const auto* mine = static_cast<const char*>(recv) + static_cast<size_t>(comm->rank) * count * elem_size(dtype);
    const void* s = send == mine ? MPI_IN_PLACE : send;
    return run(comm, "all_gather", timeout_ms, [&](MPI_Request* r) {
      return MPI_Iallgather(s, static_cast<int>(count), mpi_type(dtype), recv, static_cast<int>(count),
                            mpi_type(dtype), comm->comm, r);
    });
  });
}

spora_plugin_error_t* reduce_scatter(spora_comm_t* comm, const void* send, void* recv, size_t recv_count,
                                     int32_t dtype, int32_t op, void* native_stream, int64_t timeout_ms) {
  return plugin::guard("mpi reduce_scatter", [&]() -> spora_plugin_error_t* {
    const std::string what = std::string("reduce_scatter(") + op_name(op) + ")";
    if (auto* e = check_call(comm, what.c_str(), dtype, recv_count * static_cast<size_t>(comm ? comm->size : 1),
                             native_stream, {send, recv}))
      return e;
    MPI_Op mop;
    if (auto* e = mpi_op(dtype, op, what.c_str(), &mop)) return e;
    if (recv_count == 0) return nullptr;
    if (send == recv)
      return make_error(SPORA_PLUGIN_INVALID_ARGUMENT,
                        "[mpi] " + what + ": send and recv must differ (send holds size * recv_count elements)");
    if (auto* e = run(comm, what.c_str(), timeout_ms, [&](MPI_Request* r) {
          return MPI_Ireduce_scatter_block(send, recv, static_cast<int>(recv_count), mpi_type(dtype), mop,
                                           comm->comm, r);
        }))
      return e;
    if (op == SPORA_REDUCE_AVG) divide_by_size(recv, recv_count, dtype, comm->size);
    return nullptr;
  });
}

spora_plugin_error_t* broadcast(spora_comm_t* comm, const void* send, void* recv, size_t count, int32_t dtype,
                                int32_t root, void* native_stream, int64_t timeout_ms) {
  return plugin::guard("mpi broadcast", [&]() -> spora_plugin_error_t* {
    if (auto* e = check_call(comm, "broadcast", dtype, count, native_stream, {recv})) return e;
    if (root < 0 || root >= comm->size)
      return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[mpi] broadcast: root " + std::to_string(root) +
                                                           " is outside [0, " + std::to_string(comm->size) + ")");
    if (count == 0) return nullptr;
    if (comm->rank == root) {
      if (!send)
        return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[mpi] broadcast: the root's send buffer is null");
      if (send != recv) std::memmove(recv, send, count * elem_size(dtype));
    }
    return run(comm, "broadcast", timeout_ms, [&](MPI_Request* r) {
      return MPI_Ibcast(recv, static_cast<int>(count), mpi_type(dtype), root, comm->comm, r);
    });
  });
}

spora_plugin_error_t* all_to_all(spora_comm_t* comm, const void* send, void* recv, size_t count, int32_t dtype,
                                 void* native_stream, int64_t timeout_ms) {
  return plugin::guard("mpi all_to_all", [&]() -> spora_plugin_error_t* {
    if (auto* e = check_call(comm, "all_to_all", dtype, count * static_cast<size_t>(comm ? comm->size : 1),
                             native_stream, {send, recv}))
      return e;
    if (count == 0) return nullptr;
    return run(comm, "all_to_all", timeout_ms, [&](MPI_Request* r) {
      return MPI_Ialltoall(in_place(send, recv), static_cast<int>(count), mpi_type(dtype), recv,
                           static_cast<int>(count), mpi_type(dtype), comm->comm, r);
    });
  });
}

namespace {
spora_plugin_error_t* check_peer(spora_comm_t* comm, int32_t peer, const char* what) {
  if (peer < 0 || peer >= comm->size || peer == comm->rank)
    return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, std::string("[mpi] ") + what + ": peer " + std::to_string(peer) +
                                                         " is not another rank of [0, " +
                                                         std::to_string(comm->size) + ")");
  return nullptr;
}
constexpr int kTag = 0x5370;  // point-to-point tag used by spora
}  // namespace

spora_plugin_error_t* send(spora_comm_t* comm, const void* buf, size_t count, int32_t dtype, int32_t peer,
                           void* native_stream, int64_t timeout_ms) {
  return plugin::guard("mpi send", [&]() -> spora_plugin_error_t* {
    if (auto* e = check_call(comm, "send", dtype, count, native_stream, {buf})) return e;
    if (auto* e = check_peer(comm, peer, "send")) return e;
    return run(comm, "send", timeout_ms, [&](MPI_Request* r) {
      return MPI_Isend(buf, static_cast<int>(count), mpi_type(dtype), peer, kTag, comm->comm, r);
    });
  });
}

spora_plugin_error_t* recv(spora_comm_t* comm, void* buf, size_t count, int32_t dtype, int32_t peer,
                           void* native_stream, int64_t timeout_ms) {
  return plugin::guard("mpi recv", [&]() -> spora_plugin_error_t* {
    if (auto* e = check_call(comm, "recv", dtype, count, native_stream, {buf})) return e;
    if (auto* e = check_peer(comm, peer, "recv")) return e;
    return run(comm, "recv", timeout_ms, [&](MPI_Request* r) {
      return MPI_Irecv(buf, static_cast<int>(count), mpi_type(dtype), peer, kTag, comm->comm, r);
    });
  });
}

spora_plugin_error_t* barrier(spora_comm_t* comm, void* native_stream, int64_t timeout_ms) {
  return plugin::guard("mpi barrier", [&]() -> spora_plugin_error_t* {
    if (auto* e = check_call(comm, "barrier", SPORA_DTYPE_U8, 0, native_stream, {})) return e;
    return run(comm, "barrier", timeout_ms, [&](MPI_Request* r) { return MPI_Ibarrier(comm->comm, r); });
  });
}

}  // namespace spora::mpi
