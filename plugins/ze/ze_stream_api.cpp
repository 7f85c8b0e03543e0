// The stream and event functions of the device table (objects in ze_stream.cpp).
#include <string>

#include "error.h"
#include "ze_api.h"
#include "ze_state.h"
#include "ze_stream.h"

namespace spora::ze {

using spora::plugin::guard;

spora_plugin_error_t* stream_create(int32_t device, spora_stream_t** out) {
  return guard("ze", [&]() -> spora_plugin_error_t* {
    if (!out) return invalid("stream_create: out is NULL");
    State* st = nullptr;
    Device* d = nullptr;
    if (auto* e = get_state(&st)) return e;
    if (auto* e = get_device("stream_create", device, &d)) return e;
    auto s = std::make_shared<Stream>(device, d);
    if (auto* e = s->create()) return e;
    *out = static_cast<spora_stream_t*>(st->streams.add(std::move(s)));
    return nullptr;
  });
}

spora_plugin_error_t* stream_destroy(spora_stream_t* stream) {
  return guard("ze", [&]() -> spora_plugin_error_t* {
    State* st = nullptr;
    if (auto* e = get_state(&st)) return e;
    std::shared_ptr<Stream> s = st->streams.remove(stream);
    if (!s) return invalid(std::string("stream_destroy: ") + (stream ? "unknown or destroyed stream" : "stream is NULL"));
    return s->synchronize();  // the last reference drops the list after this
  });
}

spora_plugin_error_t* stream_synchronize(spora_stream_t* stream) {
  return guard("ze", [&]() -> spora_plugin_error_t* {
    std::shared_ptr<Stream> s;
    if (auto* e = get_stream("stream_synchronize", stream, &s)) return e;
    return s->synchronize();
  });
}

spora_plugin_error_t* stream_query(spora_stream_t* stream, int32_t* out_done) {
  return guard("ze", [&]() -> spora_plugin_error_t* {
    if (!out_done) return invalid("stream_query: out_done is NULL");
    std::shared_ptr<Stream> s;
    if (auto* e = get_stream("stream_query", stream, &s)) return e;
    return s->query(out_done);
  });
}

spora_plugin_error_t* stream_wait_event(spora_stream_t* stream, spora_event_t* event) {
  return guard("ze", [&]() -> spora_plugin_error_t* {
    std::shared_ptr<Stream> s;
    std::shared_ptr<Event> ev;
    if (auto* e = get_stream("stream_wait_event", stream, &s)) return e;
    if (auto* e = get_event("stream_wait_event", event, &ev)) return e;
    if (!ev->recorded()) return nullptr;  // never recorded counts as reached
    return s->wait_event(ev->handle());
  });
}

spora_plugin_error_t* stream_add_callback(spora_stream_t* stream, spora_host_callback_fn fn, void* user_data) {
  return guard("ze", [&]() -> spora_plugin_error_t* {
    if (!fn) return invalid("stream_add_callback: fn is NULL");
    std::shared_ptr<Stream> s;
    if (auto* e = get_stream("stream_add_callback", stream, &s)) return e;
    return s->add_callback(fn, user_data);
  });
}

spora_plugin_error_t* stream_native_handle(spora_stream_t* stream, void** out) {
  return guard("ze", [&]() -> spora_plugin_error_t* {
    if (!out) return invalid("stream_native_handle: out is NULL");
    std::shared_ptr<Stream> s;
    if (auto* e = get_stream("stream_native_handle", stream, &s)) return e;
    *out = s->list();  // a ze_command_list_handle_t (immediate list)
    return nullptr;
  });
}

spora_plugin_error_t* event_create(int32_t device, spora_event_t** out) {
  return guard("ze", [&]() -> spora_plugin_error_t* {
    if (!out) return invalid("event_create: out is NULL");
    State* st = nullptr;
    Device* d = nullptr;
    if (auto* e = get_state(&st)) return e;
    if (auto* e = get_device("event_create", device, &d)) return e;
    auto ev = std::make_shared<Event>(d);
    if (auto* e = ev->create()) return e;
    *out = static_cast<spora_event_t*>(st->events.add(std::move(ev)));
    return nullptr;
  });
}

spora_plugin_error_t* event_destroy(spora_event_t* event) {
  return guard("ze", [&]() -> spora_plugin_error_t* {
    State* st = nullptr;
    if (auto* e = get_state(&st)) return e;
    std::shared_ptr<Event> ev = st->events.remove(event);
    if (!ev) return invalid(std::string("event_destroy: ") + (event ? "unknown or destroyed event" : "event is NULL"));
    // The device may still signal it: wait before its slot is recycled.
    return ev->synchronize();
  });
}

spora_plugin_error_t* event_record(spora_event_t* event, spora_stream_t* stream) {
  return guard("ze", [&]() -> spora_plugin_error_t* {
    std::shared_ptr<Event> ev;
    std::shared_ptr<Stream> s;
    if (auto* e = get_event("event_record", event, &ev)) return e;
    if (auto* e = get_stream("event_record", stream, &s)) return e;
    State* st = nullptr;
    if (auto* e = get_state(&st)) return e;
    if (st->devices[static_cast<size_t>(s->device())].get() != ev->dev())
      return invalid("event_record: event and stream belong to different devices");
    return ev->record(*s);
  });
}

spora_plugin_error_t* event_query(spora_event_t* event, int32_t* out_done) {
  return guard("ze", [&]() -> spora_plugin_error_t* {
    if (!out_done) return invalid("event_query: out_done is NULL");
    std::shared_ptr<Event> ev;
    if (auto* e = get_event("event_query", event, &ev)) return e;
    return ev->query(out_done);
  });
}

spora_plugin_error_t* event_synchronize(spora_event_t* event) {
  return guard("ze", [&]() -> spora_plugin_error_t* {
    std::shared_ptr<Event> ev;
    if (auto* e = get_event("event_synchronize", event, &ev)) return e;
    return ev->synchronize();
  });
}

spora_plugin_error_t* event_elapsed_ms(spora_event_t* start, spora_event_t* end, double* out_ms) {
  return guard("ze", [&]() -> spora_plugin_error_t* {
    if (!out_ms) return invalid("event_elapsed_ms: out_ms is NULL");
    std::shared_ptr<Event> a, b;
    if (auto* e = get_event("event_elapsed_ms", start, &a)) return e;
    if (auto* e = get_event("event_elapsed_ms", end, &b)) return e;
    if (a->dev() != b->dev()) return invalid("event_elapsed_ms: events of different devices");
    if (!a->recorded() || !b->recorded()) return invalid("event_elapsed_ms: both events must be recorded");
    int32_t da = 0, db = 0;
    if (auto* e = a->query(&da)) return e;
    if (auto* e = b->query(&db)) return e;
    if (!da || !db)
      return spora::plugin::make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[ze] event_elapsed_ms: an event is not reached yet");
    // Global timestamps wrap at timestampValidBits; the masked difference
    // is right across one wrap.
    const uint64_t ticks = (b->ticks() - a->ticks()) & a->dev()->timestamp_mask;
    *out_ms = static_cast<double>(ticks) * a->dev()->ns_per_tick / 1e6;
    return nullptr;
  });
}

}  // namespace spora::ze
