// The profiler: one process-wide recording session at a time, started and
// stopped through the C API (spora_profiler_*). While it runs it keeps
//   - host spans: every eager op call (C API and graph interpreter) and every
//     step of a compiled plan, with its inputs' and outputs' dtypes and
//     shapes, its device and the caller's source line when known; user
//     ranges (step markers of Model.train, spora_profiler_range_begin);
//     collectives (bytes, communicator, rank);
//   - device spans that plugins report through the host services' trace
//     hooks (plugin.h: trace_begin / trace_end), one track per plugin thread
//     (a sim stream's worker is one stream; the cpu plugin runs inline on the
//     caller's thread);
//   - flow arrows from the host span that launched work to the device span
//     that ran it (a hook span begun on one thread and ended on another is a
//     hand-off: see hook_end);
//   - memory counters (allocated / reserved bytes per device, sampled after
//     ops at most every kMemorySampleNs per device).
// and writes them as Chrome trace-event JSON (profiler_report.cpp), with an
// op summary table.
//
// Cost when no session runs: on() is one relaxed load, tested once per op
// (OpTimer); nothing else is touched. While it runs, each record takes one
// process-wide mutex (uncontended in a single-threaded training loop) and
// appends a fixed-size record: names are interned, an op's dtypes, shapes,
// device and source line are stored as numbers, and nothing is formatted or
// allocated per event until the trace is read (snapshot()). The recording
// thread's extra time sits between kernels, where it delays the other
// threads of the next parallel region, so it costs more wall time than its
// own CPU share (bench/README.md, "Profiler overhead").
//
// Threads: every function may be called from any thread.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace spora {
class Device;
struct Tensor;
}  // namespace spora

namespace spora::profiler {

namespace detail {
extern std::atomic<bool> active;
extern thread_local int tl_open_ops;  // armed OpTimers alive on this thread
}  // namespace detail

class IoArgs;

// True while a session records.
inline bool on() { return detail::active.load(std::memory_order_relaxed); }

// Nanoseconds on the steady clock (the session's time base).
int64_t now_ns();

// Starts a session, dropping what an earlier one recorded. Fails
// (kInvalidArgument) when one already runs.
void start();
// Stops recording; what was recorded stays for write_trace/summary until the
// next start. Fails (kInvalidArgument) when none runs.
void stop();
bool running();

// Where a span is drawn: the host's threads, or the device work plugins
// report (one track per plugin thread).
enum class Track : uint8_t { kHost = 1, kDevice = 2 };

// One recorded trace event (Chrome trace-event phases: 'X' a complete span,
// 'C' a counter, 's'/'f' the two ends of a flow arrow). Times are ns since
// the session started.
struct Event {
  char ph = 'X';
  Track track = Track::kHost;
  uint32_t tid = 0;
  int64_t ts = 0, dur = 0;
  uint64_t flow = 0;
  std::string name, cat;
  std::string args;  // a JSON object's members ("\"a\":1,\"b\":\"x\""), or ""
};

// A copy of what the session (running or stopped) recorded, and the names of
// the threads it saw (tid -> name).
struct Snapshot {
  int64_t start_ns = 0;  // steady clock at start()
  std::vector<Event> events;
  std::vector<std::pair<uint32_t, std::string>> threads;
  uint64_t dropped = 0;  // events past the cap (kMaxEvents), not kept
};
Snapshot snapshot();

// The calling thread's track id (small, stable for the thread's life).
uint32_t this_thread_id();

// Records a complete span on the calling thread. Does nothing when off.
void record_span(Track track, const char* cat, std::string name, int64_t t0_ns, int64_t t1_ns, std::string args);
// Records a memory counter sample: track "memory <device>", allocated and
// reserved bytes.
void record_memory(const std::string& device, int64_t ts_ns, int64_t allocated, int64_t reserved);
// Records an op span (record_op below, once its device is known): `device`
// may be null, `file` null or "" when the source line is unknown.
void record_op_span(const char* cat, const std::string& op, int64_t t0_ns, int64_t t1_ns, const IoArgs& io,
                    const std::string* device, const char* file, int32_t line);

// ---- trace hooks of the host services (host_services.cpp) ----
// Begins a span for a plugin: returns its id, or 0 when off. `category` is
// "<plugin>.<kind>" by convention ("sim.kernel", "cpu.kernel", "sim.launch").
uint64_t hook_begin(const char* category, const char* name);
// Ends it. Ended on the thread that began it: a device span (a "kernel"
// run inline inside an op's OpTimer gets an arrow from that op). Ended on
// another thread: a hand-off -- a plugin queued work on the first thread and
// a worker picked it up -- drawn as a flow arrow from the first thread's
// host span at the begin time to the next span the ending thread begins
// (the kernel), which also gets the queueing delay in its args.
void hook_end(uint64_t id);

// ---- user ranges (spora_profiler_range_begin/end) ----
// Host spans on the beginning thread's track; 0 when off.
uint64_t range_begin(const char* category, const char* name);
void range_end(uint64_t id);

// ---- ops (profiler_ops.cpp) ----
// Times one op for the profiler: armed (reads the clock) only when a session
// runs, so an op pays on()'s one load when none does.
// While an armed one lives, the thread is inside a host span: work a plugin
// runs inline then gets an arrow from it (see hook_end).
class OpTimer {
 public:
  OpTimer() : t0_(on() ? now_ns() : -1) {
    if (t0_ >= 0) ++detail::tl_open_ops;
  }
  ~OpTimer() {
    if (t0_ >= 0) --detail::tl_open_ops;
  }
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;
  bool armed() const { return t0_ >= 0; }
  int64_t t0() const { return t0_; }

