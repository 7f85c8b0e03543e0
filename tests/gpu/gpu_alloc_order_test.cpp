// The CUDA plugin's caching allocator (plugins/cuda/gpu_alloc.cpp), compiled
// against a model of the CUDA runtime (fake_cuda/cuda_runtime_api.h and the
// functions below), without a GPU.
//
// The model records every stream operation (allocation, free, event record
// and wait, and the test's own "uses" of blocks, which stand for kernels and
// copies) and derives what happens before what: stream order, event waits,
// host synchronizations. Its pool reuses a freed block of the same size at
// once, as CUDA's does by default (cudaMemPoolReuseAllowInternalDependencies:
// an allocation on another stream is made to wait for the free). A block is
// used safely when every use comes after the allocation that made it and
// before its free; the tests check that for the allocator's orderings with
// one stream, several streams, streams created and destroyed in between, and
// a stream being captured -- and that the model does catch an unordered use.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "error.h"
#include "gpu_alloc.h"
#include "gpu_state.h"

namespace {

// ---- the model ----

enum class Kind { kAlloc, kFree, kRecord, kWait, kUse, kBegin };

struct Op {
  int stream;
  Kind kind;
  std::vector<int> after;  // ops this one waits for besides its stream predecessor
  int block = -1;          // kAlloc / kFree / kUse: the block instance
};

struct Block {
  uintptr_t address;
  size_t size;
  int alloc_op = -1;
  int free_op = -1;
  std::vector<int> uses;
};

struct Model {
  std::vector<Op> ops;
  std::vector<std::vector<int>> streams;  // ops of each stream, in order
  std::vector<bool> capturing;
  std::vector<bool> destroyed;
  std::vector<int> events;  // the op each event was last recorded at (-1: never)
  std::vector<Block> blocks;
  std::map<uintptr_t, int> live;          // address -> block instance
  std::multimap<size_t, int> free_blocks;  // size -> freed instance (address reusable)
  std::vector<int> host_done;             // ops the host has seen complete (synchronizations)
  uintptr_t next_address = 0x10000;
  uint64_t reserved = 0, reserved_high = 0;
  int records = 0;

  int new_stream() {
    streams.emplace_back();
    capturing.push_back(false);
    destroyed.push_back(false);
    return static_cast<int>(streams.size()) - 1;
  }
  int push(int stream, Kind kind, std::vector<int> after = {}, int block = -1) {
    Op op{stream, kind, std::move(after), block};
    // Work enqueued after the host saw ops complete comes after them.
    op.after.insert(op.after.end(), host_done.begin(), host_done.end());
    ops.push_back(op);
    const int id = static_cast<int>(ops.size()) - 1;
    streams[static_cast<size_t>(stream)].push_back(id);
    return id;
  }
  // True when op `a` happens before op `b`.
  bool before(int a, int b) const {
    std::vector<int> todo{b};
    std::set<int> seen;
    while (!todo.empty()) {
      const int x = todo.back();
      todo.pop_back();
      if (!seen.insert(x).second) continue;
      const Op& op = ops[static_cast<size_t>(x)];
      const auto& order = streams[static_cast<size_t>(op.stream)];
      const auto pos = std::find(order.begin(), order.end(), x);
      if (pos != order.begin()) todo.push_back(*(pos - 1));
      for (int y : op.after) todo.push_back(y);
      if (x != b && x == a) return true;
    }
    return false;
  }
  void synchronize(int stream) {
    const auto& order = streams[static_cast<size_t>(stream)];
    if (!order.empty()) host_done.push_back(order.back());
  }
  // Every use of every block after its allocation and before its free.
  std::string violations() const {
    std::string out;
    for (size_t i = 0; i < blocks.size(); ++i) {
      const Block& b = blocks[i];
      for (int u : b.uses) {
        if (!before(b.alloc_op, u))
          out += "block " + std::to_string(i) + ": use (op " + std::to_string(u) + ") not after its allocation (op " +
                 std::to_string(b.alloc_op) + ")\n";
        if (b.free_op >= 0 && !before(u, b.free_op))
          out += "block " + std::to_string(i) + ": use (op " + std::to_string(u) + ") not before its free (op " +
                 std::to_string(b.free_op) + ")\n";
      }
    }
    return out;
  }
};

Model& model() {
  static Model* m = new Model;
  return *m;
}

cudaStream_t handle(int s) { return reinterpret_cast<cudaStream_t>(static_cast<uintptr_t>(s + 1) * 16); }
int index_of(cudaStream_t s) { return static_cast<int>(reinterpret_cast<uintptr_t>(s) / 16) - 1; }
cudaEvent_t event_handle(int e) { return reinterpret_cast<cudaEvent_t>(static_cast<uintptr_t>(e + 1) * 16); }
int event_of(cudaEvent_t e) { return static_cast<int>(reinterpret_cast<uintptr_t>(e) / 16) - 1; }

}  // namespace

