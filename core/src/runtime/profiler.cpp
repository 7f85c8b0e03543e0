// The profiler's session: what it records, thread ids, the plugin trace hooks
// and user ranges (profiler.h).
#include "runtime/profiler.h"
#include "runtime/profiler_session.h"

#include <pthread.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>

#include "support/error.h"

namespace spora::profiler {

namespace detail {
std::atomic<bool> active{false};
thread_local int tl_open_ops = 0;

Session& session() {
  static auto* s = new Session;  // never destroyed: plugin threads may record during exit
  return *s;
}
}  // namespace detail

using detail::Args;
using detail::kEmpty;
using detail::kFlow;
using detail::kLaunch;
using detail::kMaxEvents;
using detail::kMaxOpen;
using detail::Open;
using detail::Rec;
using detail::Session;
using detail::session;

namespace {


std::atomic<uint32_t> g_next_tid{1};
// Ids of hook spans and ranges; the top bit tells them from the trace-log
// spans host_services hands out when no session runs.
std::atomic<uint64_t> g_next_span{1};
constexpr uint64_t kSpanBit = uint64_t{1} << 63;

// A hand-off ended on this thread, waiting for the span it leads to.
struct Pending {
  uint64_t flow = 0;
  int64_t queued_ns = 0;
};
thread_local Pending tl_pending;
thread_local uint64_t tl_named_generation = 0;  // the session this thread's name went into

std::string thread_name() {
  char buf[32] = {};
  if (pthread_getname_np(pthread_self(), buf, sizeof buf) != 0 || !buf[0]) return "thread";
  return buf;
}

// Appends under s.mu (false past the cap), registering the calling thread's
// name with its first event of the session.
bool push(Session& s, const Rec& r) {
  if (s.events.size() >= kMaxEvents) {
    ++s.dropped;
    return false;
  }
  if (tl_named_generation != s.generation && r.tid == this_thread_id()) {
    s.threads.emplace(r.tid, thread_name());
    tl_named_generation = s.generation;
  }
  s.events.push_back(r);
  return true;
}

Rec flow_rec(char ph, Track track, uint32_t tid, int64_t ts, uint64_t flow) {
  Rec r;
  r.ph = ph;
  r.track = track;
  r.tid = tid;
  r.ts = ts;
  r.flow = flow;
  r.name = kLaunch;
  r.cat = kFlow;
  return r;
}

// "sim.kernel" -> "kernel".
std::string_view kind_of(std::string_view cat) {
  const size_t dot = cat.rfind('.');
  return dot == std::string_view::npos ? cat : cat.substr(dot + 1);
}

}  // namespace

void IoArgs::add(bool output, int32_t dtype, const int64_t* dims, int32_t rank) {
  const size_t need = n_ + 1 + static_cast<size_t>(rank > 0 ? rank : 0);
  if (need > kInline && heap_.empty()) heap_.assign(inline_, inline_ + n_);
  int64_t* w;
  if (!heap_.empty() || need > kInline) {
    heap_.resize(need);
    w = heap_.data();
  } else {
    w = inline_;
  }
  w[n_++] = (output ? 1 : 0) | (static_cast<int64_t>(dtype & 0x7fff) << 1) |
            (static_cast<int64_t>(rank > 0 ? rank & 0xffff : 0) << 16);
  for (int32_t i = 0; i < rank; ++i) w[n_++] = dims[i];
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint32_t this_thread_id() {
  thread_local uint32_t id = g_next_tid.fetch_add(1, std::memory_order_relaxed);
  return id;
}

void start() {
  Session& s = session();
  std::lock_guard<std::mutex> lock(s.mu);
  if (detail::active.load()) fail(Code::kInvalidArgument, "[profiler] a session already runs; stop it first");
  s.events.clear();
  s.words.clear();
  s.texts.clear();
  s.strings.clear();
  s.open.clear();
  s.threads.clear();
  s.dropped = 0;
  s.strings.id("");
  s.strings.id("launch");
  s.strings.id("flow");
  ++s.generation;
  s.start_ns = now_ns();
  detail::active.store(true);
}

void stop() {
  Session& s = session();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!detail::active.load()) fail(Code::kInvalidArgument, "[profiler] no session runs; start one first");
  detail::active.store(false);
  s.open.clear();
}

bool running() { return on(); }

void record_span(Track track, const char* cat, std::string name, int64_t t0_ns, int64_t t1_ns, std::string args) {
  if (!on()) return;
  Rec r;
  r.track = track;
  r.tid = this_thread_id();
  r.dur = t1_ns - t0_ns;
  Session& s = session();
  std::lock_guard<std::mutex> lock(s.mu);
  r.ts = t0_ns - s.start_ns;
  r.name = s.strings.id(name);
  r.cat = cat ? s.strings.id(cat) : kEmpty;
  if (!args.empty()) {
    r.args = Args::kText;
    r.arg = s.texts.size();
  }
  if (push(s, r) && !args.empty()) s.texts.push_back(std::move(args));
}

void record_memory(const std::string& device, int64_t ts_ns, int64_t allocated, int64_t reserved) {
  if (!on()) return;
  Rec r;
  r.ph = 'C';
  r.tid = this_thread_id();
  r.args = Args::kMemory;
  Session& s = session();
  std::lock_guard<std::mutex> lock(s.mu);
  r.ts = ts_ns - s.start_ns;
  r.name = s.strings.id("memory " + device);
  r.cat = s.strings.id("memory");
  r.arg = s.words.size();
  if (!push(s, r)) return;
  s.words.push_back(allocated);
  s.words.push_back(reserved);
}

void record_op_span(const char* cat, const std::string& op, int64_t t0_ns, int64_t t1_ns, const IoArgs& io,
                    const std::string* device, const char* file, int32_t line) {
  if (!on()) return;
  Rec r;
  r.tid = this_thread_id();
  r.dur = t1_ns - t0_ns;
  r.args = Args::kOp;
  Session& s = session();
  std::lock_guard<std::mutex> lock(s.mu);
  r.ts = t0_ns - s.start_ns;
  r.name = s.strings.id(op);
  r.cat = cat ? s.strings.id(cat) : kEmpty;
  r.arg = s.words.size();
  if (!push(s, r)) return;
  s.words.push_back(device ? int64_t{s.strings.id(*device)} + 1 : 0);
  s.words.push_back(file && *file ? int64_t{s.strings.id(file)} + 1 : 0);
  s.words.push_back(line);
  s.words.push_back(static_cast<int64_t>(io.size()));
  const int64_t* w = io.words();
  for (size_t i = 0; i < io.size(); ++i) s.words.push_back(w[i]);
}

namespace {

uint64_t open_span(Track track, const char* category, const char* name) {
  if (!on()) return 0;
  const int64_t t = now_ns();
  const uint64_t id = g_next_span.fetch_add(1, std::memory_order_relaxed) | kSpanBit;
  const uint32_t tid = this_thread_id();
  Session& s = session();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!detail::active.load(std::memory_order_relaxed)) return 0;
  Open o{id, track, tid, t, s.strings.id(category ? category : ""), s.strings.id(name ? name : "")};
  if (track == Track::kDevice && tl_pending.flow) {
    // The work a hand-off led to starts here: the arrow ends on this span.
    push(s, flow_rec('f', Track::kDevice, tid, t - s.start_ns, tl_pending.flow));
    o.queued_ns = tl_pending.queued_ns;
    tl_pending = {};
  }
  // A plugin that never ends its spans must not grow this without bound.
  if (s.open.size() >= kMaxOpen) s.open.erase(s.open.begin());
  s.open.push_back(o);
  return id;
}

void close_span(uint64_t id, Track want) {
  if (!(id & kSpanBit)) return;
  const int64_t t = now_ns();
  const uint32_t tid = this_thread_id();
  Session& s = session();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.open.end();
  while (it != s.open.begin() && (it - 1)->id != id) --it;
  if (it == s.open.begin() || (it - 1)->track != want) return;
  const Open o = *(it - 1);
  s.open.erase(it - 1);
  if (!detail::active.load(std::memory_order_relaxed)) return;
  if (o.tid != tid && o.track == Track::kDevice) {
    // A hand-off: the arrow starts inside the host span that queued it.
    push(s, flow_rec('s', Track::kHost, o.tid, o.ts - s.start_ns, id & ~kSpanBit));
    tl_pending = {id & ~kSpanBit, t - o.ts};
    return;
  }
  Rec r;
  r.track = o.track;
  r.tid = o.tid;
  r.ts = o.ts - s.start_ns;
  r.dur = t - o.ts;
  r.name = o.name;
  r.cat = o.cat;
  if (o.queued_ns >= 0) {
    r.args = Args::kQueued;
    r.arg = static_cast<uint64_t>(o.queued_ns);
  }
  if (o.track == Track::kDevice && o.queued_ns < 0 && detail::tl_open_ops > 0 &&
      kind_of(s.strings.str(o.cat)) == "kernel") {
    // Inline work (the cpu plugin): the arrow joins the caller's op span
    // and the kernel span, both on this thread.
    const uint64_t flow = id & ~kSpanBit;
    push(s, flow_rec('s', Track::kHost, tid, r.ts, flow));
    push(s, flow_rec('f', Track::kDevice, tid, r.ts, flow));
  }
  push(s, r);
}

}  // namespace

uint64_t hook_begin(const char* category, const char* name) { return open_span(Track::kDevice, category, name); }
void hook_end(uint64_t id) { close_span(id, Track::kDevice); }

uint64_t range_begin(const char* category, const char* name) { return open_span(Track::kHost, category, name); }
void range_end(uint64_t id) { close_span(id, Track::kHost); }

}  // namespace spora::profiler
