#include "runtime/collective.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <vector>

#include "runtime/context.h"
#include "runtime/host_services.h"
#include "runtime/profiler.h"
#include "runtime/tcp_store.h"
#include "support/error.h"

namespace spora {
namespace {

std::mutex g_comms_mu;
std::map<int64_t, std::weak_ptr<Communicator>>& comms() {
  static auto* m = new std::map<int64_t, std::weak_ptr<Communicator>>;
  return *m;
}
std::atomic<int64_t> g_next_id{1};

bool env_int(const char* name, int32_t* out) {
  const char* v = std::getenv(name);
  if (!v || !*v) return false;
  char* end = nullptr;
  const long long x = std::strtoll(v, &end, 10);
  if (*end != '\0' || x < 0 || x > INT32_MAX)
    fail(Code::kInvalidArgument, "[comm] environment variable {}='{}' is not a rank or size", name, v);
  *out = static_cast<int32_t>(x);
  return true;
}

// Memory a plugin may still write after it gave up on a call: a timeout or
// an abort abandons the request (MPI cannot cancel a collective), and the
// request keeps the buffers it was handed. They are kept here, never freed
// or reused, for the life of the process: a leak, bounded by the calls a
// broken communicator abandoned, instead of MPI writing later into memory
// the allocator has handed to someone else. Kept on the error path only,
// so the calls that succeed copy nothing extra (the alternative, staging
// every call in plugin-owned memory, costs a copy in and out per call).
std::mutex g_quarantine_mu;
std::vector<std::shared_ptr<void>>& quarantine_list() {
  static auto* list = new std::vector<std::shared_ptr<void>>();  // never destroyed: MPI may write after exit starts
  return *list;
}
size_t g_quarantined_bytes = 0;

// A tensor's elements as host memory: the device memory itself on a
// unified-memory device (after its queued work), else a staged copy that
// `finish` writes back. `abandon` hands both to the quarantine.
class HostBuffer {
 public:
  HostBuffer(const Tensor& t, bool read) : t_(t) {
    Device* d = t.device();
    if (d->unified_memory()) {
      d->synchronize();
      ptr_ = reinterpret_cast<void*>(t.data());
    } else {
      staged_ = std::make_shared<std::vector<char>>(t.nbytes());
      if (read) tensor_read(t, staged_->data(), staged_->size());
      ptr_ = staged_->data();
    }
  }
  void* ptr() const { return ptr_; }
  void finish() {
    if (staged_) t_.device()->copy_h2d(t_.data(), staged_->data(), staged_->size());
  }
  void abandon() {
    std::lock_guard<std::mutex> lock(g_quarantine_mu);
    if (staged_) {
      quarantine_list().push_back(staged_);
    } else {
      quarantine_list().push_back(t_.buffer);  // the whole buffer: its allocation is never returned
    }
    g_quarantined_bytes += t_.nbytes();
  }