// ---- the runtime functions gpu_alloc.cpp calls, over the model ----

extern "C" {
const char* cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaErrorModel"; }
const char* cudaGetErrorString(cudaError_t) { return "model error"; }
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr, int) {
  *value = 1;
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) {
  for (size_t s = 0; s < model().streams.size(); ++s) model().synchronize(static_cast<int>(s));
  return cudaSuccess;
}
cudaError_t cudaMalloc(void**, size_t) { return cudaErrorInvalidValue; }  // the pool is used
cudaError_t cudaFree(void*) { return cudaErrorInvalidValue; }
cudaError_t cudaMemPoolCreate(cudaMemPool_t* pool, const cudaMemPoolProps*) {
  *pool = reinterpret_cast<cudaMemPool_t>(uintptr_t{0x9000});
  return cudaSuccess;
}
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t, cudaMemPoolAttr attr, void* value) {
  if (attr == cudaMemPoolAttrReservedMemHigh) {
    if (*static_cast<uint64_t*>(value) != 0) return cudaErrorInvalidValue;
    model().reserved_high = model().reserved;
  }
  return cudaSuccess;
}
cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t, cudaMemPoolAttr attr, void* value) {
  if (attr == cudaMemPoolAttrReservedMemCurrent) *static_cast<uint64_t*>(value) = model().reserved;
  if (attr == cudaMemPoolAttrReservedMemHigh) *static_cast<uint64_t*>(value) = model().reserved_high;
  return cudaSuccess;
}
cudaError_t cudaMallocFromPoolAsync(void** p, size_t size, cudaMemPool_t, cudaStream_t stream) {
  Model& m = model();
  const int s = index_of(stream);
  if (m.capturing[static_cast<size_t>(s)]) return cudaErrorInvalidValue;  // would be captured, not run
  Block b;
  b.size = size;
  std::vector<int> after;
  auto reuse = m.free_blocks.find(size);
  if (reuse != m.free_blocks.end()) {
    const Block& old = m.blocks[static_cast<size_t>(reuse->second)];
    b.address = old.address;
    after.push_back(old.free_op);  // CUDA's internal dependency: the allocation waits for the free
    m.free_blocks.erase(reuse);
  } else {
    b.address = m.next_address;
    m.next_address += (size + 0xFFF) / 0x1000 * 0x1000;
    m.reserved += size;
    m.reserved_high = std::max(m.reserved_high, m.reserved);
  }
  m.blocks.push_back(b);
  const int id = static_cast<int>(m.blocks.size()) - 1;
  m.blocks.back().alloc_op = m.push(s, Kind::kAlloc, after, id);
  m.live[b.address] = id;
  *p = reinterpret_cast<void*>(b.address);
  return cudaSuccess;
}
cudaError_t cudaFreeAsync(void* p, cudaStream_t stream) {
  Model& m = model();
  const int s = index_of(stream);
  if (m.capturing[static_cast<size_t>(s)]) return cudaErrorInvalidValue;
  auto it = m.live.find(reinterpret_cast<uintptr_t>(p));
  if (it == m.live.end()) return cudaErrorInvalidValue;
  const int id = it->second;
  m.live.erase(it);
  m.blocks[static_cast<size_t>(id)].free_op = m.push(s, Kind::kFree, {}, id);
  m.free_blocks.emplace(m.blocks[static_cast<size_t>(id)].size, id);
  return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned) {
  *stream = handle(model().new_stream());
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  model().destroyed[static_cast<size_t>(index_of(stream))] = true;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  model().synchronize(index_of(stream));
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned) {
  Model& m = model();
  const int recorded = m.events[static_cast<size_t>(event_of(event))];
  m.push(index_of(stream), Kind::kWait, recorded >= 0 ? std::vector<int>{recorded} : std::vector<int>{});
  return cudaSuccess;
}
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  *status = model().capturing[static_cast<size_t>(index_of(stream))] ? cudaStreamCaptureStatusActive
                                                                      : cudaStreamCaptureStatusNone;
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned) {
  model().events.push_back(-1);
  *event = event_handle(static_cast<int>(model().events.size()) - 1);
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  Model& m = model();
  ++m.records;
  m.events[static_cast<size_t>(event_of(event))] = m.push(index_of(stream), Kind::kRecord);
  return cudaSuccess;
}
}  // extern "C"

