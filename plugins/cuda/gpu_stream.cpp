// Streams (non-blocking runtime streams) and events (with timing).
#include <new>
#include <string>

#include "error.h"
#include "gpu_alloc.h"
#include "gpu_api.h"
#include "gpu_state.h"
#include "gpu_trace.h"

namespace spora::gpu {
namespace {

using spora::plugin::guard;

spora_plugin_error_t* check(const std::string& what, cudaError_t e) {
  return e == cudaSuccess ? nullptr : runtime_error(what, e);
}

struct Callback {
  spora_host_callback_fn fn;
  void* user_data;
};

// Runs on the runtime's callback thread once the stream reaches it.
#if defined(SPORA_GPU_HIP)
// HIP 5.2 exports no hipLaunchHostFunc; hipStreamAddCallback passes the
// stream's status, which becomes the callback's status.
void run_callback(hipStream_t, hipError_t status, void* data) {
  auto* cb = static_cast<Callback*>(data);
  spora_plugin_error_t* err = status == hipSuccess ? nullptr : runtime_error("stream work before the callback", status);
  cb->fn(cb->user_data, err);
  if (err) err->destroy(err);
  delete cb;
}
cudaError_t enqueue_callback(cudaStream_t stream, Callback* cb) { return hipStreamAddCallback(stream, run_callback, cb, 0); }
#else
// The runtime skips host functions queued behind a failed kernel (the
// error is sticky and reported by stream_synchronize), so the status passed
// is NULL.
void run_callback(void* data) {
  auto* cb = static_cast<Callback*>(data);
  cb->fn(cb->user_data, nullptr);
  delete cb;
}
cudaError_t enqueue_callback(cudaStream_t stream, Callback* cb) { return cudaLaunchHostFunc(stream, run_callback, cb); }
#endif

}  // namespace

spora_plugin_error_t* stream_create(int32_t device, spora_stream_t** out) {
  return guard(kPluginName, [&]() -> spora_plugin_error_t* {
    if (!out) return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, "stream_create: out is NULL");
    State* state = nullptr;
    if (auto* err = get_state(&state)) return err;
    if (auto* err = use_device("stream_create", device)) return err;
    auto s = std::make_shared<Stream>();
    s->device = device;
    if (auto* err = check("stream_create", cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking))) return err;
    // The profiler's device track of this stream: "cuda0-s3".
    static std::atomic<uint32_t> next_number{1};
    s->trace = std::make_shared<StreamTrace>(g_host.load(std::memory_order_acquire), device,
                                             std::string(kPluginName) + std::to_string(device) + "-s" +
                                                 std::to_string(next_number.fetch_add(1, std::memory_order_relaxed)));
    // The allocator orders blocks across the device's streams (gpu_alloc.h).
    if (auto* err = alloc::stream_added(device, s->stream)) {
      (void)cudaStreamDestroy(s->stream);
      return err;
    }
    *out = static_cast<spora_stream_t*>(state->streams.add(std::move(s)));
    return nullptr;
  });
}

spora_plugin_error_t* stream_destroy(spora_stream_t* stream) {
  return guard(kPluginName, [&]() -> spora_plugin_error_t* {
    State* state = nullptr;
    if (auto* err = get_state(&state)) return err;
    auto s = state->streams.remove(stream);
    if (!s) return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, "stream_destroy: unknown or destroyed stream");
    (void)cudaSetDevice(s->device);  // a failure shows in the calls below
    const cudaError_t sync = cudaStreamSynchronize(s->stream);
    alloc::stream_removed(s->device, s->stream);
    const cudaError_t destroy = cudaStreamDestroy(s->stream);
    if (sync != cudaSuccess) return runtime_error("stream_destroy: pending work failed", sync);
    return check("stream_destroy", destroy);
  });
}

spora_plugin_error_t* stream_synchronize(spora_stream_t* stream) {
  return guard(kPluginName, [&]() -> spora_plugin_error_t* {
    std::shared_ptr<Stream> s;
    if (auto* err = get_stream("stream_synchronize", stream, &s)) return err;
    return check("stream_synchronize", cudaStreamSynchronize(s->stream));
  });
}

spora_plugin_error_t* stream_query(spora_stream_t* stream, int32_t* out_done) {
  return guard(kPluginName, [&]() -> spora_plugin_error_t* {
    if (!out_done) return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, "stream_query: out_done is NULL");
    std::shared_ptr<Stream> s;
    if (auto* err = get_stream("stream_query", stream, &s)) return err;
    const cudaError_t e = cudaStreamQuery(s->stream);
    if (e == cudaErrorNotReady) {
      *out_done = 0;
      return nullptr;
    }
    *out_done = 1;
    return check("stream_query", e);
  });
}

