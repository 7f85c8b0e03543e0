// The data-moving calls of the collective table, each mapped onto NCCL on
// the caller's cudaStream_t (or the communicator's own stream, waited for,
// when native_stream is NULL). all_to_all is grouped send/recv pairs (NCCL
// has no all-to-all call); barrier is an all-reduce of one float.
#include <string>

#include "error.h"
#include "nccl_api.h"
#include "nccl_comm.h"

namespace spora::nccl {

using spora::plugin::guard;
using spora::plugin::make_error;

namespace {

bool nccl_dtype(int32_t dtype, ncclDataType_t* out, size_t* size) {
  switch (dtype) {
    case SPORA_DTYPE_F32: *out = ncclFloat32; *size = 4; return true;
    case SPORA_DTYPE_F64: *out = ncclFloat64; *size = 8; return true;
    case SPORA_DTYPE_F16: *out = ncclFloat16; *size = 2; return true;
    case SPORA_DTYPE_BF16: *out = ncclBfloat16; *size = 2; return true;
    case SPORA_DTYPE_I32: *out = ncclInt32; *size = 4; return true;
    case SPORA_DTYPE_I64: *out = ncclInt64; *size = 8; return true;
    case SPORA_DTYPE_U8: case SPORA_DTYPE_BOOL: *out = ncclUint8; *size = 1; return true;
    default: return false;
  }
}

bool nccl_op(int32_t op, ncclRedOp_t* out) {
  switch (op) {
    case SPORA_REDUCE_SUM: *out = ncclSum; return true;
    case SPORA_REDUCE_PROD: *out = ncclProd; return true;
    case SPORA_REDUCE_MAX: *out = ncclMax; return true;
    case SPORA_REDUCE_MIN: *out = ncclMin; return true;
    case SPORA_REDUCE_AVG: *out = ncclAvg; return true;
    default: return false;
  }
}

// Looks up the communicator and converts dtype (and op, when op != 0).
spora_plugin_error_t* prepare(const char* what, spora_comm_t* comm, int32_t dtype, int32_t op,
                              std::shared_ptr<Comm>* c, ncclDataType_t* dt, size_t* esize, ncclRedOp_t* rop) {
  if (auto* e = get_comm(what, comm, c)) return e;
  if (!nccl_dtype(dtype, dt, esize))
    return make_error(SPORA_PLUGIN_UNIMPLEMENTED, std::string("[nccl] ") + what + ": dtype " + std::to_string(dtype) + " has no NCCL type");
  if (op != 0) {
    if (!nccl_op(op, rop)) return invalid(std::string(what) + ": unknown reduce op " + std::to_string(op));
    // bool travels as uint8: only max and min keep its meaning.
    if (dtype == SPORA_DTYPE_BOOL && op != SPORA_REDUCE_MAX && op != SPORA_REDUCE_MIN)
      return make_error(SPORA_PLUGIN_UNIMPLEMENTED, std::string("[nccl] ") + what + ": bool reduces with max or min only");
  }
  return nullptr;
}

}  // namespace

spora_plugin_error_t* all_reduce(spora_comm_t* comm, const void* send, void* recv, size_t count, int32_t dtype,
                                 int32_t op, void* native_stream, int64_t timeout_ms) {
  return guard("nccl", [&]() -> spora_plugin_error_t* {
    std::shared_ptr<Comm> c;
    ncclDataType_t dt;
    size_t es;
    ncclRedOp_t rop = ncclSum;
    if (auto* e = prepare("all_reduce", comm, dtype, op, &c, &dt, &es, &rop)) return e;
    return c->run("all_reduce", native_stream, timeout_ms, [&](ncclComm_t nc, cudaStream_t s) {
      return lib()->ncclAllReduce(send, recv, count, dt, rop, nc, s);
    });
  });
}

spora_plugin_error_t* all_gather(spora_comm_t* comm, const void* send, void* recv, size_t count, int32_t dtype,
                                 void* native_stream, int64_t timeout_ms) {
  return guard("nccl", [&]() -> spora_plugin_error_t* {
    std::shared_ptr<Comm> c;
    ncclDataType_t dt;
    size_t es;
    if (auto* e = prepare("all_gather", comm, dtype, 0, &c, &dt, &es, nullptr)) return e;
    return c->run("all_gather", native_stream, timeout_ms, [&](ncclComm_t nc, cudaStream_t s) {
      return lib()->ncclAllGather(send, recv, count, dt, nc, s);
    });
  });
}

spora_plugin_error_t* reduce_scatter(spora_comm_t* comm, const void* send, void* recv, size_t recv_count,
                                     int32_t dtype, int32_t op, void* native_stream, int64_t timeout_ms) {
  return guard("nccl", [&]() -> spora_plugin_error_t* {
    std::shared_ptr<Comm> c;
    ncclDataType_t dt;
    size_t es;
    ncclRedOp_t rop = ncclSum;
    if (auto* e = prepare("reduce_scatter", comm, dtype, op, &c, &dt, &es, &rop)) return e;
    return c->run("reduce_scatter", native_stream, timeout_ms, [&](ncclComm_t nc, cudaStream_t s) {
      return lib()->ncclReduceScatter(send, recv, recv_count, dt, rop, nc, s);
    });
  });
}

spora_plugin_error_t* broadcast(spora_comm_t* comm, const void* send, void* recv, size_t count, int32_t dtype,
                                int32_t root, void* native_stream, int64_t timeout_ms) {
  return guard("nccl", [&]() -> spora_plugin_error_t* {
    std::shared_ptr<Comm> c;
    ncclDataType_t dt;
    size_t es;
    if (auto* e = prepare("broadcast", comm, dtype, 0, &c, &dt, &es, nullptr)) return e;
    return c->run("broadcast", native_stream, timeout_ms, [&](ncclComm_t nc, cudaStream_t s) {
      return lib()->ncclBroadcast(send, recv, count, dt, root, nc, s);
    });
  });
}

spora_plugin_error_t* all_to_all(spora_comm_t* comm, const void* send, void* recv, size_t count, int32_t dtype,
                                 void* native_stream, int64_t timeout_ms) {
  return guard("nccl", [&]() -> spora_plugin_error_t* {
    std::shared_ptr<Comm> c;
    ncclDataType_t dt;
    size_t es;
    if (auto* e = prepare("all_to_all", comm, dtype, 0, &c, &dt, &es, nullptr)) return e;
    int32_t size = 0;
    if (auto* e = c->rank(nullptr, &size)) return e;
    const size_t block = count * es;
    return c->run("all_to_all", native_stream, timeout_ms, [&](ncclComm_t nc, cudaStream_t s) {
      ncclResult_t r = lib()->ncclGroupStart();
      for (int32_t j = 0; j < size && (r == ncclSuccess || r == ncclInProgress); ++j) {
        r = lib()->ncclSend(static_cast<const char*>(send) + j * block, count, dt, j, nc, s);
        if (r == ncclSuccess || r == ncclInProgress) r = lib()->ncclRecv(static_cast<char*>(recv) + j * block, count, dt, j, nc, s);
      }
      const ncclResult_t end = lib()->ncclGroupEnd();  // always close the group
      return r == ncclSuccess || r == ncclInProgress ? end : r;
    });
  });
}

spora_plugin_error_t* send(spora_comm_t* comm, const void* buf, size_t count, int32_t dtype, int32_t peer,
                           void* native_stream, int64_t timeout_ms) {
  return guard("nccl", [&]() -> spora_plugin_error_t* {
    std::shared_ptr<Comm> c;
    ncclDataType_t dt;
    size_t es;
    if (auto* e = prepare("send", comm, dtype, 0, &c, &dt, &es, nullptr)) return e;
    return c->run("send", native_stream, timeout_ms, [&](ncclComm_t nc, cudaStream_t s) {
      return lib()->ncclSend(buf, count, dt, peer, nc, s);
    });
  });
}

spora_plugin_error_t* recv(spora_comm_t* comm, void* buf, size_t count, int32_t dtype, int32_t peer,
                           void* native_stream, int64_t timeout_ms) {
  return guard("nccl", [&]() -> spora_plugin_error_t* {
    std::shared_ptr<Comm> c;
    ncclDataType_t dt;
    size_t es;
    if (auto* e = prepare("recv", comm, dtype, 0, &c, &dt, &es, nullptr)) return e;
    return c->run("recv", native_stream, timeout_ms, [&](ncclComm_t nc, cudaStream_t s) {
      return lib()->ncclRecv(buf, count, dt, peer, nc, s);
    });
  });
}

spora_plugin_error_t* barrier(spora_comm_t* comm, void* native_stream, int64_t timeout_ms) {
  return guard("nccl", [&]() -> spora_plugin_error_t* {
    std::shared_ptr<Comm> c;
    if (auto* e = get_comm("barrier", comm, &c)) return e;
    void* buf = nullptr;
    if (auto* e = c->barrier_buffer(&buf)) return e;
    return c->run("barrier", native_stream, timeout_ms, [&](ncclComm_t nc, cudaStream_t s) {
      return lib()->ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, nc, s);
    });
  });
}

}  // namespace spora::nccl
