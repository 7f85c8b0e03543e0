// MPI setup and communicator lifetime: initialize (also as a singleton
// without mpirun), bootstrap ids, comm_init over MPI_COMM_WORLD, split,
// abort, destroy, and the polling wait every collective uses.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "mpi_state.h"

namespace spora::mpi {
namespace {

std::mutex g_mpi_mu;           // serialises MPI when the library is not MPI_THREAD_MULTIPLE
bool g_serialize = false;
bool g_we_initialized = false;  // we called MPI_Init_thread, so we finalize
std::atomic<bool> g_ready{false};
std::atomic<bool> g_finalized{false};
std::mutex g_abandoned_mu;
std::vector<MPI_Request> g_abandoned;  // from every communicator, checked before MPI_Finalize

constexpr char kIdMagic[] = "spora-mpi/world/1";

void finalize_at_exit() {
  if (!g_we_initialized || g_finalized.exchange(true)) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  // A request abandoned by a timeout that never completed would make
  // MPI_Finalize wait for the missing rank forever; leave MPI as it is then
  // (the launcher reports the unfinished job, which is the truth).
  std::lock_guard<std::mutex> lock(g_abandoned_mu);
  for (MPI_Request& r : g_abandoned) {
    int done = 0;
    if (r != MPI_REQUEST_NULL && (MPI_Test(&r, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done)) return;
  }
  free_half_ops();
  MPI_Finalize();
}

}  // namespace

const spora_host_t* g_host = nullptr;

// How long comm_init and comm_split wait for every rank to join (ms): config
// key "mpi.init_timeout_ms" (SPORA_MPI_INIT_TIMEOUT_MS), default 120 s.
int64_t init_timeout_ms() {
  if (g_host && g_host->services && g_host->services->config_get) {
    char buf[32] = {0};
    if (g_host->services->config_get(g_host->services->ctx, "mpi.init_timeout_ms", buf, sizeof buf) > 0) {
      char* end = nullptr;
      const long long v = std::strtoll(buf, &end, 10);
      if (end != buf) return v;
    }
  }
  return 120000;
}

std::unique_lock<std::mutex> mpi_lock() {
  return g_serialize ? std::unique_lock<std::mutex>(g_mpi_mu) : std::unique_lock<std::mutex>();
}

bool initialized() { return g_ready.load(); }

spora_plugin_error_t* mpi_error(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return nullptr;
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) std::snprintf(text, sizeof text, "MPI error %d", rc);
  return make_error(SPORA_PLUGIN_INTERNAL, std::string("[mpi] ") + what + ": " + text);
}

// MPI may have been finalized by someone else (mpi4py's atexit hook, say):
// after that no MPI call but MPI_Finalized is legal.
bool mpi_finalized() {
  if (g_finalized.load()) return true;
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

spora_plugin_error_t* check_usable(spora_comm_t* comm, const char* what) {
  if (!initialized())
    return make_error(SPORA_PLUGIN_UNAVAILABLE, std::string("[mpi] ") + what + ": the plugin is not initialized");
  if (mpi_finalized())
    return make_error(SPORA_PLUGIN_UNAVAILABLE, std::string("[mpi] ") + what + ": MPI has been finalized");
  if (!comm) return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, std::string("[mpi] ") + what + ": communicator is null");
  if (comm->aborted.load())
    return make_error(SPORA_PLUGIN_ABORTED, std::string("[mpi] ") + what + ": the communicator was aborted");
  std::lock_guard<std::mutex> lock(comm->mu);
  if (!comm->broken.empty())
    return make_error(SPORA_PLUGIN_ABORTED, std::string("[mpi] ") + what +
                                                ": the communicator is unusable after an earlier failure (" +
                                                comm->broken + "); abort and destroy it");
  return nullptr;
}

spora_plugin_error_t* wait(spora_comm_t* comm, MPI_Request req, const char* what, int64_t timeout_ms,
                           int64_t call_timeout_ms) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  for (;;) {
    int done = 0, rc;
    {
      auto lock = mpi_lock();
      rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    }
    if (rc != MPI_SUCCESS) return mpi_error(rc, what);
    if (done) return nullptr;
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - start).count();
    const bool aborted = comm->aborted.load();
    if (aborted || (timeout_ms >= 0 && waited >= timeout_ms)) {
      std::string why = aborted ? "the communicator was aborted while " + std::string(what) + " was waiting"
                                : std::string(what) + " timed out after " +
                                      std::to_string(call_timeout_ms >= 0 ? call_timeout_ms : timeout_ms) +
                                      " ms on rank " + std::to_string(comm->rank) + " of " +
                                      std::to_string(comm->size) + ": not every rank joined it";
      {
        std::lock_guard<std::mutex> lock(comm->mu);
        comm->abandoned.push_back(req);
        if (comm->broken.empty()) comm->broken = why;
      }
      {
        std::lock_guard<std::mutex> lock(g_abandoned_mu);
        g_abandoned.push_back(req);
      }
      if (aborted) return make_error(SPORA_PLUGIN_ABORTED, "[mpi] " + why);
      return make_error(SPORA_PLUGIN_TIMEOUT, "[mpi] " + why + "; the communicator must be aborted now");
    }
    // MPI progresses only inside MPI calls: test back to back at first (a
    // yield there costs a whole time slice when ranks share cores, which
    // bench_collective_allreduce showed as 10x on mid-size messages), then
    // yield to other processes, and after a while stop burning the core
    // while a slow peer computes.
    if (waited < 5) continue;
    if (waited < 100)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

int64_t ms_left(std::chrono::steady_clock::time_point deadline, int64_t timeout_ms) {
  if (timeout_ms < 0) return -1;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return std::max<int64_t>(0, left.count());
}

spora_plugin_error_t* wait_pair(spora_comm_t* comm, MPI_Request a, MPI_Request b, const char* what,
                                std::chrono::steady_clock::time_point deadline, int64_t timeout_ms) {
  if (spora_plugin_error_t* e = wait(comm, a, what, ms_left(deadline, timeout_ms), timeout_ms)) {
    if (spora_plugin_error_t* e2 = wait(comm, b, what, 0)) e2->destroy(e2);
    return e;
  }
  return wait(comm, b, what, ms_left(deadline, timeout_ms), timeout_ms);
}

void keep_forever(std::shared_ptr<void> memory) {
  static std::mutex mu;
  static auto* kept = new std::vector<std::shared_ptr<void>>;  // never destroyed: MPI may write it during exit
  std::lock_guard<std::mutex> lock(mu);
  kept->push_back(std::move(memory));
}

void abandon_scratch(spora_comm_t* comm) {
  if (!comm->scratch) return;
  keep_forever(std::shared_ptr<std::vector<char>>(comm->scratch));
  comm->scratch = nullptr;
}

char* scratch(spora_comm_t* comm, size_t bytes) {
  if (!comm->scratch) comm->scratch = new std::vector<char>();
  if (comm->scratch->size() < bytes) comm->scratch->resize(bytes);
  return comm->scratch->data();
}

spora_plugin_error_t* initialize() {
  return plugin::guard("mpi initialize", [&]() -> spora_plugin_error_t* {
    if (g_ready.load()) return nullptr;
    // The loader opens plugins RTLD_LOCAL; OpenMPI's components (dlopened
    // by libmpi) resolve symbols of libmpi and libopen-pal globally, so
    // promote those libraries to the global namespace first.
    for (const char* lib : {"libmpi.so.40", "libopen-pal.so.40", "libopen-rte.so.40"})
      dlopen(lib, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
    int inited = 0, provided = 0;
    MPI_Initialized(&inited);
    if (inited) {
      MPI_Query_thread(&provided);
    } else {
      int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
      if (rc != MPI_SUCCESS) return mpi_error(rc, "initialize: MPI_Init_thread");
      g_we_initialized = true;
      std::atexit(finalize_at_exit);
    }
    if (provided < MPI_THREAD_SERIALIZED)
      return make_error(SPORA_PLUGIN_UNAVAILABLE,
                        "[mpi] initialize: MPI was initialised with thread level " + std::to_string(provided) +
                            " (needs at least MPI_THREAD_SERIALIZED); initialise it with MPI_Init_thread");
    g_serialize = provided < MPI_THREAD_MULTIPLE;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    create_half_ops();
    g_ready.store(true);
    return nullptr;
  });
}

void shutdown() { finalize_at_exit(); }

spora_plugin_error_t* get_unique_id(spora_comm_id_t* out) {
  if (!out) return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[mpi] get_unique_id: out is null");
  // MPI bootstraps itself (the launcher connects the processes), so every
  // rank can make the same id locally: no exchange is needed.
  std::memset(out->bytes, 0, sizeof out->bytes);
  std::memcpy(out->bytes, kIdMagic, sizeof kIdMagic);
  return nullptr;
}

namespace {
spora_plugin_error_t* new_comm(MPI_Comm c, spora_comm_t** out) {
  auto* comm = new spora_comm_t;
  auto lock = mpi_lock();
  comm->comm = c;
  MPI_Comm_rank(c, &comm->rank);
  MPI_Comm_size(c, &comm->size);
  MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  *out = comm;
  return nullptr;
}
}  // namespace

spora_plugin_error_t* comm_init(const spora_comm_id_t* id, int32_t rank, int32_t size, int32_t device,
                                spora_comm_t** out) {
  return plugin::guard("mpi comm_init", [&]() -> spora_plugin_error_t* {
    if (!initialized()) return make_error(SPORA_PLUGIN_UNAVAILABLE, "[mpi] comm_init: the plugin is not initialized");
    if (!id || !out) return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[mpi] comm_init: id or out is null");
    *out = nullptr;
    if (std::memcmp(id->bytes, kIdMagic, sizeof kIdMagic) != 0)
      return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[mpi] comm_init: the id was not made by this plugin's get_unique_id");
    if (device != -1)
      return make_error(SPORA_PLUGIN_UNIMPLEMENTED, "[mpi] comm_init: device " + std::to_string(device) +
                                                        ": this plugin moves host memory only (device -1)");
    int world_size = 0, world_rank = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    if (size != world_size)
      return make_error(SPORA_PLUGIN_INVALID_ARGUMENT,
                        "[mpi] comm_init: size " + std::to_string(size) + " does not match the MPI job, which has " +
                            std::to_string(world_size) + " process(es); launch with `mpirun -np " +
                            std::to_string(size) + "` or pass size " + std::to_string(world_size));
    if (rank < 0 || rank >= size)
      return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[mpi] comm_init: rank " + std::to_string(rank) +
                                                           " is outside [0, " + std::to_string(size) + ")");
    // Every rank must join; duplicate non-blockingly so that a missing rank
    // is a timeout, not a hang, and check the claimed ranks form a permutation.
    // What MPI writes into while a request is pending lives on the heap: a
    // request abandoned by a timeout may still complete later, so on a
    // timeout this is kept (keep_forever) rather than left on a stack that
    // is gone.
    struct Scratch {
      MPI_Comm dup = MPI_COMM_NULL;
      int mine = 0;
      std::vector<int> claimed;
    };
    auto scratch = std::make_unique<Scratch>();
    MPI_Comm& dup = scratch->dup;
    MPI_Request req = MPI_REQUEST_NULL;
    spora_comm_t probe;  // a stand-in for wait()'s bookkeeping
    probe.rank = world_rank;
    probe.size = world_size;
    {
      auto lock = mpi_lock();
      if (auto* e = mpi_error(MPI_Comm_idup(MPI_COMM_WORLD, &dup, &req), "comm_init: MPI_Comm_idup")) return e;
    }
    if (auto* e = wait(&probe, req, "comm_init", init_timeout_ms())) {
      keep_forever(std::move(scratch));  // MPI may still write dup
      return e;
    }
    std::vector<int>& claimed = scratch->claimed;
    claimed.assign(static_cast<size_t>(size), -1);
    int& mine = scratch->mine;
    mine = rank;
    {
      auto lock = mpi_lock();
      MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
      if (auto* e = mpi_error(MPI_Iallgather(&mine, 1, MPI_INT, claimed.data(), 1, MPI_INT, dup, &req),
                              "comm_init: MPI_Iallgather"))
        return e;
    }
    if (auto* e = wait(&probe, req, "comm_init", init_timeout_ms())) {
      keep_forever(std::move(scratch));  // MPI may still read mine and write claimed
      return e;
    }
    std::vector<int> sorted = claimed;
    std::sort(sorted.begin(), sorted.end());
    for (int i = 0; i < size; ++i) {
      if (sorted[static_cast<size_t>(i)] != i) {
        std::string list;
        for (int c : claimed) list += (list.empty() ? "" : ", ") + std::to_string(c);
        auto lock = mpi_lock();
        MPI_Comm_free(&dup);
        return make_error(SPORA_PLUGIN_INVALID_ARGUMENT,
                          "[mpi] comm_init: the ranks the processes passed (" + list +
                              ", in MPI rank order) are not each of 0.." + std::to_string(size - 1) + " exactly once");
      }
    }
    if (rank == world_rank) return new_comm(dup, out);
    MPI_Comm ordered = MPI_COMM_NULL;
    {
      auto lock = mpi_lock();
      const int rc = MPI_Comm_split(dup, 0, rank, &ordered);
      MPI_Comm_free(&dup);
      if (auto* e = mpi_error(rc, "comm_init: MPI_Comm_split")) return e;
    }
    return new_comm(ordered, out);
  });
}

spora_plugin_error_t* comm_split(spora_comm_t* comm, int32_t color, int32_t key, spora_comm_t** out) {
  return plugin::guard("mpi comm_split", [&]() -> spora_plugin_error_t* {
    if (!out) return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[mpi] comm_split: out is null");
    *out = nullptr;
    if (auto* e = check_usable(comm, "comm_split")) return e;
    // Make sure every rank arrived before the blocking split.
    MPI_Request req = MPI_REQUEST_NULL;
    {
      auto lock = mpi_lock();
      if (auto* e = mpi_error(MPI_Ibarrier(comm->comm, &req), "comm_split: MPI_Ibarrier")) return e;
    }
    if (auto* e = wait(comm, req, "comm_split", init_timeout_ms())) return e;
    MPI_Comm c = MPI_COMM_NULL;
    {
      auto lock = mpi_lock();
      if (auto* e = mpi_error(MPI_Comm_split(comm->comm, color < 0 ? MPI_UNDEFINED : color, key, &c),
                              "comm_split: MPI_Comm_split"))
        return e;
    }
    if (c == MPI_COMM_NULL) return nullptr;
    return new_comm(c, out);
  });
}

spora_plugin_error_t* comm_abort(spora_comm_t* comm) {
  if (!comm) return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[mpi] comm_abort: communicator is null");
  comm->aborted.store(true);  // every poll loop sees it within one test
  return nullptr;
}

spora_plugin_error_t* comm_destroy(spora_comm_t* comm) {
  return plugin::guard("mpi comm_destroy", [&]() -> spora_plugin_error_t* {
    if (!comm) return nullptr;
    if (comm->comm != MPI_COMM_NULL && !mpi_finalized()) {
      // MPI frees a communicator with pending operations once they end.
      auto lock = mpi_lock();
      MPI_Comm_free(&comm->comm);
    }
    delete comm;
    return nullptr;
  });
}

spora_plugin_error_t* comm_async_error(spora_comm_t* comm, spora_plugin_error_t** out) {
  if (!comm || !out) return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[mpi] comm_async_error: null argument");
  *out = nullptr;
  if (comm->aborted.load()) {
    *out = make_error(SPORA_PLUGIN_ABORTED, "[mpi] the communicator was aborted");
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(comm->mu);
  if (!comm->broken.empty()) *out = make_error(SPORA_PLUGIN_ABORTED, "[mpi] " + comm->broken);
  return nullptr;
}

spora_plugin_error_t* comm_rank(spora_comm_t* comm, int32_t* out_rank, int32_t* out_size) {
  if (!comm) return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[mpi] comm_rank: communicator is null");
  if (out_rank) *out_rank = comm->rank;
  if (out_size) *out_size = comm->size;
  return nullptr;
}

}  // namespace spora::mpi