 private:
  int64_t t0_;
};

// An op's inputs and outputs for its span's args: each one's dtype and
// shape, kept as numbers (no strings, no heap for the usual few operands) and
// formatted ("f32[128,784]") only when the trace is read.
class IoArgs {
 public:
  void input(int32_t dtype, const int64_t* dims, int32_t rank) { add(false, dtype, dims, rank); }
  void output(int32_t dtype, const int64_t* dims, int32_t rank) { add(true, dtype, dims, rank); }
  // Per operand: a header word (bit 0 output, bits 1-15 dtype, bits 16-31
  // rank), then its rank dims.
  const int64_t* words() const { return heap_.empty() ? inline_ : heap_.data(); }
  size_t size() const { return n_; }

 private:
  void add(bool output, int32_t dtype, const int64_t* dims, int32_t rank);
  static constexpr size_t kInline = 48;
  int64_t inline_[kInline];
  std::vector<int64_t> heap_;  // once the operands outgrow inline_
  size_t n_ = 0;
};
// Records an op span from `t0_ns` to now on the calling thread's host track,
// with `io`, `device` (for the memory counter; may be null) and the source
// location when known (file null or "").
void record_op(const char* cat, const std::string& op, int64_t t0_ns, const IoArgs& io, Device* device,
               const char* file, int32_t line);
// The same from tensors.
void record_op(const char* cat, const std::string& op, int64_t t0_ns, const Tensor* const* inputs, int num_inputs,
               const Tensor* outputs, int num_outputs, Device* device, const char* file, int32_t line);
// A collective call from `t0_ns` to now: its op, bytes moved per rank, and the
// communicator (`group`: id, backend and size; `rank`).
void record_collective(const std::string& op, int64_t t0_ns, uint64_t bytes, const std::string& group, int32_t rank);

// ---- report (profiler_report.cpp) ----
// Writes the session as Chrome trace-event JSON to `path` (Perfetto and
// chrome://tracing open it). Fails (kIo) naming the path.
void write_trace(const std::string& path);
// The op summary: per op name, calls, self and total host time, % of all
// ops' self time; then device spans per name. Sorted by self time.
std::string summary();

// Escapes `s` for a JSON string (without the quotes).
std::string json_escape(const std::string& s);

}  // namespace spora::profiler
