// The profiler's outputs: Chrome trace-event JSON and the op summary table
// (profiler.h).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>

#include "ir/dtype.h"
#include "runtime/profiler.h"
#include "runtime/profiler_session.h"
#include "support/error.h"

namespace spora::profiler {

std::string json_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

namespace {

using detail::Args;
using detail::Rec;
using detail::Session;

// "f32[128,784]" for each operand of an op's words, as two JSON lists.
std::string io_json(const Session& s, size_t at, size_t n) {
  std::string in, out;
  for (size_t end = at + n; at < end;) {
    const int64_t head = s.words[at++];
    std::string& list = (head & 1) ? out : in;
    list += list.empty() ? "\"" : ",\"";
    list += dtype_name(static_cast<DType>((head >> 1) & 0x7fff));
    list += '[';
    const int64_t rank = (head >> 16) & 0xffff;
    for (int64_t i = 0; i < rank && at < end; ++i) {
      if (i) list += ',';
      list += std::to_string(s.words[at++]);
    }
    list += "]\"";
  }
  return "\"inputs\":[" + in + "],\"outputs\":[" + out + ']';
}

std::string args_json(const Session& s, const Rec& r) {
  switch (r.args) {
    case Args::kNone: return {};
    case Args::kText: return s.texts[r.arg];
    case Args::kQueued: return "\"queued_us\":" + std::to_string(static_cast<double>(r.arg) / 1000.0);
    case Args::kMemory:
      return "\"allocated\":" + std::to_string(s.words[r.arg]) + ",\"reserved\":" + std::to_string(s.words[r.arg + 1]);
    case Args::kOp: {
      const int64_t device = s.words[r.arg], file = s.words[r.arg + 1], line = s.words[r.arg + 2];
      const size_t n = static_cast<size_t>(s.words[r.arg + 3]);
      std::string out = io_json(s, r.arg + 4, n);
      if (device) out += ",\"device\":\"" + json_escape(s.strings.str(static_cast<uint32_t>(device - 1))) + '"';
      if (file)
        out += ",\"source\":\"" +
               json_escape(s.strings.str(static_cast<uint32_t>(file - 1)) + ':' + std::to_string(line)) + '"';
      return out;
    }
  }
  return {};
}

// Trace-event timestamps are microseconds; ns precision kept as decimals.
std::string us(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(ns) / 1000.0);
  return buf;
}

int pid_of(Track t) { return t == Track::kHost ? 1 : 2; }

void write_event(std::ostream& o, const Event& e) {
  o << "{\"ph\":\"" << e.ph << "\",\"pid\":" << pid_of(e.track) << ",\"tid\":" << e.tid << ",\"ts\":" << us(e.ts)
    << ",\"name\":\"" << json_escape(e.name) << '"';
  if (!e.cat.empty()) o << ",\"cat\":\"" << json_escape(e.cat) << '"';
  switch (e.ph) {
    case 'X': o << ",\"dur\":" << us(e.dur); break;
    case 's': o << ",\"id\":" << e.flow; break;
    case 'f': o << ",\"id\":" << e.flow << ",\"bp\":\"e\""; break;  // binds to the span starting there
    default: break;
  }
  if (!e.args.empty()) o << ",\"args\":{" << e.args << '}';
  o << '}';
}

void write_meta(std::ostream& o, const char* what, int pid, uint32_t tid, const std::string& name) {
  o << "{\"ph\":\"M\",\"pid\":" << pid << ",\"tid\":" << tid << ",\"name\":\"" << what
    << "\",\"args\":{\"name\":\"" << json_escape(name) << "\"}}";
}

// Host spans with the time their children (spans nested inside them on the
// same thread) took.
struct Timed {
  const Event* e;
  int64_t child = 0;
};

std::vector<Timed> with_children(const std::vector<Event>& events) {
  std::vector<Timed> spans;
  for (const Event& e : events)
    if (e.ph == 'X' && e.track == Track::kHost) spans.push_back({&e});
  std::sort(spans.begin(), spans.end(), [](const Timed& a, const Timed& b) {
    if (a.e->tid != b.e->tid) return a.e->tid < b.e->tid;
    if (a.e->ts != b.e->ts) return a.e->ts < b.e->ts;
    return a.e->dur > b.e->dur;  // the enclosing span first
  });
  std::vector<Timed*> stack;
  uint32_t tid = 0;
  for (Timed& t : spans) {
    if (t.e->tid != tid) {
      stack.clear();
      tid = t.e->tid;
    }
    while (!stack.empty() && stack.back()->e->ts + stack.back()->e->dur <= t.e->ts) stack.pop_back();
    if (!stack.empty()) stack.back()->child += t.e->dur;
    stack.push_back(&t);
  }
  return spans;
}

struct Row {
  int64_t calls = 0, self = 0, total = 0;
};

std::string table(const std::map<std::string, Row>& rows, bool with_self) {
  std::vector<std::pair<std::string, Row>> sorted(rows.begin(), rows.end());
  std::sort(sorted.begin(), sorted.end(), [&](const auto& a, const auto& b) {
    const int64_t ka = with_self ? a.second.self : a.second.total, kb = with_self ? b.second.self : b.second.total;
    return ka != kb ? ka > kb : a.first < b.first;
  });
  int64_t all = 0;
  size_t width = 4;
  for (const auto& [name, r] : sorted) {
    all += with_self ? r.self : r.total;
    width = std::max(width, name.size());
  }
  std::string out;
  char buf[256];
  if (with_self)
    std::snprintf(buf, sizeof buf, "%-*s %8s %12s %7s %12s %10s\n", static_cast<int>(width), "Name", "Calls",
                  "Self (ms)", "Self %", "Total (ms)", "Avg (us)");
  else
    std::snprintf(buf, sizeof buf, "%-*s %8s %12s %7s %10s\n", static_cast<int>(width), "Name", "Calls", "Total (ms)",
                  "%", "Avg (us)");
  out += buf;
  for (const auto& [name, r] : sorted) {
    const int64_t part = with_self ? r.self : r.total;
    const double pct = all > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(all) : 0;
    const double avg = static_cast<double>(r.total) / 1000.0 / static_cast<double>(r.calls);
    if (with_self)
      std::snprintf(buf, sizeof buf, "%-*s %8lld %12.3f %6.1f%% %12.3f %10.1f\n", static_cast<int>(width),
                    name.c_str(), static_cast<long long>(r.calls), static_cast<double>(r.self) / 1e6, pct,
                    static_cast<double>(r.total) / 1e6, avg);
    else
      std::snprintf(buf, sizeof buf, "%-*s %8lld %12.3f %6.1f%% %10.1f\n", static_cast<int>(width), name.c_str(),
                    static_cast<long long>(r.calls), static_cast<double>(r.total) / 1e6, pct, avg);
    out += buf;
  }
  return out;
}

bool is_op(const std::string& cat) { return cat == "op" || cat == "node"; }

}  // namespace

