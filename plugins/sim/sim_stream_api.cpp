// Table functions for streams and events (the objects are in sim_stream.h).
//
// Calls that wait for a device's queued work (stream_synchronize,
// stream_destroy, event_synchronize) are refused on that device's host
// callback thread, and every call on a failed device except the destroys
// returns the device's sticky error (sim_device.h).
#include <chrono>
#include <string>

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

spora_plugin_error_t* sticky(const char* fn, const Stream& stream) { return stream.device_state().sticky_error(fn); }

spora_plugin_error_t* sticky(const char* fn, int32_t device) {
  std::shared_ptr<Device> d;
  if (auto* err = get_device(fn, device, &d)) return err;
  return d->sticky_error(fn);
}

}  // namespace

// ---- streams ----

spora_plugin_error_t* stream_create(int32_t device, spora_stream_t** out) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    if (!out) return invalid("stream_create: out is NULL");
    State* state = nullptr;
    std::shared_ptr<Device> d;
    if (auto* err = get_device("stream_create", device, &d)) return err;
    if (auto* err = d->sticky_error("stream_create")) return err;
    if (auto* err = get_state(&state)) return err;
    *out = static_cast<spora_stream_t*>(state->streams.add(std::make_shared<Stream>(std::move(d))));
    return nullptr;
  });
}

spora_plugin_error_t* stream_destroy(spora_stream_t* stream) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    State* state = nullptr;
    std::shared_ptr<Stream> s;
    if (auto* err = get_stream("stream_destroy", stream, &s)) return err;
    if (auto* err = refuse_in_callback("stream_destroy", s->device())) return err;
    if (auto* err = s->refuse_capture("stream_destroy of the capturing stream")) return err;
    if (auto* err = get_state(&state)) return err;
    if (!state->streams.remove(stream)) return invalid("stream_destroy: stream was destroyed concurrently");
    // close() drains the queue and joins the worker.
    if (spora_plugin_error_t* err = s->close()) {
      host_log(SPORA_LOG_WARN, std::string("[sim] stream_destroy dropped an error nobody synchronized for: ") +
                              err->message);
      err->destroy(err);
    }
    return nullptr;
  });
}

spora_plugin_error_t* stream_synchronize(spora_stream_t* stream) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    std::shared_ptr<Stream> s;
    if (auto* err = get_stream("stream_synchronize", stream, &s)) return err;
    if (auto* err = refuse_in_callback("stream_synchronize", s->device())) return err;
    if (auto* err = s->refuse_capture("stream_synchronize on the capturing stream")) return err;
    if (auto* err = refuse_in_capture("stream_synchronize", s->device())) return err;
    // The fault itself first (it is the stream's first error), then sticky.
    if (spora_plugin_error_t* err = s->synchronize()) return err;
    return sticky("stream_synchronize", *s);
  });
}

spora_plugin_error_t* stream_query(spora_stream_t* stream, int32_t* out_done) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    if (!out_done) return invalid("stream_query: out_done is NULL");
    std::shared_ptr<Stream> s;
    if (auto* err = get_stream("stream_query", stream, &s)) return err;
    if (auto* err = sticky("stream_query", *s)) return err;
    *out_done = s->idle() ? 1 : 0;
    return nullptr;
  });
}

spora_plugin_error_t* stream_wait_event(spora_stream_t* stream, spora_event_t* event) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    std::shared_ptr<Stream> s;
    std::shared_ptr<Event> ev;
    if (auto* err = get_stream("stream_wait_event", stream, &s)) return err;
    if (auto* err = get_event("stream_wait_event", event, &ev)) return err;
    if (auto* err = sticky("stream_wait_event", *s)) return err;
    // Wait for the point recorded by now; a later re-record does not move it.
    const uint64_t gen = ev->target();
    if (ev->reached(gen)) return nullptr;
    // The task owns a reference, so the event may be destroyed meanwhile.
    return s->enqueue(
        [ev, gen](const spora_plugin_error_t*) -> spora_plugin_error_t* {
          ev->wait(gen);
          return nullptr;
        },
        Stream::Where::kMarker);
  });
}

