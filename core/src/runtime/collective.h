// Communicators over collective plugins: creating one from a backend name
// (and the launcher's environment), staging tensors through host memory
// when their device has none, and the id registry the graph-mode
// all_reduce op uses to find its communicator.
#pragma once
#include <spora/plugin.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "ops/collective.h"  // is_collective_op, reduce_op_from_name
#include "runtime/device.h"
#include "runtime/tensor.h"

namespace spora {

class Context;
class PluginRecord;

class Communicator {
 public:
  // Joins the communicator of all ranks over `backend`; rank/size < 0 come
  // from the launcher's environment (see launcher_rank_size).
  // A backend that moves device memory (NCCL: SPORA_EXT_COLLECTIVE_DEVICE)
  // binds the communicator to `device`, which must be one of its device
  // plugin's; null picks that plugin's device LOCAL_RANK % count (the
  // launcher sets LOCAL_RANK). A host-memory backend ignores `device`.
  static std::shared_ptr<Communicator> create(Context& ctx, const std::string& backend, int32_t rank, int32_t size,
                                              Device* device = nullptr);
  // The live communicator with this id, or a kNotFound error naming `who`.
  static std::shared_ptr<Communicator> find(int64_t id, const std::string& who);
  // The same, or null.
  static std::shared_ptr<Communicator> lookup(int64_t id);
  ~Communicator();

  // The device whose memory and streams the backend uses; null for a
  // host-memory backend.
  Device* device() const { return device_; }

  int32_t rank() const { return rank_; }
  int32_t size() const { return size_; }
  int64_t id() const { return id_; }
  const std::string& backend() const { return backend_; }
  void set_timeout(int64_t ms) { timeout_ms_.store(ms); }
  int64_t timeout() const { return timeout_ms_.load(); }

  void abort();  // any thread
  std::shared_ptr<Communicator> split(int32_t color, int32_t key);

  void all_reduce(const Tensor& in, const Tensor& out, int32_t op);
  void all_gather(const Tensor& in, const Tensor& out);
  void reduce_scatter(const Tensor& in, const Tensor& out, int32_t op);
  void broadcast(const Tensor& t, int32_t root);
  void all_to_all(const Tensor& in, const Tensor& out);
  void send(const Tensor& t, int32_t peer);
  void recv(const Tensor& t, int32_t peer);
  void barrier();

  // all_reduce over host memory the caller owns (the scheduler's host step).
  void all_reduce_host(const void* send, void* recv, size_t count, DType dtype, int32_t op);
  // A graph's collective op (all_reduce, all_gather, reduce_scatter; see
  // ops/collective.cpp) over host memory the caller owns: `attrs` are the
  // node's validated attributes, `in`/`out` its input and output types.
  // all_gather / reduce_scatter along a dim other than the outermost
  // non-trivial one reorder blocks through a host buffer.
  void run_host(const std::string& op, const Attrs& attrs, const TensorMeta& in, const TensorMeta& out,
                const void* send, void* recv, int32_t reduce_op);
  // The same on a device-bound communicator, over its device's memory,
  // enqueued on `lane` of the device (returns once enqueued). Only the
  // layouts that need no reordering: all_reduce, and all_gather /
  // reduce_scatter along their outermost non-trivial dim (device_layout_ok).
  void run_device(const std::string& op, const Attrs& attrs, const TensorMeta& in, const TensorMeta& out,
                  const void* send, void* recv, int32_t reduce_op, Device::Lane lane);
  // Why a graph's collective cannot run on the device (run_device), or "".
  static std::string device_layout_problem(const std::string& op, const Attrs& attrs, const TensorMeta& in,
                                           const TensorMeta& out);

  // Work for the process's collective thread, run in the order posted
  // (over every communicator: ranks post in the same order, so they run
  // their collectives in the same order): a graph's collective overlapped
  // with the kernels the caller keeps launching.
  class Job {
   public:
    void mark_ready();  // the inputs are written: the job may start
    void cancel();      // it will never be ready: skip it (no-op once ready)
    // Until it ran; does not throw. `exposed`: the caller's work stalls
    // meanwhile (overlap_stats counts the time it blocked).
    void wait(bool exposed = true);
    // Its failure, rethrown (after wait()).
    void rethrow() const;

   private:
    friend class Communicator;
    std::function<void()> fn;
    std::mutex mu;
    std::condition_variable cv;
    bool ready = false, done = false;
    std::exception_ptr error;
  };
  static std::shared_ptr<Job> post(std::function<void()> fn);
  static void run_job(Job& job);  // the collective thread's loop body
  // Since the last reset: nanoseconds posted collectives ran, and of those
  // the nanoseconds a waiter blocked for them (not hidden behind other
  // work). The fraction hidden is 1 - exposed / busy.
  static void overlap_stats(int64_t* busy_ns, int64_t* exposed_ns, bool reset);

 private:
  Communicator(PluginRecord* plugin, spora_comm_t* comm, std::string backend);
  static std::shared_ptr<Communicator> adopt(PluginRecord* plugin, spora_comm_t* comm, const std::string& backend,
                                             Device* device);
  void check(spora_plugin_error_t* err, const char* what);
  // A device-bound call's tensors: on the bound device, else an error.
  void need_on_device(const Tensor& t, const char* what) const;

  PluginRecord* plugin_;
  const spora_collective_api_t* api_;
  spora_comm_t* comm_;
  std::string backend_;
  int32_t rank_ = 0, size_ = 1;
  int64_t id_ = 0;
  // A collective waits at most this long for the other ranks unless told
  // otherwise (SPORA_COMM_TIMEOUT_MS, set_timeout; < 0 = forever): 30
  // minutes, MindSpore's HCCL_EXEC_TIMEOUT (1836 s) rounded, as a lost rank
  // must end a job some day even without a launcher watching it.
  static constexpr int64_t kDefaultTimeoutMs = 30 * 60 * 1000;
  std::atomic<int64_t> timeout_ms_{kDefaultTimeoutMs};
  std::mutex call_mu_;  // the contract: one thread at a time per communicator
  Device* device_ = nullptr;
};

// Rank and size from the launcher's environment: OMPI_COMM_WORLD_RANK/SIZE
// (Open MPI), PMI_RANK/PMI_SIZE (MPICH, Slurm), SPORA_RANK/SPORA_WORLD_SIZE;
// 0 and 1 when none is set. Throws kInvalidArgument for malformed values.
void launcher_rank_size(int32_t* rank, int32_t* size);

class TcpStore;
// The unique id of a new communicator through the job's store: rank 0
// makes it with `make` and sets it, every other rank reads it; rank 0 then
// waits until every rank has read it (it serves the store). Keys are
// "spora/comm/<backend>/<n>", n counting this process's communicators.
spora_comm_id_t exchange_unique_id(TcpStore& store, const std::string& backend, int32_t rank, int32_t size,
                                   const std::function<void(spora_comm_id_t*)>& make);

// The same without a store, under mpirun: rank 0's id reaches every rank
// through a communicator of the "mpi" backend (a sum over int32 words, the
// other ranks contributing zeros), so NCCL started by plain mpirun works.
spora_comm_id_t exchange_unique_id_over(Communicator& boot, const std::function<void(spora_comm_id_t*)>& make);

// Bytes of tensors whose collective a plugin abandoned (a timeout or an
// abort): their memory is kept, never freed or reused, because the plugin's
// request may still write it (collective.cpp, "quarantine").
size_t quarantined_bytes();


}  // namespace spora
