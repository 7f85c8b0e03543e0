// The profiler session's storage, shared by the recording side
// (profiler.cpp, also linked into the plugin probe) and the reading side
// (profiler_report.cpp: snapshot, trace, summary). Private to the core.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/profiler.h"

namespace spora::profiler::detail {

// A long session keeps at most this many events (~50 bytes each, plus an
// op's shapes); later ones are counted, not kept, so a forgotten profiler
// cannot eat the host.
constexpr size_t kMaxEvents = size_t{8} << 20;
// Spans begun and never ended (a plugin's bug) past this many are forgotten,
// oldest first.
constexpr size_t kMaxOpen = 4096;
// Interned at every start(), so the hot paths name them without a lookup.
constexpr uint32_t kEmpty = 0, kLaunch = 1, kFlow = 2;

// An append-only sequence in fixed chunks: growing never moves or copies
// what was recorded (a vector's doubling would stall a profiled step).
template <typename T, size_t kChunk>
class Chunked {
 public:
  size_t size() const { return size_; }
  void push_back(const T& v) {
    if (size_ == chunks_.size() * kChunk) chunks_.push_back(std::make_unique<T[]>(kChunk));
    chunks_[size_ / kChunk][size_ % kChunk] = v;
    ++size_;
  }
  const T& operator[](size_t i) const { return chunks_[i / kChunk][i % kChunk]; }
  void clear() {
    chunks_.clear();
    size_ = 0;
  }

 private:
  std::vector<std::unique_ptr<T[]>> chunks_;
  size_t size_ = 0;
};

// Strings seen this session, each kept once and named by its index.
class Interner {
 public:
  uint32_t id(std::string_view s) {
    if (strings_.size() * 2 >= table_.size()) grow();
    const size_t mask = table_.size() - 1;
    for (size_t i = std::hash<std::string_view>()(s) & mask;; i = (i + 1) & mask) {
      const uint32_t slot = table_[i];
      if (slot == 0) {
        strings_.emplace_back(s);
        table_[i] = static_cast<uint32_t>(strings_.size());
        return slot_id(table_[i]);
      }
      if (strings_[slot - 1] == s) return slot_id(slot);
    }
  }
  const std::string& str(uint32_t id) const { return strings_[id]; }
  void clear() {
    strings_.clear();
    table_.assign(table_.size(), 0);
  }

 private:
  static uint32_t slot_id(uint32_t slot) { return slot - 1; }
  void grow() {
    std::vector<uint32_t> t(table_.empty() ? 256 : table_.size() * 2, 0);
    const size_t mask = t.size() - 1;
    for (size_t k = 0; k < strings_.size(); ++k) {
      size_t i = std::hash<std::string_view>()(strings_[k]) & mask;
      while (t[i]) i = (i + 1) & mask;
      t[i] = static_cast<uint32_t>(k + 1);
    }
    table_.swap(t);
  }
  std::vector<std::string> strings_;
  std::vector<uint32_t> table_;  // open addressing: index + 1 into strings_, 0 empty
};

// What a record's args are, and where `arg` points.
enum class Args : uint8_t {
  kNone,
  kText,    // arg: index of a JSON members string in Session::texts
  kOp,      // arg: first of the op's words (device, file, line, io size, io)
  kQueued,  // arg: ns a hand-off waited
  kMemory,  // arg: first of two words (allocated, reserved)
};

// One recorded event, fixed-size; snapshot() turns it into an Event.
struct Rec {
  char ph = 'X';
  Track track = Track::kHost;
  Args args = Args::kNone;
  uint32_t tid = 0;
  int64_t ts = 0, dur = 0;
  uint64_t flow = 0;
  uint32_t name = 0, cat = 0;  // interned
  uint64_t arg = 0;
};

// An open span of a hook or a user range.
struct Open {
  uint64_t id;
  Track track;
  uint32_t tid;
  int64_t ts;
  uint32_t cat, name;      // interned
  int64_t queued_ns = -1;  // >= 0: the span a hand-off led to, queued this long
};

struct Session {
  std::mutex mu;
  int64_t start_ns = 0;
  uint64_t generation = 0;  // one per start(): threads register their names once per session
  Chunked<Rec, 4096> events;
  Chunked<int64_t, 16384> words;  // ops' and counters' numbers
  std::vector<std::string> texts;  // free-form args (collectives, dataset, user spans)
  Interner strings;
  uint64_t dropped = 0;
  // Open spans: few at a time (a kernel inside an op, a range, a hand-off in
  // flight), so a vector searched from the newest end beats a map.
  std::vector<Open> open;
  std::unordered_map<uint32_t, std::string> threads;  // tids seen this session
};

// The one session (never destroyed: plugin threads may record during exit).
Session& session();

}  // namespace spora::profiler::detail