spora_plugin_error_t* stream_add_callback(spora_stream_t* stream, spora_host_callback_fn fn, void* user_data) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    if (!fn) return invalid("stream_add_callback: fn is NULL");
    std::shared_ptr<Stream> s;
    if (auto* err = get_stream("stream_add_callback", stream, &s)) return err;
    if (auto* err = sticky("stream_add_callback", *s)) return err;
    // Runs on the device's callback thread; dropped once the device failed.
    return s->enqueue(
        [fn, user_data](const spora_plugin_error_t* status) -> spora_plugin_error_t* {
          fn(user_data, status);
          return nullptr;
        },
        Stream::Where::kCallbackThread, /*wants_status=*/true);
  });
}

// ---- events ----

spora_plugin_error_t* event_create(int32_t device, spora_event_t** out) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    if (!out) return invalid("event_create: out is NULL");
    State* state = nullptr;
    if (auto* err = sticky("event_create", device)) return err;  // also validates the index
    if (auto* err = get_state(&state)) return err;
    *out = static_cast<spora_event_t*>(state->events.add(std::make_shared<Event>(device)));
    return nullptr;
  });
}

spora_plugin_error_t* event_destroy(spora_event_t* event) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    State* state = nullptr;
    if (auto* err = get_state(&state)) return err;
    // Queued record/wait tasks hold their own references.
    if (!state->events.remove(event)) {
      return invalid(std::string("event_destroy: ") + (event ? "unknown or destroyed event" : "event is NULL"));
    }
    return nullptr;
  });
}

spora_plugin_error_t* event_record(spora_event_t* event, spora_stream_t* stream) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    std::shared_ptr<Stream> s;
    std::shared_ptr<Event> ev;
    if (auto* err = get_event("event_record", event, &ev)) return err;
    if (auto* err = get_stream("event_record", stream, &s)) return err;
    if (ev->device() != s->device()) {
      return invalid("event_record: event of device " + std::to_string(ev->device()) +
                     " recorded on a stream of device " + std::to_string(s->device()));
    }
    if (auto* err = sticky("event_record", *s)) return err;
    const uint64_t gen = ev->begin_record();
    spora_plugin_error_t* err = s->enqueue(
        [ev, gen](const spora_plugin_error_t*) -> spora_plugin_error_t* {
          ev->mark_reached(gen, Event::Clock::now());
          return nullptr;
        },
        Stream::Where::kMarker);
    // The generation is already published: never leave a waiter stranded on it.
    if (err) ev->mark_reached(gen, Event::Clock::now());
    return err;
  });
}

spora_plugin_error_t* event_query(spora_event_t* event, int32_t* out_done) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    if (!out_done) return invalid("event_query: out_done is NULL");
    std::shared_ptr<Event> ev;
    if (auto* err = get_event("event_query", event, &ev)) return err;
    if (auto* err = sticky("event_query", ev->device())) return err;
    *out_done = ev->reached(ev->target()) ? 1 : 0;
    return nullptr;
  });
}

spora_plugin_error_t* event_synchronize(spora_event_t* event) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    std::shared_ptr<Event> ev;
    if (auto* err = get_event("event_synchronize", event, &ev)) return err;
    if (auto* err = refuse_in_callback("event_synchronize", ev->device())) return err;
    if (auto* err = refuse_in_capture("event_synchronize", ev->device())) return err;
    ev->wait(ev->target());
    return sticky("event_synchronize", ev->device());
  });
}

spora_plugin_error_t* event_elapsed_ms(spora_event_t* start, spora_event_t* end, double* out_ms) {
  return guard("sim", [&]() -> spora_plugin_error_t* {
    if (!out_ms) return invalid("event_elapsed_ms: out_ms is NULL");
    std::shared_ptr<Event> a, b;
    if (auto* err = get_event("event_elapsed_ms start", start, &a)) return err;
    if (auto* err = get_event("event_elapsed_ms end", end, &b)) return err;
    if (a->device() != b->device()) {
      return invalid("event_elapsed_ms: events belong to devices " + std::to_string(a->device()) + " and " +
                     std::to_string(b->device()));
    }
    Event::Clock::time_point t0, t1;
    const char* names[2] = {"start", "end"};
    const Event* events[2] = {a.get(), b.get()};
    Event::Clock::time_point* stamps[2] = {&t0, &t1};
    for (int i = 0; i < 2; ++i) {
      if (events[i]->target() == 0) {
        return invalid(std::string("event_elapsed_ms: ") + names[i] + " event was never recorded");
      }
      if (!events[i]->timestamp(stamps[i])) {
        return invalid(std::string("event_elapsed_ms: ") + names[i] +
                       " event has not been reached yet (synchronize it first)");
      }
    }
    *out_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    return nullptr;
  });
}

}  // namespace spora::sim