// ---- what gpu_state.cpp provides the allocator ----

namespace spora::gpu {
std::atomic<const spora_host_t*> g_host{nullptr};
void host_log(int32_t, const std::string&) {}
spora_plugin_error_t* plugin_error(int32_t code, const std::string& message) {
  return spora::plugin::make_error(code, "[cuda] " + message);
}
spora_plugin_error_t* runtime_error(const std::string& what, cudaError_t e) {
  return plugin_error(e == cudaErrorMemoryAllocation ? SPORA_PLUGIN_OUT_OF_MEMORY : SPORA_PLUGIN_INTERNAL,
                      what + ": " + cudaGetErrorName(e));
}
spora_plugin_error_t* get_state(State** out) {
  static State* state = [] {
    auto* s = new State;
    Device d;
    d.memory_bytes = uint64_t{1} << 34;
    s->devices.push_back(d);
    return s;
  }();
  *out = state;
  return nullptr;
}
}  // namespace spora::gpu

namespace {

namespace alloc = spora::gpu::alloc;

std::string ok(spora_plugin_error_t* e) {
  if (!e) return "";
  std::string m = e->message;
  e->destroy(e);
  return m;
}

// A stream the host created (gpu_stream.cpp registers it the same way).
struct HostStream {
  int id;
  HostStream() {
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    id = index_of(s);
    EXPECT_EQ(ok(alloc::stream_added(0, s)), "");
  }
  void destroy() {
    model().synchronize(id);  // stream_destroy synchronizes first
    alloc::stream_removed(0, handle(id));
    cudaStreamDestroy(handle(id));
  }
};

void* allocate(size_t n) {
  void* p = nullptr;
  EXPECT_EQ(ok(alloc::allocate(0, n, &p)), "");
  return p;
}
void release(void* p) { EXPECT_EQ(ok(alloc::release(0, p)), ""); }
// A kernel or copy on `s` that reads or writes `p`.
void use(const HostStream& s, void* p) {
  Model& m = model();
  const int id = m.live.at(reinterpret_cast<uintptr_t>(p));
  m.blocks[static_cast<size_t>(id)].uses.push_back(m.push(s.id, Kind::kUse, {}, id));
}
int instance(void* p) { return model().live.at(reinterpret_cast<uintptr_t>(p)); }

TEST(GpuAllocOrder, OneStreamReusesBlocksInStreamOrderWithoutEvents) {
  HostStream s;
  const int records = model().records;
  // Larger than the host-side cache takes: through the pool.
  const size_t big = (size_t{1} << 20) + 256;
  void* a = allocate(big);
  use(s, a);
  use(s, a);
  const int first = instance(a);
  release(a);
  EXPECT_GE(model().blocks[static_cast<size_t>(first)].free_op, 0) << "freed to the pool";
  void* b = allocate(big);  // the model hands the same address out again
  EXPECT_EQ(b, a);
  EXPECT_NE(instance(b), first);
  use(s, b);
  release(b);
  EXPECT_EQ(model().records, records) << "one stream needs no events";
  EXPECT_EQ(model().violations(), "");
  s.destroy();
}

// With one live stream a small freed block stays with the allocator and the
// next request of its size gets it back without any runtime call (what an
// eager op's output costs); the model sees one block used by both owners in
// stream order.
TEST(GpuAllocOrder, OneStreamCachesSmallBlocksWithoutRuntimeCalls) {
  HostStream s;
  void* a = allocate(1000);
  use(s, a);
  const size_t ops = model().ops.size();
  release(a);
  void* b = allocate(1000);
  EXPECT_EQ(b, a);
  void* c = allocate(1000);  // b took the only cached block of the size
  EXPECT_NE(c, a);
  EXPECT_EQ(model().ops.size(), ops + 1) << "only c's allocation reached the runtime";
  use(s, b);
  use(s, c);
  release(b);
  release(c);
  void* d = allocate(900);  // rounds to 1024 bytes too
  EXPECT_EQ(d, c) << "the most recently freed block of the size";
  use(s, d);
  release(d);
  EXPECT_TRUE(model().live.count(reinterpret_cast<uintptr_t>(a))) << "cached, not freed to the pool";
  EXPECT_TRUE(model().live.count(reinterpret_cast<uintptr_t>(c))) << "cached, not freed to the pool";
  s.destroy();  // gives the cached blocks back on the stream, after their uses
  EXPECT_FALSE(model().live.count(reinterpret_cast<uintptr_t>(a)));
  EXPECT_FALSE(model().live.count(reinterpret_cast<uintptr_t>(c)));
  EXPECT_EQ(model().violations(), "");
}

// A second stream could touch a cached block while the first still runs
// work on its old owner: the cache is freed on the first stream before the
// second one is added, and blocks are then ordered with events.
TEST(GpuAllocOrder, ASecondStreamEmptiesTheCacheFirst) {
  HostStream s1;
  void* a = allocate(4096);
  use(s1, a);
  const int first = instance(a);
  release(a);
  EXPECT_LT(model().blocks[static_cast<size_t>(first)].free_op, 0) << "cached";
  HostStream s2;
  EXPECT_GE(model().blocks[static_cast<size_t>(first)].free_op, 0) << "freed when s2 appeared";
  void* b = allocate(4096);
  use(s2, b);
  use(s1, b);
  release(b);
  EXPECT_EQ(model().violations(), "");
  s2.destroy();
  void* c = allocate(4096);  // one stream again: cached blocks come back into use
  use(s1, c);
  release(c);
  EXPECT_EQ(model().violations(), "");
  s1.destroy();
}

// A block a capture gets is used by the captured graph every time it is
// launched: never a cached block (it may still be referenced by queued
// eager work and would be handed out again after the capture).
TEST(GpuAllocOrder, ACaptureNeverGetsACachedBlock) {
  HostStream s;
  void* a = allocate(2000);
  use(s, a);
  release(a);  // cached
  model().capturing[static_cast<size_t>(s.id)] = true;
  void* c = allocate(2000);
  EXPECT_NE(c, a);
  model().capturing[static_cast<size_t>(s.id)] = false;
  use(s, c);
  release(c);
  EXPECT_EQ(allocate(2000), c) << "cached after the capture, most recent first";
  release(c);
  s.destroy();
  EXPECT_EQ(model().violations(), "");
}

TEST(GpuAllocOrder, TwoStreamsOrderFreesAfterBothAndAllocationsBeforeBoth) {
  HostStream s1, s2;
  void* a = allocate(4096);
  use(s1, a);
  use(s2, a);
  release(a);               // queued uses on both streams
  void* b = allocate(4096);  // same address, new owner on the other stream
  EXPECT_EQ(b, a);
  use(s2, b);
  use(s1, b);
  release(b);
  EXPECT_EQ(model().violations(), "");
  s1.destroy();
  s2.destroy();
}

TEST(GpuAllocOrder, AStreamCreatedLaterWaitsForBlocksAllocatedBeforeIt) {
  HostStream s1;
  void* a = allocate(512);
  use(s1, a);
  release(a);
  void* b = allocate(512);  // reuses a's address on s1, behind a's uses
  HostStream s2;            // must not touch b before s1 reached b's allocation
  use(s2, b);
  s1.destroy();  // back to one stream: b is freed on s2 after its use there
  release(b);
  EXPECT_EQ(model().violations(), "");
  s2.destroy();
}

TEST(GpuAllocOrder, NoLiveStreamThenOne) {
  void* a = allocate(2048);  // no stream yet: the allocator's own stream
  HostStream s;
  use(s, a);
  release(a);
  void* b = allocate(2048);
  use(s, b);
  release(b);
  EXPECT_EQ(model().violations(), "");
  s.destroy();
}

TEST(GpuAllocOrder, FreesDuringACaptureWaitForTheCaptureToEnd) {
  HostStream s;
  void* a = allocate(8192);
  use(s, a);
  model().capturing[static_cast<size_t>(s.id)] = true;
  release(a);  // must not be queued on the capturing stream
  EXPECT_TRUE(model().live.count(reinterpret_cast<uintptr_t>(a))) << "freed while the stream was capturing";
  void* c = allocate(100);  // made elsewhere and waited for
  EXPECT_NE(c, a);
  model().capturing[static_cast<size_t>(s.id)] = false;
  use(s, c);
  void* d = allocate(100);  // outside the capture: the deferred free goes out now
  EXPECT_FALSE(model().live.count(reinterpret_cast<uintptr_t>(a)));
  use(s, d);
  release(c);
  release(d);
  EXPECT_EQ(model().violations(), "");
  s.destroy();
}

TEST(GpuAllocOrder, StatisticsCountRequestedBytesAndThePoolsReservation) {
  spora_memory_stats_t st{};
  st.struct_size = sizeof st;
  ASSERT_EQ(ok(alloc::stats(0, &st)), "");
  const uint64_t base = st.allocated_bytes;
  HostStream s;
  void* a = allocate(1000);
  void* b = allocate(3000);
  ASSERT_EQ(ok(alloc::stats(0, &st)), "");
  EXPECT_EQ(st.allocated_bytes, base + 4000);
  EXPECT_GE(st.reserved_bytes, st.allocated_bytes);
  release(b);
  ASSERT_EQ(ok(alloc::stats(0, &st)), "");
  EXPECT_EQ(st.allocated_bytes, base + 1000);
  EXPECT_GE(st.peak_allocated_bytes, base + 4000);
  ASSERT_EQ(ok(alloc::reset_peak(0)), "");
  ASSERT_EQ(ok(alloc::stats(0, &st)), "");
  EXPECT_EQ(st.peak_allocated_bytes, st.allocated_bytes);
  EXPECT_EQ(st.peak_reserved_bytes, st.reserved_bytes);
  release(a);
  // Refused: a double free, an address inside a block.
  EXPECT_NE(ok(alloc::release(0, a)), "");
  void* c = allocate(600);
  EXPECT_NE(ok(alloc::release(0, static_cast<char*>(c) + 256)), "");
  release(c);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(c) % 256, 0u);
  EXPECT_NE(ok(alloc::allocate(0, uint64_t{1} << 40, &c)), "") << "more than the device's memory";
  s.destroy();
}

// The model catches an allocator that would not order: a block freed on
// one stream while another still uses it, and a block used on a stream
// that never waited for its allocation.
TEST(GpuAllocOrder, TheModelCatchesUnorderedUses) {
  Model& m = model();
  const int s1 = m.new_stream(), s2 = m.new_stream();
  cudaMemPool_t pool;
  cudaMemPoolCreate(&pool, nullptr);
  void* p = nullptr;
  ASSERT_EQ(cudaMallocFromPoolAsync(&p, 77777, pool, handle(s1)), cudaSuccess);
  const int id = m.live.at(reinterpret_cast<uintptr_t>(p));
  m.blocks[static_cast<size_t>(id)].uses.push_back(m.push(s2, Kind::kUse, {}, id));  // s2 never waited
  ASSERT_EQ(cudaFreeAsync(p, handle(s1)), cudaSuccess);  // nor does the free wait for s2
  const std::string bad = m.violations();
  EXPECT_NE(bad.find("not after its allocation"), std::string::npos) << bad;
  EXPECT_NE(bad.find("not before its free"), std::string::npos) << bad;
  m.blocks[static_cast<size_t>(id)].uses.clear();  // keep the other tests' verdicts clean
}

}  // namespace
