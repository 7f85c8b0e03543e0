// The profiler's session: what it records, thread ids, the plugin trace hooks
// and user ranges (profiler.h).
#include "runtime/profiler.h"

#include <pthread.h>

#include <chrono>
#include <deque>
#include <mutex>
#include <unordered_map>

#include "support/error.h"

namespace spora::profiler {

namespace detail {
std::atomic<bool> active{false};
thread_local int tl_open_ops = 0;
}  // namespace detail

namespace {

// A long session keeps at most this many events (~100 bytes each); later
// ones are counted, not kept, so a forgotten profiler cannot eat the host.
constexpr size_t kMaxEvents = size_t{8} << 20;

// An open span of a hook or a user range.
struct Open {
  Track track;
  uint32_t tid;
  int64_t ts;
  std::string cat, name;
  int64_t queued_ns = -1;  // >= 0: the span a hand-off led to, queued this long
};

struct Session {
  std::mutex mu;
  int64_t start_ns = 0;
  std::deque<Event> events;  // a deque: growing never moves what was recorded
  uint64_t dropped = 0;
  std::unordered_map<uint64_t, Open> open;
  std::unordered_map<uint32_t, std::string> threads;  // tids seen this session
};

Session& session() {
  static auto* s = new Session;  // never destroyed: plugin threads may record during exit
  return *s;
}

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

std::string thread_name() {
  char buf[32] = {};
  if (pthread_getname_np(pthread_self(), buf, sizeof buf) != 0 || !buf[0]) return "thread";
  return buf;
}

// Appends under s.mu, registering the thread's name on its first event.
void push(Session& s, Event e) {
  if (s.events.size() >= kMaxEvents) {
    ++s.dropped;
    return;
  }
  if (!s.threads.count(e.tid) && e.tid == this_thread_id()) s.threads[e.tid] = thread_name();
  s.events.push_back(std::move(e));
}

// "sim.kernel" -> "kernel".
std::string kind_of(const std::string& cat) {
  const size_t dot = cat.rfind('.');
  return dot == std::string::npos ? cat : cat.substr(dot + 1);
}

}  // namespace

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
  std::deque<Event>().swap(s.events);
  s.open.clear();
  s.threads.clear();
  s.dropped = 0;
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

Snapshot snapshot() {
  Session& s = session();
  std::lock_guard<std::mutex> lock(s.mu);
  Snapshot out;
  out.start_ns = s.start_ns;
  out.events.assign(s.events.begin(), s.events.end());
  out.dropped = s.dropped;
  for (const auto& [tid, name] : s.threads) out.threads.emplace_back(tid, name);
  return out;
}

void record_span(Track track, const char* cat, std::string name, int64_t t0_ns, int64_t t1_ns, std::string args) {
  if (!on()) return;
  Event e;
  e.track = track;
  e.tid = this_thread_id();
  e.ts = t0_ns;
  e.dur = t1_ns - t0_ns;
  e.cat = cat ? cat : "";
  e.name = std::move(name);
  e.args = std::move(args);
  Session& s = session();
  std::lock_guard<std::mutex> lock(s.mu);
  e.ts -= s.start_ns;
  push(s, std::move(e));
}

void record_counter(std::string name, int64_t ts_ns, std::string args) {
  if (!on()) return;
  Event e;
  e.ph = 'C';
  e.tid = this_thread_id();
  e.ts = ts_ns;
  e.name = std::move(name);
  e.cat = "memory";
  e.args = std::move(args);
  Session& s = session();
  std::lock_guard<std::mutex> lock(s.mu);
  e.ts -= s.start_ns;
  push(s, std::move(e));
}

namespace {

uint64_t open_span(Track track, const char* category, const char* name) {
  if (!on()) return 0;
  const int64_t t = now_ns();
  const uint64_t id = g_next_span.fetch_add(1, std::memory_order_relaxed) | kSpanBit;
  Open o{track, this_thread_id(), t, category ? category : "", name ? name : ""};
  Session& s = session();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!detail::active.load(std::memory_order_relaxed)) return 0;
  if (track == Track::kDevice && tl_pending.flow) {
    // The work a hand-off led to starts here: the arrow ends on this span.
    Event f;
    f.ph = 'f';
    f.track = Track::kDevice;
    f.tid = o.tid;
    f.ts = t - s.start_ns;
    f.flow = tl_pending.flow;
    f.name = "launch";
    f.cat = "flow";
    push(s, std::move(f));
    o.queued_ns = tl_pending.queued_ns;
    tl_pending = {};
  }
  s.open.emplace(id, std::move(o));
  return id;
}

void close_span(uint64_t id, Track want) {
  if (!(id & kSpanBit)) return;
  const int64_t t = now_ns();
  const uint32_t tid = this_thread_id();
  Session& s = session();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.open.find(id);
  if (it == s.open.end() || it->second.track != want) return;
  Open o = std::move(it->second);
  s.open.erase(it);
  if (!detail::active.load(std::memory_order_relaxed)) return;
  std::string args;
  if (o.queued_ns >= 0) args = "\"queued_us\":" + std::to_string(static_cast<double>(o.queued_ns) / 1000.0);
  if (o.tid != tid && o.track == Track::kDevice) {
    // A hand-off: the arrow starts inside the host span that queued it.
    Event st;
    st.ph = 's';
    st.track = Track::kHost;
    st.tid = o.tid;
    st.ts = o.ts - s.start_ns;
    st.flow = id & ~kSpanBit;
    st.name = "launch";
    st.cat = "flow";
    push(s, std::move(st));
    tl_pending = {id & ~kSpanBit, t - o.ts};
    return;
  }
  Event e;
  e.track = o.track;
  e.tid = o.tid;
  e.ts = o.ts - s.start_ns;
  e.dur = t - o.ts;
  e.name = std::move(o.name);
  e.args = std::move(args);
  if (o.track == Track::kDevice && o.queued_ns < 0 && detail::tl_open_ops > 0 && kind_of(o.cat) == "kernel") {
    // Inline work (the cpu plugin): the arrow joins the caller's op span
    // and the kernel span, both on this thread.
    const uint64_t flow = id & ~kSpanBit;
    Event st;
    st.ph = 's';
    st.track = Track::kHost;
    st.tid = tid;
    st.ts = e.ts;
    st.flow = flow;
    st.name = "launch";
    st.cat = "flow";
    Event f = st;
    f.ph = 'f';
    f.track = Track::kDevice;
    push(s, std::move(st));
    push(s, std::move(f));
  }
  e.cat = std::move(o.cat);
  push(s, std::move(e));
}

}  // namespace

uint64_t hook_begin(const char* category, const char* name) { return open_span(Track::kDevice, category, name); }
void hook_end(uint64_t id) { close_span(id, Track::kDevice); }

uint64_t range_begin(const char* category, const char* name) { return open_span(Track::kHost, category, name); }
void range_end(uint64_t id) { close_span(id, Track::kHost); }

}  // namespace spora::profiler
