// All-reduce of large buffers as a ring over non-blocking point-to-point
// calls: a reduce-scatter then an all-gather, n - 1 steps each, every step
// one chunk to the right neighbour and one from the left. Open MPI's
// non-blocking MPI_Iallreduce (libnbc) ran at half the speed of its tuned
// blocking MPI_Allreduce from 256 KiB up (bench_collective_allreduce), and
// the blocking call cannot honour a timeout or comm_abort; this keeps both
// (every wait is the plugin's abortable one) at the blocking call's speed.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "mpi_state.h"

namespace spora::mpi {
namespace {

constexpr int kRingTag = 0x5371;  // distinct from send/recv's
// A reduce-scatter step's chunk travels in segments of this size, each
// reduced as soon as it arrives (while the next ones are on the way).
constexpr size_t kSegmentBytes = 256 << 10;

// Waits for both requests within what is left of the call's time; on a
// failure the other request is abandoned too (wait with no time left).
spora_plugin_error_t* wait_pair(spora_comm_t* comm, MPI_Request a, MPI_Request b, const char* what,
                                std::chrono::steady_clock::time_point deadline, bool timed) {
  auto left = [&] {
    if (!timed) return int64_t{-1};
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    return std::max<int64_t>(0, ms.count());
  };
  if (spora_plugin_error_t* e = wait(comm, a, what, left())) {
    if (spora_plugin_error_t* e2 = wait(comm, b, what, 0)) e2->destroy(e2);
    return e;
  }
  return wait(comm, b, what, left());
}

}  // namespace

spora_plugin_error_t* ring_all_reduce(spora_comm_t* comm, void* buf, size_t count, size_t esize, MPI_Datatype type,
                                      MPI_Op op, const char* what, int64_t timeout_ms) {
  const int n = comm->size, r = comm->rank;
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  auto lo = [&](int c) { return count * static_cast<size_t>(c) / static_cast<size_t>(n); };
  auto len = [&](int c) { return lo(c + 1) - lo(c); };
  auto at = [&](int c) { return static_cast<char*>(buf) + lo(c) * esize; };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max<int64_t>(timeout_ms, 0));
  const bool timed = timeout_ms >= 0;
  // The incoming chunk of a reduce-scatter step, in the communicator's
  // scratch (plugin-owned: if a step is abandoned, MPI may still write it,
  // so it is then dropped from the communicator and leaked, never freed).
  const size_t need = (count / static_cast<size_t>(n) + 1) * esize;  // the largest chunk
  if (!comm->scratch) comm->scratch = new std::vector<char>();
  if (comm->scratch->size() < need) comm->scratch->resize(need);
  char* tmp = comm->scratch->data();
  auto abandon = [&](spora_plugin_error_t* e) {
    comm->scratch = nullptr;  // leaked: a pending receive may write it
    return e;
  };
  // A reduce-scatter step moves its chunk in segments, all posted at once,
  // and reduces each segment as it arrives, while the later ones travel.
  const size_t seg = std::max<size_t>(1, kSegmentBytes / esize);
  std::vector<MPI_Request> recvs, sends;
  auto drop_all = [&](spora_plugin_error_t* e) {  // a failed step: abandon what is still pending
    for (MPI_Request& q : recvs)
      if (q != MPI_REQUEST_NULL)
        if (spora_plugin_error_t* e2 = wait(comm, q, what, 0)) e2->destroy(e2);
    for (MPI_Request& q : sends)
      if (q != MPI_REQUEST_NULL)
        if (spora_plugin_error_t* e2 = wait(comm, q, what, 0)) e2->destroy(e2);
    return abandon(e);
  };
  auto left_ms = [&] {
    if (!timed) return int64_t{-1};
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    return std::max<int64_t>(0, ms);
  };
  for (int s = 0; s < n - 1; ++s) {  // reduce-scatter: chunk (r - s - 1) gathers every rank's share
    const int send_c = (r - s + 2 * n) % n, recv_c = (r - s - 1 + 2 * n) % n;
    const size_t rn = len(recv_c), sn = len(send_c);
    recvs.assign((rn + seg - 1) / seg, MPI_REQUEST_NULL);
    sends.assign((sn + seg - 1) / seg, MPI_REQUEST_NULL);
    {
      auto lock = mpi_lock();
      for (size_t k = 0; k < recvs.size(); ++k)
        if (auto* e = mpi_error(MPI_Irecv(tmp + k * seg * esize, static_cast<int>(std::min(seg, rn - k * seg)), type,
                                          left, kRingTag, comm->comm, &recvs[k]),
                                what)) {
          lock.unlock();
          return drop_all(e);
        }
      for (size_t k = 0; k < sends.size(); ++k)
        if (auto* e = mpi_error(MPI_Isend(at(send_c) + k * seg * esize, static_cast<int>(std::min(seg, sn - k * seg)),
                                          type, right, kRingTag, comm->comm, &sends[k]),
                                what)) {
          lock.unlock();
          return drop_all(e);
        }
    }
    for (size_t k = 0; k < recvs.size(); ++k) {
      MPI_Request q = recvs[k];
      recvs[k] = MPI_REQUEST_NULL;
      if (auto* e = wait(comm, q, what, left_ms())) return drop_all(e);
      auto lock = mpi_lock();
      if (auto* e = mpi_error(MPI_Reduce_local(tmp + k * seg * esize, at(recv_c) + k * seg * esize,
                                               static_cast<int>(std::min(seg, rn - k * seg)), type, op),
                              what)) {
        lock.unlock();
        return drop_all(e);
      }
    }
    for (size_t k = 0; k < sends.size(); ++k) {
      MPI_Request q = sends[k];
      sends[k] = MPI_REQUEST_NULL;
      if (auto* e = wait(comm, q, what, left_ms())) return drop_all(e);
    }
  }
  for (int s = 0; s < n - 1; ++s) {  // all-gather: rank r holds the whole of chunk (r + 1 - s)
    const int send_c = (r + 1 - s + 2 * n) % n, recv_c = (r - s + 2 * n) % n;
    MPI_Request rq[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    {
      auto lock = mpi_lock();
      if (auto* e = mpi_error(MPI_Irecv(at(recv_c), static_cast<int>(len(recv_c)), type, left, kRingTag, comm->comm,
                                        &rq[0]),
                              what))
        return e;
      if (auto* e = mpi_error(MPI_Isend(at(send_c), static_cast<int>(len(send_c)), type, right, kRingTag, comm->comm,
                                        &rq[1]),
                              what))
        return e;
    }
    if (auto* e = wait_pair(comm, rq[0], rq[1], what, deadline, timed)) return e;
  }
  return nullptr;
}

}  // namespace spora::mpi
