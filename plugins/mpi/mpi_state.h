// State shared by the OpenMPI collective plugin's files: the process-wide
// MPI setup, the communicator object, and the polling wait that gives every
// call a timeout and lets comm_abort stop it from another thread.
#pragma once
#include <mpi.h>
#include <spora/plugin.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "error.h"
#include "mpi_api.h"

struct spora_comm {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  // Set by comm_abort (any thread) and checked by every poll loop.
  std::atomic<bool> aborted{false};
  // Set when a call timed out: MPI cannot cancel a started collective, so the
  // communicator's call order is broken for good and later calls must fail.
  std::mutex mu;
  std::string broken;  // the first failure, empty while healthy
  // Requests abandoned by a timeout or abort. MPI keeps writing into their
  // buffers if the peers ever arrive, so they are never freed or waited on.
  std::vector<MPI_Request> abandoned;
  // What the ring and pair all-reduces receive into, kept between calls (a fresh large
  // allocation per call costs its page faults every time). Dropped, never
  // freed, when a call is abandoned: MPI may still write it.
  std::vector<char>* scratch = nullptr;
  ~spora_comm() { delete scratch; }
};

namespace spora::mpi {

using spora::plugin::make_error;

// Whether MPI calls must be serialised by the plugin: true when the library
// gave less than MPI_THREAD_MULTIPLE.
std::unique_lock<std::mutex> mpi_lock();

// Waits for `req`, testing it until it completes, the communicator is
// aborted, or `timeout_ms` (< 0: forever) passes. On failure the request is
// abandoned, the communicator marked broken, and the error names `what`
// and the call's timeout: `call_timeout_ms` when given (a wait that is one
// step of a longer call), else `timeout_ms`.
spora_plugin_error_t* wait(spora_comm_t* comm, MPI_Request req, const char* what, int64_t timeout_ms,
                           int64_t call_timeout_ms = -1);

// The milliseconds left until `deadline`, rounded up (-1: no limit, when
// the call's `timeout_ms` is negative).
int64_t ms_left(std::chrono::steady_clock::time_point deadline, int64_t timeout_ms);

// Waits for both requests by `deadline` (no limit when the call's
// `timeout_ms` is negative); when the first fails the second is abandoned
// too (waited on with no time left).
spora_plugin_error_t* wait_pair(spora_comm_t* comm, MPI_Request a, MPI_Request b, const char* what,
                                std::chrono::steady_clock::time_point deadline, int64_t timeout_ms);

// The communicator's scratch, grown to at least `bytes`. A call that
// abandons a receive into it gives it up with abandon_scratch.
char* scratch(spora_comm_t* comm, size_t bytes);

// Memory an abandoned MPI request may still write (a receive buffer, a
// communicator being duplicated) must outlive the request, which may never
// complete: it is kept, reachable from a process-wide list, until the
// process ends -- never freed, so never reused under MPI's feet, and not a
// leak (LeakSanitizer sees it held). Only failed calls (timeouts, aborts)
// keep anything, and each breaks its communicator for good.
void keep_forever(std::shared_ptr<void> memory);
// Moves the communicator's scratch to keep_forever; the next call gets a
// fresh one.
void abandon_scratch(spora_comm_t* comm);

// An error for a communicator that is aborted or broken, else null.
spora_plugin_error_t* check_usable(spora_comm_t* comm, const char* what);

// Turns an MPI return code into an error naming `what`; null for MPI_SUCCESS.
spora_plugin_error_t* mpi_error(int rc, const char* what);

bool initialized();

// The host's services, kept from entry (mpi_comm.cpp).
extern const spora_host_t* g_host;

// All-reduce of `count` elements in place in `buf` as a ring of
// non-blocking sends and receives (mpi_ring.cpp), with wait's timeout and
// abort semantics over the whole call; what all_reduce uses for large
// buffers.
spora_plugin_error_t* ring_all_reduce(spora_comm_t* comm, void* buf, size_t count, size_t esize, MPI_Datatype type,
                                      MPI_Op op, const char* what, int64_t timeout_ms);

// All-reduce of `count` elements in place in `buf` between the two ranks of
// a 2-rank communicator as one exchange (mpi_pair.cpp), with wait's timeout
// and abort semantics; what all_reduce uses for small buffers on 2 ranks.
spora_plugin_error_t* pair_all_reduce(spora_comm_t* comm, void* buf, size_t count, size_t esize, MPI_Datatype type,
                                      MPI_Op op, const char* what, int64_t timeout_ms);

// Reduction ops for 16-bit floats (created at initialize).
void create_half_ops();
void free_half_ops();

}  // namespace spora::mpi
