// Streams and events of the cpu device. Work runs inline on the calling
// thread, so a stream is always idle when a call returns; an event records
// the time it was recorded at.
#include <chrono>
#include <new>

#include "cpu_state.h"
#include "error.h"

struct spora_stream {
  int32_t device;
};
struct spora_event {
  bool recorded = false;
  std::chrono::steady_clock::time_point when;
};

namespace spora::cpu {
namespace {

using plugin::make_error;

spora_plugin_error_t* null_arg(const char* what) {
  return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, std::string("[cpu] ") + what + ": null handle");
}

}  // namespace

spora_plugin_error_t* stream_create(int32_t device, spora_stream_t** out) {
  if (!out) return null_arg("stream_create");
  if (device != 0) return make_error(SPORA_PLUGIN_NOT_FOUND, "[cpu] stream_create: no device " + std::to_string(device));
  *out = new (std::nothrow) spora_stream{device};
  return *out ? nullptr : make_error(SPORA_PLUGIN_OUT_OF_MEMORY, "[cpu] stream_create: out of memory");
}
spora_plugin_error_t* stream_destroy(spora_stream_t* s) {
  delete s;
  return nullptr;
}
spora_plugin_error_t* stream_synchronize(spora_stream_t* s) { return s ? nullptr : null_arg("stream_synchronize"); }
spora_plugin_error_t* stream_query(spora_stream_t* s, int32_t* done) {
  if (!s || !done) return null_arg("stream_query");
  *done = 1;
  return nullptr;
}
spora_plugin_error_t* stream_wait_event(spora_stream_t* s, spora_event_t* e) {
  return s && e ? nullptr : null_arg("stream_wait_event");
}
spora_plugin_error_t* stream_add_callback(spora_stream_t* s, spora_host_callback_fn fn, void* user) {
  if (!s || !fn) return null_arg("stream_add_callback");
  fn(user, nullptr);
  return nullptr;
}

spora_plugin_error_t* event_create(int32_t device, spora_event_t** out) {
  if (!out) return null_arg("event_create");
  if (device != 0) return make_error(SPORA_PLUGIN_NOT_FOUND, "[cpu] event_create: no device " + std::to_string(device));
  *out = new (std::nothrow) spora_event;
  return *out ? nullptr : make_error(SPORA_PLUGIN_OUT_OF_MEMORY, "[cpu] event_create: out of memory");
}
spora_plugin_error_t* event_destroy(spora_event_t* e) {
  delete e;
  return nullptr;
}
spora_plugin_error_t* event_record(spora_event_t* e, spora_stream_t* s) {
  if (!e || !s) return null_arg("event_record");
  e->recorded = true;
  e->when = std::chrono::steady_clock::now();
  return nullptr;
}
spora_plugin_error_t* event_query(spora_event_t* e, int32_t* done) {
  if (!e || !done) return null_arg("event_query");
  *done = 1;
  return nullptr;
}
spora_plugin_error_t* event_synchronize(spora_event_t* e) { return e ? nullptr : null_arg("event_synchronize"); }
spora_plugin_error_t* event_elapsed_ms(spora_event_t* a, spora_event_t* b, double* out) {
  if (!a || !b || !out) return null_arg("event_elapsed_ms");
  if (!a->recorded || !b->recorded)
    return make_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[cpu] event_elapsed_ms: event was never recorded");
  *out = std::chrono::duration<double, std::milli>(b->when - a->when).count();
  return nullptr;
}

}  // namespace spora::cpu