spora_plugin_error_t* stream_wait_event(spora_stream_t* stream, spora_event_t* event) {
  return guard(kPluginName, [&]() -> spora_plugin_error_t* {
    std::shared_ptr<Stream> s;
    std::shared_ptr<Event> ev;
    if (auto* err = get_event("stream_wait_event", event, &ev)) return err;
    if (auto* err = get_stream("stream_wait_event", stream, &s)) return err;
    return check("stream_wait_event", cudaStreamWaitEvent(s->stream, ev->event, 0));
  });
}

spora_plugin_error_t* stream_add_callback(spora_stream_t* stream, spora_host_callback_fn fn, void* user_data) {
  return guard(kPluginName, [&]() -> spora_plugin_error_t* {
    if (!fn) return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, "stream_add_callback: fn is NULL");
    std::shared_ptr<Stream> s;
    if (auto* err = get_stream("stream_add_callback", stream, &s)) return err;
    auto* cb = new Callback{fn, user_data};
    if (cudaError_t e = enqueue_callback(s->stream, cb); e != cudaSuccess) {
      delete cb;
      return runtime_error("stream_add_callback", e);
    }
    return nullptr;
  });
}

spora_plugin_error_t* stream_native_handle(spora_stream_t* stream, void** out) {
  return guard(kPluginName, [&]() -> spora_plugin_error_t* {
    if (!out) return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, "stream_native_handle: out is NULL");
    std::shared_ptr<Stream> s;
    if (auto* err = get_stream("stream_native_handle", stream, &s)) return err;
    *out = static_cast<void*>(s->stream);
    return nullptr;
  });
}

spora_plugin_error_t* event_create(int32_t device, spora_event_t** out) {
  return guard(kPluginName, [&]() -> spora_plugin_error_t* {
    if (!out) return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, "event_create: out is NULL");
    State* state = nullptr;
    if (auto* err = get_state(&state)) return err;
    if (auto* err = use_device("event_create", device)) return err;
    auto ev = std::make_shared<Event>();
    ev->device = device;
    if (auto* err = check("event_create", cudaEventCreate(&ev->event))) return err;
    *out = static_cast<spora_event_t*>(state->events.add(std::move(ev)));
    return nullptr;
  });
}

spora_plugin_error_t* event_destroy(spora_event_t* event) {
  return guard(kPluginName, [&]() -> spora_plugin_error_t* {
    State* state = nullptr;
    if (auto* err = get_state(&state)) return err;
    auto ev = state->events.remove(event);
    if (!ev) return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, "event_destroy: unknown or destroyed event");
    (void)cudaSetDevice(ev->device);  // a failure shows in the call below
    return check("event_destroy", cudaEventDestroy(ev->event));
  });
}

spora_plugin_error_t* event_record(spora_event_t* event, spora_stream_t* stream) {
  return guard(kPluginName, [&]() -> spora_plugin_error_t* {
    std::shared_ptr<Stream> s;
    std::shared_ptr<Event> ev;
    if (auto* err = get_event("event_record", event, &ev)) return err;
    if (auto* err = get_stream("event_record", stream, &s)) return err;
    if (ev->device != s->device)
      return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, "event_record: event of device " + std::to_string(ev->device) +
                                                             " recorded on a stream of device " + std::to_string(s->device));
    return check("event_record", cudaEventRecord(ev->event, s->stream));
  });
}

spora_plugin_error_t* event_query(spora_event_t* event, int32_t* out_done) {
  return guard(kPluginName, [&]() -> spora_plugin_error_t* {
    if (!out_done) return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, "event_query: out_done is NULL");
    std::shared_ptr<Event> ev;
    if (auto* err = get_event("event_query", event, &ev)) return err;
    const cudaError_t e = cudaEventQuery(ev->event);  // never recorded: cudaSuccess
    if (e == cudaErrorNotReady) {
      *out_done = 0;
      return nullptr;
    }
    *out_done = 1;
    return check("event_query", e);
  });
}

spora_plugin_error_t* event_synchronize(spora_event_t* event) {
  return guard(kPluginName, [&]() -> spora_plugin_error_t* {
    std::shared_ptr<Event> ev;
    if (auto* err = get_event("event_synchronize", event, &ev)) return err;
    return check("event_synchronize", cudaEventSynchronize(ev->event));
  });
}

spora_plugin_error_t* event_elapsed_ms(spora_event_t* start, spora_event_t* end, double* out_ms) {
  return guard(kPluginName, [&]() -> spora_plugin_error_t* {
    if (!out_ms) return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, "event_elapsed_ms: out_ms is NULL");
    std::shared_ptr<Event> a, b;
    if (auto* err = get_event("event_elapsed_ms", start, &a)) return err;
    if (auto* err = get_event("event_elapsed_ms", end, &b)) return err;
    if (a->device != b->device)
      return plugin_error(SPORA_PLUGIN_INVALID_ARGUMENT, "event_elapsed_ms: events of different devices");
    float ms = 0;
    if (auto* err = check("event_elapsed_ms", cudaEventElapsedTime(&ms, a->event, b->event))) return err;
    *out_ms = ms;
    return nullptr;
  });
}

}  // namespace spora::gpu