 private:
  Tensor t_;  // shares the buffer's ownership
  void* ptr_ = nullptr;
  std::shared_ptr<std::vector<char>> staged_;
};

// A device tensor a device-bound backend's abandoned call may still write.
void quarantine_tensor(const Tensor& t) {
  std::lock_guard<std::mutex> lock(g_quarantine_mu);
  quarantine_list().push_back(t.buffer);
  g_quarantined_bytes += t.nbytes();
}

// The SPORA_EXT_COLLECTIVE_DEVICE extension of a collective table, if any.
const spora_ext_collective_device_t* device_extension(const spora_collective_api_t* api) {
  for (const spora_ext_t* e = api->extensions; e; e = e->next)
    if (e->type == SPORA_EXT_COLLECTIVE_DEVICE && e->struct_size >= sizeof(spora_ext_collective_device_t))
      return reinterpret_cast<const spora_ext_collective_device_t*>(e);
  return nullptr;
}

// The device a device-bound backend's communicator lives on: `given` if it
// is one of `plugin`'s devices, else (none given) that plugin's device
// LOCAL_RANK % count, as launchers give each local rank its own GPU.
Device* bind_device(Context& ctx, const std::string& backend, const std::string& plugin, Device* given) {
  if (given) {
    if (given->plugin()->name() != plugin)
      fail(Code::kInvalidArgument,
           "[comm] backend '{}' moves {} device memory, and {} is not a {} device: train on a {} device "
           "(set_context(device_target=\"{}\")), or use a host backend such as 'mpi'",
           backend, plugin, given->name(), plugin, plugin, plugin);
    return given;
  }
  std::vector<Device*> mine;
  for (Device* d : ctx.devices())
    if (d->plugin()->name() == plugin) mine.push_back(d);
  if (mine.empty())
    fail(Code::kUnavailable, "[comm] backend '{}' needs a {} device and this process has none (spora devices lists why)",
         backend, plugin);
  int32_t local = 0;
  if (!env_int("LOCAL_RANK", &local)) env_int("OMPI_COMM_WORLD_LOCAL_RANK", &local);
  return mine[static_cast<size_t>(local) % mine.size()];
}

// Whether a plugin error means the request was abandoned with our buffers.
bool abandoned(const spora_plugin_error_t* e) {
  return e && (e->code == SPORA_PLUGIN_TIMEOUT || e->code == SPORA_PLUGIN_ABORTED);
}

void check_same_dtype(const Tensor& in, const Tensor& out, const char* what) {
  if (in.dtype != out.dtype)
    fail(Code::kInvalidArgument, "[comm {}] input is {} but output is {}", what, dtype_name(in.dtype),
         dtype_name(out.dtype));
}

}  // namespace

void launcher_rank_size(int32_t* rank, int32_t* size) {
  static const char* pairs[][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                   {"PMI_RANK", "PMI_SIZE"},
                                   {"SPORA_RANK", "SPORA_WORLD_SIZE"}};
  for (const auto& p : pairs) {
    int32_t r = 0, s = 0;
    const bool has_r = env_int(p[0], &r), has_s = env_int(p[1], &s);
    if (has_r != has_s) fail(Code::kInvalidArgument, "[comm] {} is set but {} is not", has_r ? p[0] : p[1], has_r ? p[1] : p[0]);
    if (!has_r) continue;
    if (s < 1 || r >= s) fail(Code::kInvalidArgument, "[comm] {}={} does not fit {}={}", p[0], r, p[1], s);
    *rank = r;
    *size = s;
    return;
  }
  *rank = 0;
  *size = 1;
}

Communicator::Communicator(PluginRecord* plugin, spora_comm_t* comm, std::string backend)
    : plugin_(plugin), api_(plugin->collective_api()), comm_(comm), backend_(std::move(backend)) {
  std::string v;
  if (config_lookup("comm.timeout_ms", &v)) {
    char* end = nullptr;
    const long long ms = std::strtoll(v.c_str(), &end, 10);
    if (end == v.c_str() || *end != '\0')
      fail(Code::kInvalidArgument, "[comm] SPORA_COMM_TIMEOUT_MS='{}' is not a number of milliseconds", v);
    timeout_ms_.store(ms);
  }
}

std::shared_ptr<Communicator> Communicator::adopt(PluginRecord* plugin, spora_comm_t* comm,
                                                  const std::string& backend, Device* device) {
  std::shared_ptr<Communicator> c;
  try {
    c.reset(new Communicator(plugin, comm, backend));
  } catch (...) {
    if (spora_plugin_error_t* e = plugin->collective_api()->comm_destroy(comm)) e->destroy(e);
    throw;
  }
  c->device_ = device;
  c->check(c->api_->comm_rank(comm, &c->rank_, &c->size_), "comm_rank");
  c->id_ = g_next_id.fetch_add(1);
  std::lock_guard<std::mutex> lock(g_comms_mu);
  comms()[c->id_] = c;
  return c;
}

spora_comm_id_t exchange_unique_id(TcpStore& store, const std::string& backend, int32_t rank, int32_t size,
                                   const std::function<void(spora_comm_id_t*)>& make) {
  // Every rank creates its communicators in the same order (collective), so
  // a per-process count names the same communicator on every rank.
  static std::atomic<int64_t> seq{0};
  const std::string key = fmt::format("spora/comm/{}/{}", backend, seq.fetch_add(1));
  spora_comm_id_t id{};
  if (rank == 0) {
    make(&id);
    store.set(key, std::string(reinterpret_cast<const char*>(id.bytes), sizeof id.bytes));
  } else {
    const std::string v = store.get(key);
    if (v.size() != sizeof id.bytes)
      fail(Code::kInternal, "[comm create] the id of '{}' read from the store has {} bytes, not {}", key, v.size(),
           sizeof id.bytes);
    std::memcpy(id.bytes, v.data(), sizeof id.bytes);
  }
  // Rank 0 serves the store: it stays until every rank has read the id.
  store.set(key + "/read/" + std::to_string(rank), "");
  if (rank == 0)
    for (int32_t r = 1; r < size; ++r) store.get(key + "/read/" + std::to_string(r));
  return id;
}

spora_comm_id_t exchange_unique_id_over(Communicator& boot, const std::function<void(spora_comm_id_t*)>& make) {
  static_assert(sizeof(spora_comm_id_t::bytes) % sizeof(int32_t) == 0, "the id travels as int32 words");
  spora_comm_id_t id{};
  if (boot.rank() == 0) make(&id);
  int32_t words[sizeof id.bytes / sizeof(int32_t)];
  std::memcpy(words, id.bytes, sizeof words);
  boot.all_reduce_host(words, words, sizeof words / sizeof(int32_t), SPORA_DTYPE_I32, SPORA_REDUCE_SUM);
  std::memcpy(id.bytes, words, sizeof words);
  return id;
}

std::shared_ptr<Communicator> Communicator::create(Context& ctx, const std::string& backend, int32_t rank,
                                                   int32_t size, Device* device) {
  if (rank < 0 || size < 0) launcher_rank_size(&rank, &size);
  if (size < 1 || rank >= size)
    fail(Code::kInvalidArgument, "[comm] rank {} does not fit a communicator of size {}", rank, size);
  PluginEntry* found = nullptr;
  std::vector<std::string> known;
  for (const auto& e : ctx.plugins()) {
    if (e->record->kind() != "collective" || !e->shadowed_by.empty()) continue;
    if (e->record->loaded()) known.push_back(e->record->name());
    if (e->record->name() == backend) found = e.get();
  }
  if (!found)
    fail(Code::kNotFound, "[comm] unknown collective backend '{}'; loaded: {}. Install its plugin or set SPORA_PLUGIN_PATH",
         backend, known.empty() ? std::string("none") : fmt::format("{}", fmt::join(known, ", ")));
  PluginRecord* rec = found->record;
  if (!rec->loaded() || !rec->ensure_ready())
    fail(Code::kUnavailable, "[comm] collective backend '{}' is unavailable: {}", backend, rec->reason());
  const spora_collective_api_t* api = rec->collective_api();
  const spora_ext_collective_device_t* on = device_extension(api);
  Device* bound = on ? bind_device(ctx, backend, on->device_plugin ? on->device_plugin : "", device) : nullptr;
  spora_comm_id_t id{};
  if (!api->get_unique_id)
    fail(Code::kUnimplemented, "[comm] collective backend '{}' has no get_unique_id", backend);
  // The id every rank passes to comm_init. With a store (MASTER_ADDR /
  // MASTER_PORT: spora launch sets them; rank 0 serves it) rank 0 makes the
  // id and the others read it, as NCCL needs; without one each rank makes
  // it, which is right for backends that bootstrap through their launcher
  // (MPI under mpirun gives every rank the same).
  auto make = [&](spora_comm_id_t* out) { throw_if_error(api->get_unique_id(out), "[comm create] backend " + backend); };
  if (std::unique_ptr<TcpStore> store = size > 1 ? TcpStore::from_environment(rank) : nullptr) {
    id = exchange_unique_id(*store, backend, rank, size, make);
  } else if (size > 1 && bound) {
    // A device backend's ranks must share rank 0's id. Without a store
    // (plain mpirun), the mpi backend carries it.
    if (backend == "mpi")
      fail(Code::kInternal, "[comm create] the mpi backend cannot bootstrap itself");
    std::shared_ptr<Communicator> boot;
    try {
      boot = create(ctx, "mpi", rank, size, nullptr);
    } catch (const Error& e) {
      fail(Code::kUnavailable,
           "[comm create] backend '{}' with {} ranks needs rank 0's id on every rank: start the job with spora "
           "launch (it sets MASTER_ADDR/MASTER_PORT for the store), or under mpirun with the mpi backend "
           "installed ({})",
           backend, size, e.what());
    }
    id = exchange_unique_id_over(*boot, make);
  } else {
    make(&id);
  }
  spora_comm_t* comm = nullptr;
  throw_if_error(api->comm_init(&id, rank, size, bound ? bound->index() : -1, &comm),
                 "[comm create] backend " + backend + (bound ? " on " + bound->name() : std::string()));
  return adopt(rec, comm, backend, bound);
}

std::shared_ptr<Communicator> Communicator::find(int64_t id, const std::string& who) {
  std::lock_guard<std::mutex> lock(g_comms_mu);
  auto it = comms().find(id);
  std::shared_ptr<Communicator> c = it == comms().end() ? nullptr : it->second.lock();
  if (!c)
    fail(Code::kNotFound, "[{}] no live communicator has id {}; create one (spora_comm_create) and keep it alive", who,
         id);
  return c;
}

std::shared_ptr<Communicator> Communicator::lookup(int64_t id) {
  std::lock_guard<std::mutex> lock(g_comms_mu);
  auto it = comms().find(id);
  return it == comms().end() ? nullptr : it->second.lock();
}

Communicator::~Communicator() {
  {
    std::lock_guard<std::mutex> lock(g_comms_mu);
    comms().erase(id_);
  }
  if (api_->comm_destroy)
    if (spora_plugin_error_t* e = api_->comm_destroy(comm_)) e->destroy(e);
}

void Communicator::check(spora_plugin_error_t* err, const char* what) {
  throw_if_error(err, fmt::format("[comm {}] backend {}", what, backend_));
}

void Communicator::abort() {
  if (!api_->comm_abort) fail(Code::kUnimplemented, "[comm abort] backend {} cannot abort", backend_);
  check(api_->comm_abort(comm_), "abort");
}

std::shared_ptr<Communicator> Communicator::split(int32_t color, int32_t key) {
  if (!api_->comm_split) fail(Code::kUnimplemented, "[comm split] backend {} cannot split", backend_);
  spora_comm_t* out = nullptr;
  {
    std::lock_guard<std::mutex> lock(call_mu_);
    check(api_->comm_split(comm_, color, key, &out), "split");
  }
  if (!out) return nullptr;
  auto c = adopt(plugin_, out, backend_, device_);
  c->timeout_ms_.store(timeout_ms_.load());
  return c;
}

namespace {
// A collective call as the profiler sees it (profiler.h): from construction
// to destruction, the bytes this rank contributes, and which communicator.
// Costs one relaxed load when no session runs.
class Profiled {
 public:
  Profiled(const Communicator& c, const char* op, uint64_t bytes) : c_(c), op_(op), bytes_(bytes) {}
  ~Profiled() {
    if (!timer_.armed()) return;
    try {
      profiler::record_collective(op_, timer_.t0(), bytes_,
                                  fmt::format("comm {} ({}, {} ranks)", c_.id(), c_.backend(), c_.size()), c_.rank());
    } catch (...) {  // a destructor, maybe unwinding: the record is lost, not the call
    }
  }
  Profiled(const Profiled&) = delete;
  Profiled& operator=(const Profiled&) = delete;