Snapshot snapshot() {
  Session& s = detail::session();
  std::lock_guard<std::mutex> lock(s.mu);
  Snapshot out;
  out.start_ns = s.start_ns;
  out.events.reserve(s.events.size());
  for (size_t i = 0; i < s.events.size(); ++i) {
    const Rec& r = s.events[i];
    Event e;
    e.ph = r.ph;
    e.track = r.track;
    e.tid = r.tid;
    e.ts = r.ts;
    e.dur = r.dur;
    e.flow = r.flow;
    e.name = s.strings.str(r.name);
    e.cat = s.strings.str(r.cat);
    e.args = args_json(s, r);
    out.events.push_back(std::move(e));
  }
  out.dropped = s.dropped;
  for (const auto& [tid, name] : s.threads) out.threads.emplace_back(tid, name);
  return out;
}

void write_trace(const std::string& path) {
  const Snapshot s = snapshot();
  std::ofstream o(path, std::ios::binary | std::ios::trunc);
  if (!o) fail(Code::kIo, "[profiler] cannot write the trace to '{}': {}", path, std::strerror(errno));
  o << "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"spora\",\"pid\":" << ::getpid()
    << ",\"dropped_events\":" << s.dropped << "},\"traceEvents\":[\n";
  write_meta(o, "process_name", 1, 0, "host");
  o << ",\n";
  write_meta(o, "process_name", 2, 0, "devices (plugin trace hooks)");
  // Name every track used: host threads by their OS name, device tracks by
  // plugin and thread (a sim stream's worker is named after its stream).
  std::map<uint32_t, std::string> names(s.threads.begin(), s.threads.end());
  std::map<std::pair<int, uint32_t>, std::string> tracks;
  for (const Event& e : s.events) {
    const auto key = std::make_pair(pid_of(e.track), e.tid);
    if (tracks.count(key)) continue;
    const auto n = names.find(e.tid);
    const std::string thread = n != names.end() ? n->second : "thread " + std::to_string(e.tid);
    if (e.track == Track::kHost) {
      tracks[key] = thread;
    } else if (e.ph == 'X') {
      const size_t dot = e.cat.find('.');
      tracks[key] = (dot == std::string::npos ? e.cat : e.cat.substr(0, dot)) + ": " + thread;
    }
  }
  for (const auto& [key, name] : tracks) {
    o << ",\n";
    write_meta(o, "thread_name", key.first, key.second, name);
  }
  for (const Event& e : s.events) {
    o << ",\n";
    write_event(o, e);
  }
  o << "\n]}\n";
  o.flush();
  if (!o) fail(Code::kIo, "[profiler] writing the trace to '{}' failed: {}", path, std::strerror(errno));
}

std::string summary() {
  const Snapshot s = snapshot();
  std::map<std::string, Row> ops, device;
  int64_t op_calls = 0;
  for (const Timed& t : with_children(s.events)) {
    if (!is_op(t.e->cat)) continue;
    Row& r = ops[t.e->name];
    ++r.calls;
    ++op_calls;
    r.total += t.e->dur;
    r.self += std::max<int64_t>(0, t.e->dur - t.child);
  }
  for (const Event& e : s.events)
    if (e.ph == 'X' && e.track == Track::kDevice) {
      Row& r = device[e.name];
      ++r.calls;
      r.total += e.dur;
    }
  std::string out = "Host ops (" + std::to_string(op_calls) + " calls)\n";
  out += ops.empty() ? "(none recorded)\n" : table(ops, true);
  if (!device.empty()) out += "\nDevice work reported by plugins\n" + table(device, false);
  if (s.dropped) out += "\n(" + std::to_string(s.dropped) + " events past the session's cap were not kept)\n";
  return out;
}

}  // namespace spora::profiler
