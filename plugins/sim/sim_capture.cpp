// Stream capture (plugin.h, ABI 1.2), as strict as CUDA's graphs: work
// enqueued on a capturing stream is recorded (Stream::enqueue), and a replay
// queues the recorded items again. Beyond what CUDA checks, a replay first
// verifies that every range the recorded work touches is still allocated:
// on a GPU a graph that outlives its buffers reads or writes whatever took
// their place, silently; here the launch fails naming the range.
//
// While a thread captures on a device, its calls that would wait for the
// device or allocate/free (stream_synchronize, event_synchronize,
// synchronous copies and memset, mem_alloc, mem_free) break the capture and
// fail (refuse_in_capture), as cudaStreamCaptureModeThreadLocal does.
#include <algorithm>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "error.h"
#include "sim_api.h"
#include "sim_state.h"

namespace spora::sim {
namespace {

using spora::plugin::guard;
using spora::plugin::make_error;

spora_plugin_error_t* invalid(const std::string& message) {
  return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[sim] " + message);
}

// Which thread captures on which stream.
struct Capturer {
  std::thread::id thread;
  std::shared_ptr<Stream> stream;
};
std::mutex g_capturers_mu;
std::vector<Capturer> g_capturers;

void forget_capturer(const Stream* s) {
  std::lock_guard<std::mutex> lock(g_capturers_mu);
  g_capturers.erase(std::remove_if(g_capturers.begin(), g_capturers.end(),
                                   [&](const Capturer& c) { return c.stream.get() == s; }),
                    g_capturers.end());
}

}  // namespace

// Recorded work of one capture.
struct Captured {
  int32_t device;
  std::vector<Stream::Recorded> work;
};

spora_plugin_error_t* refuse_in_capture(const char* fn, int32_t device) {
  std::vector<std::shared_ptr<Stream>> mine;
  {
    std::lock_guard<std::mutex> lock(g_capturers_mu);
    for (const Capturer& c : g_capturers)
      if (c.thread == std::this_thread::get_id() && c.stream->device() == device) mine.push_back(c.stream);
  }
  spora_plugin_error_t* first = nullptr;
  for (const auto& s : mine) {
    spora_plugin_error_t* err =
        s->refuse_capture(std::string(fn) + " was called by the thread capturing on device " + std::to_string(device));
    if (!first) first = err;
    else if (err) err->destroy(err);
  }
  return first;
}

spora_plugin_error_t* capture_begin(int32_t device, spora_stream_t** out_stream) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    if (!out_stream) return invalid("capture_begin: out_stream is NULL");
    State* state = nullptr;
    std::shared_ptr<Device> d;
    if (auto* err = get_device("capture_begin", device, &d)) return err;
    if (auto* err = d->sticky_error("capture_begin")) return err;
    if (auto* err = get_state(&state)) return err;
    auto s = std::make_shared<Stream>(std::move(d));
    if (auto* err = s->begin_capture()) return err;
    {
      std::lock_guard<std::mutex> lock(g_capturers_mu);
      g_capturers.push_back(Capturer{std::this_thread::get_id(), s});
    }
    *out_stream = static_cast<spora_stream_t*>(state->streams.add(std::move(s)));
    return nullptr;
  });
}

spora_plugin_error_t* capture_end(spora_stream_t* stream, spora_captured_t** out) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    if (out) *out = nullptr;
    State* state = nullptr;
    if (auto* err = get_state(&state)) return err;
    std::shared_ptr<Stream> s;
    if (auto* err = get_stream("capture_end", stream, &s)) return err;
    if (!s->capturing()) return invalid("capture_end: the stream is not a recording stream of capture_begin");
    forget_capturer(s.get());
    state->streams.remove(stream);
    auto captured = std::make_shared<Captured>();
    captured->device = s->device();
    spora_plugin_error_t* err = s->end_capture(&captured->work);
    if (spora_plugin_error_t* closing = s->close()) closing->destroy(closing);  // it ran nothing
    if (err) return err;
    if (!out) return invalid("capture_end: out is NULL (the recorded work is dropped)");
    if (auto* sticky = s->device_state().sticky_error("capture_end")) return sticky;
    *out = static_cast<spora_captured_t*>(state->captured.add(std::move(captured)));
    return nullptr;
  });
}

spora_plugin_error_t* captured_launch(spora_captured_t* handle, spora_stream_t* stream) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    State* state = nullptr;
    if (auto* err = get_state(&state)) return err;
    std::shared_ptr<Captured> c = state->captured.find(handle);
    if (!c) return invalid(std::string("captured_launch: ") + (handle ? "unknown or destroyed graph" : "graph is NULL"));
    std::shared_ptr<Stream> s;
    if (auto* err = get_stream("captured_launch", stream, &s)) return err;
    if (s->device() != c->device) {
      return invalid("captured_launch: the graph was captured on device " + std::to_string(c->device) +
                     " and launched on a stream of device " + std::to_string(s->device()));
    }
    if (auto* err = s->device_state().sticky_error("captured_launch")) return err;
    Arena* arena = nullptr;
    if (auto* err = get_arena("captured_launch", c->device, &arena)) return err;
    for (const Stream::Recorded& r : c->work) {
      for (const Stream::Range& range : r.ranges) {
        void* p = nullptr;
        const std::string what = "captured_launch: recorded " + range.what;
        if (auto* err = arena->translate(range.address, range.size, what.c_str(), &p)) return err;
      }
    }
    for (const Stream::Recorded& r : c->work)
      if (auto* err = s->enqueue(r.task, r.where, false, nullptr, r.ranges)) return err;
    return nullptr;
  });
}

spora_plugin_error_t* captured_destroy(spora_captured_t* handle) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    State* state = nullptr;
    if (auto* err = get_state(&state)) return err;
    // Replays already queued hold copies of the recorded tasks.
    if (!state->captured.remove(handle))
      return invalid(std::string("captured_destroy: ") + (handle ? "unknown or destroyed graph" : "graph is NULL"));
    return nullptr;
  });
}

}  // namespace spora::sim
