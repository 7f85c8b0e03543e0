/* libspora-device-earlyread.so: the loader tests' minimal device table with
 * pinned host memory, whose host callbacks really are queued (they run at
 * stream_synchronize or stream_destroy) but whose async copies still read
 * host memory during the call. That breaks plugin.h's ordering contract for
 * pinned memory: a callback queued before an h2d copy from pinned memory
 * must be able to produce the bytes the copy sends (issue 11: the bug a
 * real GPU showed). `spora plugin check` must fail "pinned h2d after host
 * callback". */
#define _POSIX_C_SOURCE 200112L /* pthread mutexes */
#define TEST_PLUGIN_NAME "earlyread"
#include "minimal_device.h"

#include <pthread.h>

/* Pending callbacks of every stream (the checks use few streams at a time). */
enum { EARLYREAD_MAX_PENDING = 64 };
static struct {
  spora_stream_t* stream;
  spora_host_callback_fn fn;
  void* user_data;
} earlyread_pending[EARLYREAD_MAX_PENDING];
static int earlyread_count = 0;
static pthread_mutex_t earlyread_mu = PTHREAD_MUTEX_INITIALIZER;

/* Runs (in order) and forgets the pending callbacks of `s`. */
static void earlyread_run_callbacks(spora_stream_t* s) {
  for (;;) {
    spora_host_callback_fn fn = NULL;
    void* user = NULL;
    int i, j;
    pthread_mutex_lock(&earlyread_mu);
    for (i = 0; i < earlyread_count; ++i)
      if (earlyread_pending[i].stream == s) break;
    if (i < earlyread_count) {
      fn = earlyread_pending[i].fn;
      user = earlyread_pending[i].user_data;
      for (j = i + 1; j < earlyread_count; ++j) earlyread_pending[j - 1] = earlyread_pending[j];
      --earlyread_count;
    }
    pthread_mutex_unlock(&earlyread_mu);
    if (!fn) return;
    fn(user, NULL);
  }
}

static spora_plugin_error_t* earlyread_add_callback(spora_stream_t* s, spora_host_callback_fn fn, void* user_data) {
  spora_plugin_error_t* e = test_stream_check(s);
  if (e) return e;
  if (!fn) return test_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[earlyread] stream_add_callback: fn is NULL");
  pthread_mutex_lock(&earlyread_mu);
  if (earlyread_count == EARLYREAD_MAX_PENDING) {
    pthread_mutex_unlock(&earlyread_mu);
    return test_error(SPORA_PLUGIN_OUT_OF_MEMORY, "[earlyread] too many pending callbacks");
  }
  earlyread_pending[earlyread_count].stream = s;
  earlyread_pending[earlyread_count].fn = fn;
  earlyread_pending[earlyread_count].user_data = user_data;
  ++earlyread_count;
  pthread_mutex_unlock(&earlyread_mu);
  return NULL;
}

static spora_plugin_error_t* earlyread_synchronize(spora_stream_t* s) {
  spora_plugin_error_t* e = test_stream_check(s);
  if (e) return e;
  earlyread_run_callbacks(s);
  return NULL;
}

static spora_plugin_error_t* earlyread_query(spora_stream_t* s, int32_t* out_done) {
  int i, pending = 0;
  spora_plugin_error_t* e = test_stream_check(s);
  if (e) return e;
  if (!out_done) return test_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[earlyread] stream_query: out_done is NULL");
  pthread_mutex_lock(&earlyread_mu);
  for (i = 0; i < earlyread_count; ++i) pending |= earlyread_pending[i].stream == s;
  pthread_mutex_unlock(&earlyread_mu);
  *out_done = pending ? 0 : 1;
  return NULL;
}

static spora_plugin_error_t* earlyread_destroy(spora_stream_t* s) {
  if (s) earlyread_run_callbacks(s);
  return test_stream_destroy(s);
}

static spora_plugin_error_t* earlyread_alloc_pinned(size_t size, void** out) {
  if (!out) return test_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[earlyread] host_alloc_pinned: out is NULL");
  *out = malloc(size ? size : 1);
  return *out ? NULL : test_error(SPORA_PLUGIN_OUT_OF_MEMORY, "[earlyread] host_alloc_pinned: malloc failed");
}

static spora_plugin_error_t* earlyread_free_pinned(void* p) {
  free(p);
  return NULL;
}

static spora_device_api_t earlyread_api;

SPORA_PLUGIN_EXPORT spora_plugin_error_t* spora_plugin_entry_v1(const spora_host_t* host, spora_plugin_info_t* out) {
  if (!host || host->abi_major != SPORA_PLUGIN_ABI_MAJOR)
    return test_error(SPORA_PLUGIN_UNAVAILABLE, "[earlyread] host speaks another plugin ABI major");
  test_fill_info(host, out, SPORA_PLUGIN_ABI_MAJOR, SPORA_PLUGIN_ABI_MINOR);
  earlyread_api = test_device_api;
  earlyread_api.host_alloc_pinned = earlyread_alloc_pinned;
  earlyread_api.host_free_pinned = earlyread_free_pinned;
  earlyread_api.stream_add_callback = earlyread_add_callback;
  earlyread_api.stream_synchronize = earlyread_synchronize;
  earlyread_api.stream_query = earlyread_query;
  earlyread_api.stream_destroy = earlyread_destroy;
  out->api = &earlyread_api;
  return NULL;
}