 private:
  const profiler::OpTimer timer_;
  const Communicator& c_;
  const char* op_;
  uint64_t bytes_;
};
}  // namespace

#define SPORA_NEED_FN(fn)                                                                             \
  if (!api_->fn) fail(Code::kUnimplemented, "[comm " #fn "] backend {} does not implement " #fn, backend_)

void Communicator::all_reduce_host(const void* send, void* recv, size_t count, DType dtype, int32_t op) {
  const Profiled prof(*this, "all_reduce", count * dtype_size(dtype));
  SPORA_NEED_FN(all_reduce);
  std::lock_guard<std::mutex> lock(call_mu_);
  check(api_->all_reduce(comm_, send, recv, count, dtype, op, nullptr, timeout()), "all_reduce");
}

void Communicator::need_on_device(const Tensor& t, const char* what) const {
  if (t.device() != device_)
    fail(Code::kInvalidArgument,
         "[comm {}] backend {} runs on {} but the tensor is on {}: move it there first (tensor.to(\"{}\"))", what,
         backend_, device_->name(), t.device()->name(), device_->name());
}

// A call of a device-bound communicator: device addresses, enqueued on the
// device's default stream, so it is ordered with the kernels around it.
#define SPORA_DEVICE_CALL(what, call, ...)                                     \
  do {                                                                         \
    const Tensor* ts_[] = {__VA_ARGS__};                                       \
    for (const Tensor* t_ : ts_) need_on_device(*t_, what);                    \
    void* stream = device_->native_stream(Device::Lane::kCompute);            \
    spora_plugin_error_t* e_;                                                  \
    {                                                                          \
      std::lock_guard<std::mutex> lock_(call_mu_);                             \
      e_ = call;                                                               \
    }                                                                          \
    if (abandoned(e_))                                                         \
      for (const Tensor* t_ : ts_) quarantine_tensor(*t_);                     \
    check(e_, what);                                                           \
    return;                                                                    \
  } while (0)
#define SPORA_PTR(t) reinterpret_cast<void*>((t).data())

void Communicator::all_reduce(const Tensor& in, const Tensor& out, int32_t op) {
  const Profiled prof(*this, "all_reduce", in.nbytes());
  check_same_dtype(in, out, "all_reduce");
  if (in.shape.numel() != out.shape.numel())
    fail(Code::kInvalidArgument, "[comm all_reduce] input has {} elements but output has {}", in.shape.numel(),
         out.shape.numel());
  if (device_) {
    SPORA_NEED_FN(all_reduce);
    SPORA_DEVICE_CALL("all_reduce",
                      api_->all_reduce(comm_, SPORA_PTR(in), SPORA_PTR(out), static_cast<size_t>(out.shape.numel()),
                                       out.dtype, op, stream, timeout()),
                      &in, &out);
  }
  const bool same = in.buffer == out.buffer && in.offset == out.offset;
  HostBuffer o(out, same);
  std::unique_ptr<HostBuffer> i;
  if (!same) i = std::make_unique<HostBuffer>(in, true);
  SPORA_NEED_FN(all_reduce);
  spora_plugin_error_t* e;
  {
    std::lock_guard<std::mutex> lock(call_mu_);
    e = api_->all_reduce(comm_, same ? o.ptr() : i->ptr(), o.ptr(), static_cast<size_t>(out.shape.numel()),
                         out.dtype, op, nullptr, timeout());
  }
  if (abandoned(e)) {
    o.abandon();
    if (i) i->abandon();
  }
  check(e, "all_reduce");
  o.finish();
}

void Communicator::all_gather(const Tensor& in, const Tensor& out) {
  const Profiled prof(*this, "all_gather", in.nbytes());
  SPORA_NEED_FN(all_gather);
  check_same_dtype(in, out, "all_gather");
  if (out.shape.numel() != in.shape.numel() * size_)
    fail(Code::kInvalidArgument, "[comm all_gather] output has {} elements; it needs size {} x input's {} = {}",
         out.shape.numel(), size_, in.shape.numel(), in.shape.numel() * size_);
  if (device_)
    SPORA_DEVICE_CALL("all_gather",
                      api_->all_gather(comm_, SPORA_PTR(in), SPORA_PTR(out), static_cast<size_t>(in.shape.numel()),
                                       in.dtype, stream, timeout()),
                      &in, &out);
  HostBuffer i(in, true), o(out, false);
  {
    std::lock_guard<std::mutex> lock(call_mu_);
    spora_plugin_error_t* e = api_->all_gather(comm_, i.ptr(), o.ptr(), static_cast<size_t>(in.shape.numel()),
                                               in.dtype, nullptr, timeout());
    if (abandoned(e)) {
      i.abandon();
      o.abandon();
    }
    check(e, "all_gather");
  }
  o.finish();
}

void Communicator::reduce_scatter(const Tensor& in, const Tensor& out, int32_t op) {
  const Profiled prof(*this, "reduce_scatter", in.nbytes());
  SPORA_NEED_FN(reduce_scatter);
  check_same_dtype(in, out, "reduce_scatter");
  if (in.shape.numel() != out.shape.numel() * size_)
    fail(Code::kInvalidArgument, "[comm reduce_scatter] input has {} elements; it needs size {} x output's {} = {}",
         in.shape.numel(), size_, out.shape.numel(), out.shape.numel() * size_);
  if (device_)
    SPORA_DEVICE_CALL("reduce_scatter",
                      api_->reduce_scatter(comm_, SPORA_PTR(in), SPORA_PTR(out),
                                           static_cast<size_t>(out.shape.numel()), in.dtype, op, stream, timeout()),
                      &in, &out);
  HostBuffer i(in, true), o(out, false);
  {
    std::lock_guard<std::mutex> lock(call_mu_);
    spora_plugin_error_t* e = api_->reduce_scatter(comm_, i.ptr(), o.ptr(), static_cast<size_t>(out.shape.numel()),
                                                   in.dtype, op, nullptr, timeout());
    if (abandoned(e)) {
      i.abandon();
      o.abandon();
    }
    check(e, "reduce_scatter");
  }
  o.finish();
}

void Communicator::broadcast(const Tensor& t, int32_t root) {
  const Profiled prof(*this, "broadcast", t.nbytes());
  SPORA_NEED_FN(broadcast);
  if (device_)
    SPORA_DEVICE_CALL("broadcast",
                      api_->broadcast(comm_, SPORA_PTR(t), SPORA_PTR(t), static_cast<size_t>(t.shape.numel()), t.dtype,
                                      root, stream, timeout()),
                      &t);
  HostBuffer b(t, rank_ == root);
  {
    std::lock_guard<std::mutex> lock(call_mu_);
    spora_plugin_error_t* e = api_->broadcast(comm_, b.ptr(), b.ptr(), static_cast<size_t>(t.shape.numel()),
                                              t.dtype, root, nullptr, timeout());
    if (abandoned(e)) b.abandon();
    check(e, "broadcast");
  }
  b.finish();
}

void Communicator::all_to_all(const Tensor& in, const Tensor& out) {
  const Profiled prof(*this, "all_to_all", in.nbytes());
  SPORA_NEED_FN(all_to_all);
  check_same_dtype(in, out, "all_to_all");
  if (in.shape.numel() != out.shape.numel() || in.shape.numel() % size_ != 0)
    fail(Code::kInvalidArgument,
         "[comm all_to_all] input ({} elements) and output ({}) must be equal and divisible by size {}",
         in.shape.numel(), out.shape.numel(), size_);
  if (device_)
    SPORA_DEVICE_CALL("all_to_all",
                      api_->all_to_all(comm_, SPORA_PTR(in), SPORA_PTR(out),
                                       static_cast<size_t>(in.shape.numel() / size_), in.dtype, stream, timeout()),
                      &in, &out);
  HostBuffer i(in, true), o(out, false);
  {
    std::lock_guard<std::mutex> lock(call_mu_);
    spora_plugin_error_t* e = api_->all_to_all(comm_, i.ptr(), o.ptr(), static_cast<size_t>(in.shape.numel() / size_),
                                               in.dtype, nullptr, timeout());
    if (abandoned(e)) {
      i.abandon();
      o.abandon();
    }
    check(e, "all_to_all");
  }
  o.finish();
}

void Communicator::send(const Tensor& t, int32_t peer) {
  const Profiled prof(*this, "send", t.nbytes());
  SPORA_NEED_FN(send);
  if (device_)
    SPORA_DEVICE_CALL("send",
                      api_->send(comm_, SPORA_PTR(t), static_cast<size_t>(t.shape.numel()), t.dtype, peer, stream,
                                 timeout()),
                      &t);
  HostBuffer b(t, true);
  std::lock_guard<std::mutex> lock(call_mu_);
  spora_plugin_error_t* e =
      api_->send(comm_, b.ptr(), static_cast<size_t>(t.shape.numel()), t.dtype, peer, nullptr, timeout());
  if (abandoned(e)) b.abandon();
  check(e, "send");
}

void Communicator::recv(const Tensor& t, int32_t peer) {
  const Profiled prof(*this, "recv", t.nbytes());
  SPORA_NEED_FN(recv);
  if (device_)
    SPORA_DEVICE_CALL("recv",
                      api_->recv(comm_, SPORA_PTR(t), static_cast<size_t>(t.shape.numel()), t.dtype, peer, stream,
                                 timeout()),
                      &t);
  HostBuffer b(t, false);
  {
    std::lock_guard<std::mutex> lock(call_mu_);
    spora_plugin_error_t* e =
        api_->recv(comm_, b.ptr(), static_cast<size_t>(t.shape.numel()), t.dtype, peer, nullptr, timeout());
    if (abandoned(e)) b.abandon();
    check(e, "recv");
  }
  b.finish();
}

size_t quarantined_bytes() {
  std::lock_guard<std::mutex> lock(g_quarantine_mu);
  return g_quarantined_bytes;
}

void Communicator::barrier() {
  const Profiled prof(*this, "barrier", 0);
  SPORA_NEED_FN(barrier);
  // A device-bound barrier waits for the stream too: the work before it on
  // this rank has finished when it returns.
  if (device_) device_->synchronize();
  std::lock_guard<std::mutex> lock(call_mu_);
  check(api_->barrier(comm_, nullptr, timeout()), "barrier");
}

#undef SPORA_DEVICE_CALL
#undef SPORA_PTR

namespace {

// Blocks of a tensor [pre, n * k, post] along the middle dim, as [n][pre][k][post]
// (to_blocks) and back (from_blocks); bytes per element `e`.
void to_blocks(const char* src, char* dst, int64_t pre, int64_t n, int64_t k, int64_t post, size_t e) {
  const size_t row = static_cast<size_t>(k * post) * e;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t p = 0; p < pre; ++p)
      std::memcpy(dst + static_cast<size_t>(r * pre + p) * row, src + static_cast<size_t>(p * n + r) * row, row);
}
void from_blocks(const char* src, char* dst, int64_t pre, int64_t n, int64_t k, int64_t post, size_t e) {
  const size_t row = static_cast<size_t>(k * post) * e;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t p = 0; p < pre; ++p)
      std::memcpy(dst + static_cast<size_t>(p * n + r) * row, src + static_cast<size_t>(r * pre + p) * row, row);
}

}  // namespace

