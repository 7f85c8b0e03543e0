// C API: communicators and collectives (runtime/collective.h).
#include <cstring>

#include "abi/abi.h"
#include "runtime/collective.h"

struct spora_communicator {
  std::shared_ptr<spora::Communicator> comm;
};

using spora::Code;
using spora::fail;
using spora::abi::guard;
using spora::abi::need;

namespace {

spora::Communicator& comm_of(spora_communicator_t* c, const char* fn) { return *need(c, fn, "comm")->comm; }

// The op's bytes are read as an int, as dtype_arg does for dtypes (abi.h):
// loading a spora_reduce_op_t outside its range is undefined behaviour in
// C++ (UBSan: "load of value 42, which is not a valid value for type
// 'spora_reduce_op'"), though C callers may pass any int.
int32_t check_op(const spora_reduce_op_t& op, const char* fn) {
  static_assert(sizeof(spora_reduce_op_t) == sizeof(int32_t), "spora_reduce_op_t is a 32-bit C enum");
  int32_t v = 0;
  std::memcpy(&v, &op, sizeof v);
  if (v < SPORA_REDUCE_SUM || v > SPORA_REDUCE_AVG)
    fail(Code::kInvalidArgument, "[{}] unknown reduce op {}; expected a SPORA_REDUCE_* value", fn, v);
  return v;
}

}  // namespace

extern "C" {

spora_status_t spora_comm_create(spora_context_t* ctx, const char* backend, int32_t rank, int32_t size,
                                 spora_communicator_t** out) {
  return guard([&] {
    const char* fn = "spora_comm_create";
    need(ctx, fn, "ctx");
    need(backend, fn, "backend");
    need(out, fn, "out");
    auto c = spora::Communicator::create(ctx->ctx, backend, rank, size);
    *out = new spora_communicator{std::move(c)};
  });
}

spora_status_t spora_comm_create_on_device(spora_context_t* ctx, const char* backend, spora_device_t* device,
                                           int32_t rank, int32_t size, spora_communicator_t** out) {
  return guard([&] {
    const char* fn = "spora_comm_create_on_device";
    need(ctx, fn, "ctx");
    need(backend, fn, "backend");
    need(out, fn, "out");
    auto c = spora::Communicator::create(ctx->ctx, backend, rank, size, spora::abi::from_handle(device));
    *out = new spora_communicator{std::move(c)};
  });
}

spora_status_t spora_comm_device(const spora_communicator_t* comm, spora_device_t** out) {
  return guard([&] {
    need(comm, "spora_comm_device", "comm");
    *need(out, "spora_comm_device", "out") = comm->comm->device() ? spora::abi::to_handle(comm->comm->device()) : nullptr;
  });
}

spora_status_t spora_comm_overlap_stats(int64_t* busy_ns, int64_t* exposed_ns, int32_t reset) {
  return guard([&] { spora::Communicator::overlap_stats(busy_ns, exposed_ns, reset != 0); });
}

spora_status_t spora_comm_free(spora_communicator_t* comm) {
  return guard([&] { delete comm; });
}

spora_status_t spora_comm_rank(const spora_communicator_t* comm, int32_t* rank, int32_t* size) {
  return guard([&] {
    need(comm, "spora_comm_rank", "comm");
    if (rank) *rank = comm->comm->rank();
    if (size) *size = comm->comm->size();
  });
}

spora_status_t spora_comm_backend(const spora_communicator_t* comm, const char** name) {
  return guard([&] {
    need(comm, "spora_comm_backend", "comm");
    *need(name, "spora_comm_backend", "name") = comm->comm->backend().c_str();
  });
}

spora_status_t spora_comm_id(const spora_communicator_t* comm, int64_t* id) {
  return guard([&] {
    need(comm, "spora_comm_id", "comm");
    *need(id, "spora_comm_id", "id") = comm->comm->id();
  });
}

spora_status_t spora_comm_set_timeout(spora_communicator_t* comm, int64_t timeout_ms) {
  return guard([&] { comm_of(comm, "spora_comm_set_timeout").set_timeout(timeout_ms); });
}

spora_status_t spora_comm_abort(spora_communicator_t* comm) {
  return guard([&] { comm_of(comm, "spora_comm_abort").abort(); });
}

spora_status_t spora_comm_split(spora_communicator_t* comm, int32_t color, int32_t key, spora_communicator_t** out) {
  return guard([&] {
    const char* fn = "spora_comm_split";
    need(out, fn, "out");
    auto c = comm_of(comm, fn).split(color, key);
    *out = c ? new spora_communicator{std::move(c)} : nullptr;
  });
}

spora_status_t spora_comm_all_reduce(spora_communicator_t* comm, const spora_tensor_t* input, spora_tensor_t* output,
                                     spora_reduce_op_t op) {
  return guard([&] {
    const char* fn = "spora_comm_all_reduce";
    auto& c = comm_of(comm, fn);
    const int32_t o = check_op(op, fn);
    c.all_reduce(need(input, fn, "input")->t, need(output, fn, "output")->t, o);
  });
}

spora_status_t spora_comm_all_gather(spora_communicator_t* comm, const spora_tensor_t* input, spora_tensor_t* output) {
  return guard([&] {
    const char* fn = "spora_comm_all_gather";
    comm_of(comm, fn).all_gather(need(input, fn, "input")->t, need(output, fn, "output")->t);
  });
}

spora_status_t spora_comm_reduce_scatter(spora_communicator_t* comm, const spora_tensor_t* input,
                                         spora_tensor_t* output, spora_reduce_op_t op) {
  return guard([&] {
    const char* fn = "spora_comm_reduce_scatter";
    auto& c = comm_of(comm, fn);
    const int32_t o = check_op(op, fn);
    c.reduce_scatter(need(input, fn, "input")->t, need(output, fn, "output")->t, o);
  });
}

spora_status_t spora_comm_broadcast(spora_communicator_t* comm, spora_tensor_t* tensor, int32_t root) {
  return guard([&] {
    const char* fn = "spora_comm_broadcast";
    comm_of(comm, fn).broadcast(need(tensor, fn, "tensor")->t, root);
  });
}

spora_status_t spora_comm_all_to_all(spora_communicator_t* comm, const spora_tensor_t* input, spora_tensor_t* output) {
  return guard([&] {
    const char* fn = "spora_comm_all_to_all";
    comm_of(comm, fn).all_to_all(need(input, fn, "input")->t, need(output, fn, "output")->t);
  });
}

spora_status_t spora_comm_send(spora_communicator_t* comm, const spora_tensor_t* tensor, int32_t peer) {
  return guard([&] {
    const char* fn = "spora_comm_send";
    comm_of(comm, fn).send(need(tensor, fn, "tensor")->t, peer);
  });
}

spora_status_t spora_comm_recv(spora_communicator_t* comm, spora_tensor_t* tensor, int32_t peer) {
  return guard([&] {
    const char* fn = "spora_comm_recv";
    comm_of(comm, fn).recv(need(tensor, fn, "tensor")->t, peer);
  });
}

spora_status_t spora_comm_barrier(spora_communicator_t* comm) {
  return guard([&] { comm_of(comm, "spora_comm_barrier").barrier(); });
}

}  // extern "C"
