// All-reduce of large buffers as a ring over non-blocking point-to-point
// calls: a reduce-scatter then an all-gather, n - 1 steps each, every step
// one chunk to the right neighbour and one from the left. Open MPI's
// non-blocking MPI_Iallreduce (libnbc) ran at half the speed of its tuned
// blocking MPI_Allreduce from 256 KiB up (bench_collective_allreduce), and
// the blocking call cannot honour a timeout or comm_abort; this keeps both
// (every wait is the plugin's abortable one) at the blocking call's speed.
// What a reduce-scatter step receives streams through a small window of
// scratch (kSegmentBytes, kWindow); its sends are all posted at once (MPI
// reads them from the buffer).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "mpi_state.h"

namespace spora::mpi {
namespace {

constexpr int kRingTag = 0x5371;  // distinct from send/recv's

// A reduce-scatter step's chunk larger than kWindow segments streams
// through kWindow rotating slots of kSegmentBytes each: each segment is
// reduced just after it arrived, while it is in the core's cache, and the
// scratch stays 512 KiB whatever the buffer. bench_collective_allreduce,
// 2 ranks (4 MiB L2 per core), spora / MPI_Allreduce time at 16 MiB with
// MPI_Iallreduce calls interleaved: every 256 KiB segment posted at once
// into an 8 MiB scratch 1.15-1.22, the chunk received whole 1.07-1.16,
// 64 KiB x 8 slots 0.92-0.97 (without the interleaved calls all three were
// 0.95-1.10: likely those calls evict an 8 MiB scratch from the caches,
// and a 512 KiB one far less). At 4 MiB
// 256 KiB x 4 slots was 1.30-1.32, 64 KiB x 8 0.93-0.98. A chunk of up to 1 MiB
// travels whole, one message each way: at 1 MiB (512 KiB
// chunks) 1.01-1.08 with MPI_Iallreduce interleaved and 0.95-1.05 without,
// in two 256 KiB segments posted at once 1.07-1.11 and 0.96-1.05, through
// the 64 KiB window 1.10-1.25 and 1.03-1.10.
constexpr size_t kSegmentBytes = 64 << 10;
constexpr size_t kWindow = 8;
// A chunk up to kWholeBytes travels whole, one message each way. At 2 MiB
// (1 MiB chunks on 2 ranks) the window read 1.36-1.48 and the whole chunk
// 0.99-1.03; at 4 MiB (2 MiB chunks) the window 0.97-1.00 and the whole
// chunk 1.36 (same benchmark, 40 rounds, quiet).
constexpr size_t kWholeBytes = 1 << 20;

}  // namespace

spora_plugin_error_t* ring_all_reduce(spora_comm_t* comm, void* buf, size_t count, size_t esize, MPI_Datatype type,
                                      MPI_Op op, const char* what, int64_t timeout_ms) {
  const int n = comm->size, r = comm->rank;
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  auto lo = [&](int c) { return count * static_cast<size_t>(c) / static_cast<size_t>(n); };
  auto len = [&](int c) { return lo(c + 1) - lo(c); };
  auto at = [&](int c) { return static_cast<char*>(buf) + lo(c) * esize; };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max<int64_t>(timeout_ms, 0));
  const size_t max_chunk = (count + static_cast<size_t>(n) - 1) / static_cast<size_t>(n);  // elements
  const bool fits = max_chunk * esize <= kWholeBytes;
  // Elements per segment, and the slots segments rotate through.
  const size_t seg = fits ? max_chunk : std::max<size_t>(1, kSegmentBytes / esize);
  const size_t slots = fits ? 1 : kWindow;
  // The slots live in the communicator's scratch (plugin-owned: if a step
  // is abandoned, MPI may still write it, so it is then given up to
  // keep_forever, never freed).
  char* tmp = scratch(comm, slots * seg * esize);
  auto slot = [&](size_t k) { return tmp + (k % slots) * seg * esize; };
  std::vector<MPI_Request> recvs, sends;
  auto drop_all = [&](spora_plugin_error_t* e) {  // a failed step: abandon what is still pending
    for (MPI_Request& q : recvs)
      if (q != MPI_REQUEST_NULL)
        if (spora_plugin_error_t* e2 = wait(comm, q, what, 0)) e2->destroy(e2);
    for (MPI_Request& q : sends)
      if (q != MPI_REQUEST_NULL)
        if (spora_plugin_error_t* e2 = wait(comm, q, what, 0)) e2->destroy(e2);
    abandon_scratch(comm);  // a pending receive may write it
    return e;
  };
  for (int s = 0; s < n - 1; ++s) {  // reduce-scatter: chunk (r - s - 1) gathers every rank's share
    const int send_c = (r - s + 2 * n) % n, recv_c = (r - s - 1 + 2 * n) % n;
    const size_t rn = len(recv_c), sn = len(send_c);
    recvs.assign((rn + seg - 1) / seg, MPI_REQUEST_NULL);
    sends.assign((sn + seg - 1) / seg, MPI_REQUEST_NULL);
    auto post_recv = [&](size_t k) {
      return mpi_error(MPI_Irecv(slot(k), static_cast<int>(std::min(seg, rn - k * seg)), type, left, kRingTag,
                                 comm->comm, &recvs[k]),
                       what);
    };
    {
      auto lock = mpi_lock();
      for (size_t k = 0; k < std::min(slots, recvs.size()); ++k)
        if (auto* e = post_recv(k)) {
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
      if (auto* e = wait(comm, q, what, ms_left(deadline, timeout_ms), timeout_ms)) return drop_all(e);
      auto lock = mpi_lock();
      if (auto* e = mpi_error(MPI_Reduce_local(slot(k), at(recv_c) + k * seg * esize,
                                               static_cast<int>(std::min(seg, rn - k * seg)), type, op),
                              what)) {
        lock.unlock();
        return drop_all(e);
      }
      if (k + slots < recvs.size())  // the slot is free again: receive the segment that reuses it
        if (auto* e = post_recv(k + slots)) {
          lock.unlock();
          return drop_all(e);
        }
    }
    for (size_t k = 0; k < sends.size(); ++k) {
      MPI_Request q = sends[k];
      sends[k] = MPI_REQUEST_NULL;
      if (auto* e = wait(comm, q, what, ms_left(deadline, timeout_ms), timeout_ms)) return drop_all(e);
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
    if (auto* e = wait_pair(comm, rq[0], rq[1], what, deadline, timeout_ms)) return e;
  }
  return nullptr;
}

}  // namespace spora::mpi