void Communicator::run_host(const std::string& op, const Attrs& attrs, const TensorMeta& in, const TensorMeta& out,
                            const void* send, void* recv, int32_t reduce_op) {
  if (op == "all_reduce") {
    all_reduce_host(send, recv, static_cast<size_t>(in.shape.numel()), in.dtype, reduce_op);
    return;
  }
  const Profiled prof(*this, op.c_str(), static_cast<uint64_t>(in.shape.numel()) * dtype_size(in.dtype));
  if (attrs.get_int("size") != size_)
    fail(Code::kInvalidArgument, "[{}] the graph was built for {} ranks but communicator {} has {}", op,
         attrs.get_int("size"), id_, size_);
  if (op == "all_to_all") {
    SPORA_NEED_FN(all_to_all);
    // Send block j (along split_axis) to rank j: pack the blocks contiguous;
    // unpack what arrives (one block per rank) along concat_axis.
    const Shape& x = in.shape;
    const int64_t sa = attrs.get_int("split_axis"), ca = attrs.get_int("concat_axis");
    auto around = [](const Shape& s, int64_t axis, int64_t* before, int64_t* after) {
      *before = *after = 1;
      for (int64_t d = 0; d < axis; ++d) *before *= s.dims[d];
      for (int64_t d = axis + 1; d < s.rank; ++d) *after *= s.dims[d];
    };
    int64_t sp, sq, cp, cq;
    around(x, sa, &sp, &sq);
    Shape block = x;
    block.dims[sa] /= size_;
    around(block, ca, &cp, &cq);
    std::vector<char> packed(static_cast<size_t>(x.numel()) * dtype_size(in.dtype)), got(packed.size());
    to_blocks(static_cast<const char*>(send), packed.data(), sp, size_, x.dims[sa] / size_, sq, dtype_size(in.dtype));
    {
      std::lock_guard<std::mutex> lock(call_mu_);
      check(api_->all_to_all(comm_, packed.data(), got.data(), static_cast<size_t>(block.numel()), in.dtype, nullptr,
                             timeout()),
            "all_to_all");
    }
    from_blocks(got.data(), static_cast<char*>(recv), cp, size_, block.dims[ca], cq, dtype_size(in.dtype));
    return;
  }
  const Shape& full = op == "all_gather" ? out.shape : in.shape;
  const int64_t axis = attrs.get_int("axis");
  int64_t pre = 1, post = 1;
  for (int64_t d = 0; d < axis; ++d) pre *= full.dims[d];
  for (int64_t d = axis + 1; d < full.rank; ++d) post *= full.dims[d];
  const int64_t k = full.dims[axis] / size_;
  const size_t e = dtype_size(in.dtype);
  std::vector<char> tmp;
  if (op == "all_gather") {
    SPORA_NEED_FN(all_gather);
    if (pre > 1) tmp.resize(static_cast<size_t>(out.shape.numel()) * e);
    {
      std::lock_guard<std::mutex> lock(call_mu_);
      check(api_->all_gather(comm_, send, pre > 1 ? tmp.data() : recv, static_cast<size_t>(in.shape.numel()),
                             in.dtype, nullptr, timeout()),
            "all_gather");
    }
    if (pre > 1) from_blocks(tmp.data(), static_cast<char*>(recv), pre, size_, k, post, e);
    return;
  }
  if (op == "reduce_scatter") {
    SPORA_NEED_FN(reduce_scatter);
    if (pre > 1) {
      tmp.resize(static_cast<size_t>(in.shape.numel()) * e);
      to_blocks(static_cast<const char*>(send), tmp.data(), pre, size_, k, post, e);
    }
    std::lock_guard<std::mutex> lock(call_mu_);
    check(api_->reduce_scatter(comm_, pre > 1 ? tmp.data() : send, recv, static_cast<size_t>(out.shape.numel()),
                               in.dtype, reduce_op, nullptr, timeout()),
          "reduce_scatter");
    return;
  }
  fail(Code::kInternal, "[{}] is not a collective the scheduler runs", op);
}

std::string Communicator::device_layout_problem(const std::string& op, const Attrs& attrs, const TensorMeta& in,
                                                const TensorMeta& out) {
  if (op == "all_reduce") return "";
  if (op == "all_to_all")
    return "all_to_all regroups blocks along its axes, which only host-memory backends do in a graph";
  if (op != "all_gather" && op != "reduce_scatter") return op + " is not a collective the scheduler runs";
  const Shape& full = op == "all_gather" ? out.shape : in.shape;
  const int64_t axis = attrs.get_int("axis");
  for (int64_t d = 0; d < axis; ++d)
    if (full.dims[d] > 1)
      return fmt::format("{} along dim {} of {} interleaves the ranks' blocks, which only host-memory backends do in "
                         "a graph; gather along dim 0 instead",
                         op, axis, full.str());
  return "";
}

void Communicator::run_device(const std::string& op, const Attrs& attrs, const TensorMeta& in, const TensorMeta& out,
                              const void* send, void* recv, int32_t reduce_op, Device::Lane lane) {
  // Enqueued on the device: the span is the host's part; the transfer itself
  // shows on the device plugin's tracks when it reports it.
  const Profiled prof(*this, op.c_str(), static_cast<uint64_t>(in.shape.numel()) * dtype_size(in.dtype));
  if (!device_) fail(Code::kInternal, "[{}] communicator {} is not bound to a device", op, id_);
  const std::string problem = device_layout_problem(op, attrs, in, out);
  if (!problem.empty()) fail(Code::kUnimplemented, "[{}] {}", op, problem);
  if (op != "all_reduce" && attrs.get_int("size") != size_)
    fail(Code::kInvalidArgument, "[{}] the graph was built for {} ranks but communicator {} has {}", op,
         attrs.get_int("size"), id_, size_);
  void* stream = device_->native_stream(lane);
  spora_plugin_error_t* e = nullptr;
  std::lock_guard<std::mutex> lock(call_mu_);
  if (op == "all_reduce") {
    SPORA_NEED_FN(all_reduce);
    e = api_->all_reduce(comm_, send, recv, static_cast<size_t>(in.shape.numel()), in.dtype, reduce_op, stream,
                         timeout());
  } else if (op == "all_gather") {
    SPORA_NEED_FN(all_gather);
    e = api_->all_gather(comm_, send, recv, static_cast<size_t>(in.shape.numel()), in.dtype, stream, timeout());
  } else {
    SPORA_NEED_FN(reduce_scatter);
    e = api_->reduce_scatter(comm_, send, recv, static_cast<size_t>(out.shape.numel()), in.dtype, reduce_op, stream,
                             timeout());
  }
  check(e, op.c_str());
}

#undef SPORA_NEED_FN

void Communicator::Job::mark_ready() {
  {
    std::lock_guard<std::mutex> lock(mu);
    ready = true;
  }
  cv.notify_all();
}

void Communicator::Job::cancel() {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (ready) return;
    fn = nullptr;
    ready = true;
  }
  cv.notify_all();
}

namespace {
std::atomic<int64_t> g_busy_ns{0}, g_exposed_ns{0};
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

void Communicator::overlap_stats(int64_t* busy_ns, int64_t* exposed_ns, bool reset) {
  if (busy_ns) *busy_ns = reset ? g_busy_ns.exchange(0) : g_busy_ns.load();
  if (exposed_ns) *exposed_ns = reset ? g_exposed_ns.exchange(0) : g_exposed_ns.load();
}

void Communicator::Job::wait(bool exposed) {
  std::unique_lock<std::mutex> lock(mu);
  if (done) return;
  const int64_t t0 = now_ns();
  cv.wait(lock, [&] { return done; });
  if (exposed) g_exposed_ns += now_ns() - t0;
}

void Communicator::Job::rethrow() const {
  if (error) std::rethrow_exception(error);
}

namespace {

// The collective thread: posted jobs in order, each once its poster marked
// it ready. Posters always mark their jobs ready (or cancel them) and wait
// for them before the memory they use goes (sched/executor.cpp). Never
// destroyed: it idles on its queue until the process ends.
class JobQueue {
 public:
  void push(std::shared_ptr<Communicator::Job> job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!thread_started_) {
        std::thread([this] { run(); }).detach();
        thread_started_ = true;
      }
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }
  static JobQueue& get() {
    static auto* q = new JobQueue();
    return *q;
  }

 private:
  void run() {
    for (;;) {
      std::shared_ptr<Communicator::Job> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return !jobs_.empty(); });
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      Communicator::run_job(*job);
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Communicator::Job>> jobs_;
  bool thread_started_ = false;
};

}  // namespace

std::shared_ptr<Communicator::Job> Communicator::post(std::function<void()> fn) {
  auto job = std::make_shared<Job>();
  job->fn = std::move(fn);
  JobQueue::get().push(job);
  return job;
}

void Communicator::run_job(Job& job) {
  {
    std::unique_lock<std::mutex> lock(job.mu);
    job.cv.wait(lock, [&] { return job.ready; });
  }
  const int64_t t0 = now_ns();
  try {
    if (job.fn) job.fn();
  } catch (...) {
    job.error = std::current_exception();
  }
  if (job.fn) g_busy_ns += now_ns() - t0;
  job.fn = nullptr;
  {
    std::lock_guard<std::mutex> lock(job.mu);
    job.done = true;
  }
  job.cv.notify_all();
}

}  // namespace spora
