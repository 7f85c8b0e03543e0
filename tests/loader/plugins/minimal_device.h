/*
 * minimal_device.h -- a complete, minimal device table for the loader
 * test plugins. C99, built against spora/plugin.h only.
 *
 * One device; memory from malloc (device addresses are host pointers);
 * synchronous and asynchronous copies are memcpy; streams run everything
 * inline, so every stream and event is always complete; no kernels and no
 * graphs and no memory statistics (those entries are NULL, which plugin.h
 * allows).
 *
 * Include it from exactly one .c file after defining
 *   TEST_PLUGIN_NAME     the plugin's name, e.g. "good" (must match the file name)
 * and optionally
 *   TEST_PLUGIN_INIT_ERROR  a message: `initialize` then fails with it
 *                           (code SPORA_PLUGIN_UNAVAILABLE).
 *   TEST_V10_TABLE          the table ends where plugin ABI 1.0's did (see below).
 * The including file writes spora_plugin_entry_v1 (and the probe if any) and
 * calls test_fill_info() from it.
 *
 * The device's properties.name records what the host told the plugin at
 * entry and how often entry ran ("... host ABI 1.0 floor 0; entry calls 1"),
 * so the test can see the handshake and the loader's dedupe from outside.
 */
#ifndef SPORA_TEST_MINIMAL_DEVICE_H
#define SPORA_TEST_MINIMAL_DEVICE_H

#include <spora/plugin.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef TEST_PLUGIN_NAME
#error "define TEST_PLUGIN_NAME before including minimal_device.h"
#endif

/* ---- errors: plugin-owned, self-describing ---- */

typedef struct test_error {
  spora_plugin_error_t base;
  char text[256];
} test_error_t;

static void test_error_destroy(spora_plugin_error_t* self) { free(self); }

static void test_static_destroy(spora_plugin_error_t* self) { (void)self; }
static spora_plugin_error_t test_oom_error = {sizeof(spora_plugin_error_t), SPORA_PLUGIN_OUT_OF_MEMORY,
                                              "[" TEST_PLUGIN_NAME "] out of memory", test_static_destroy};

static spora_plugin_error_t* test_error(int32_t code, const char* message) {
  test_error_t* e = (test_error_t*)malloc(sizeof(test_error_t));
  if (!e) return &test_oom_error;
  e->base.struct_size = sizeof(spora_plugin_error_t);
  e->base.code = code;
  snprintf(e->text, sizeof e->text, "%s", message);
  e->base.message = e->text;
  e->base.destroy = test_error_destroy;
  return &e->base;
}

static spora_plugin_error_t* test_check_device(int32_t device) {
  if (device != 0) return test_error(SPORA_PLUGIN_NOT_FOUND, "[" TEST_PLUGIN_NAME "] no such device");
  return NULL;
}

/* ---- state ---- */

static const spora_host_t* test_host = NULL;
static int test_entry_calls = 0;
static int test_initialized = 0;
static char test_device_name[160] = "";

/* ---- lifecycle ---- */

static spora_plugin_error_t* test_initialize(void) {
#ifdef TEST_PLUGIN_INIT_ERROR
  return test_error(SPORA_PLUGIN_UNAVAILABLE, TEST_PLUGIN_INIT_ERROR);
#else
  test_initialized = 1;
  return NULL;
#endif
}

static spora_plugin_error_t* test_device_count(int32_t* out) {
  if (!out) return test_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[" TEST_PLUGIN_NAME "] device_count: out is NULL");
  *out = test_initialized ? 1 : 0;
  return NULL;
}

static spora_plugin_error_t* test_device_properties(int32_t device, spora_device_properties_t* out) {
  spora_plugin_error_t* e = test_check_device(device);
  if (e) return e;
  if (!out) return test_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[" TEST_PLUGIN_NAME "] device_properties: out is NULL");
  /* Write only what the host's struct has room for. */
  if (SPORA_STRUCT_HAS(out, spora_device_properties_t, name)) out->name = test_device_name;
  if (SPORA_STRUCT_HAS(out, spora_device_properties_t, vendor)) out->vendor = "Spora loader tests";
  if (SPORA_STRUCT_HAS(out, spora_device_properties_t, arch)) out->arch = "host";
  if (SPORA_STRUCT_HAS(out, spora_device_properties_t, memory_bytes)) out->memory_bytes = 0;
  if (SPORA_STRUCT_HAS(out, spora_device_properties_t, compute_units)) out->compute_units = 1;
  if (SPORA_STRUCT_HAS(out, spora_device_properties_t, unified_memory)) out->unified_memory = 1;
  if (SPORA_STRUCT_HAS(out, spora_device_properties_t, max_streams)) out->max_streams = 0;
  if (SPORA_STRUCT_HAS(out, spora_device_properties_t, alignment)) out->alignment = 16; /* malloc's on x86-64/aarch64 */
  return NULL;
}

/* ---- memory ---- */

static spora_plugin_error_t* test_mem_alloc(int32_t device, size_t size, spora_devptr_t* out) {
  spora_plugin_error_t* e = test_check_device(device);
  void* p;
  if (e) return e;
  if (!out) return test_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[" TEST_PLUGIN_NAME "] mem_alloc: out is NULL");
  p = malloc(size ? size : 1); /* size 0: still a unique non-NULL address */
  if (!p) return test_error(SPORA_PLUGIN_OUT_OF_MEMORY, "[" TEST_PLUGIN_NAME "] mem_alloc: malloc failed");
  *out = p;
  return NULL;
}

static spora_plugin_error_t* test_mem_free(int32_t device, spora_devptr_t ptr) {
  spora_plugin_error_t* e = test_check_device(device);
  if (e) return e;
  free(ptr); /* streams are inline: nothing can still be using it */
  return NULL;
}

static spora_plugin_error_t* test_copy(int32_t device, void* dst, const void* src, size_t size) {
  spora_plugin_error_t* e = test_check_device(device);
  if (e) return e;
  if (size && (!dst || !src)) return test_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[" TEST_PLUGIN_NAME "] copy: NULL buffer");
  if (size) memmove(dst, src, size);
  return NULL;
}

static spora_plugin_error_t* test_copy_h2d(int32_t device, spora_devptr_t dst, const void* src, size_t size) {
  return test_copy(device, dst, src, size);
}
static spora_plugin_error_t* test_copy_d2h(int32_t device, void* dst, spora_devptr_t src, size_t size) {
  return test_copy(device, dst, src, size);
}
static spora_plugin_error_t* test_copy_d2d(int32_t device, spora_devptr_t dst, spora_devptr_t src, size_t size) {
  return test_copy(device, dst, src, size);
}
static spora_plugin_error_t* test_memset(int32_t device, spora_devptr_t dst, int32_t byte, size_t size) {
  spora_plugin_error_t* e = test_check_device(device);
  if (e) return e;
  if (size && !dst) return test_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[" TEST_PLUGIN_NAME "] memset: NULL buffer");
  if (size) memset(dst, byte, size);
  return NULL;
}

/* ---- streams and events: everything runs inline, on the caller's thread ---- */

struct spora_stream {
  int32_t device;
};
struct spora_event {
  int32_t recorded;
};

static spora_plugin_error_t* test_stream_check(spora_stream_t* s) {
  if (!s) return test_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[" TEST_PLUGIN_NAME "] NULL stream");
  return NULL;
}

static spora_plugin_error_t* test_copy_h2d_async(spora_stream_t* s, spora_devptr_t dst, const void* src, size_t size) {
  spora_plugin_error_t* e = test_stream_check(s);
  return e ? e : test_copy(s->device, dst, src, size);
}
static spora_plugin_error_t* test_copy_d2h_async(spora_stream_t* s, void* dst, spora_devptr_t src, size_t size) {
  spora_plugin_error_t* e = test_stream_check(s);
  return e ? e : test_copy(s->device, dst, src, size);
}
static spora_plugin_error_t* test_copy_d2d_async(spora_stream_t* s, spora_devptr_t dst, spora_devptr_t src, size_t size) {
  spora_plugin_error_t* e = test_stream_check(s);
  return e ? e : test_copy(s->device, dst, src, size);
}
static spora_plugin_error_t* test_memset_async(spora_stream_t* s, spora_devptr_t dst, int32_t byte, size_t size) {
  spora_plugin_error_t* e = test_stream_check(s);
  return e ? e : test_memset(s->device, dst, byte, size);
}

static spora_plugin_error_t* test_stream_create(int32_t device, spora_stream_t** out) {
  spora_plugin_error_t* e = test_check_device(device);
  spora_stream_t* s;
  if (e) return e;
  if (!out) return test_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[" TEST_PLUGIN_NAME "] stream_create: out is NULL");
  s = (spora_stream_t*)malloc(sizeof *s);
  if (!s) return test_error(SPORA_PLUGIN_OUT_OF_MEMORY, "[" TEST_PLUGIN_NAME "] stream_create: malloc failed");
  s->device = device;
  *out = s;
  return NULL;
}
static spora_plugin_error_t* test_stream_destroy(spora_stream_t* s) {
  free(s);
  return NULL;
}
static spora_plugin_error_t* test_stream_synchronize(spora_stream_t* s) { return test_stream_check(s); }
static spora_plugin_error_t* test_stream_query(spora_stream_t* s, int32_t* out_done) {
  spora_plugin_error_t* e = test_stream_check(s);
  if (e) return e;
  if (out_done) *out_done = 1;
  return NULL;
}
static spora_plugin_error_t* test_stream_wait_event(spora_stream_t* s, spora_event_t* ev) {
  (void)ev;
  return test_stream_check(s);
}
static spora_plugin_error_t* test_stream_add_callback(spora_stream_t* s, spora_host_callback_fn fn, void* user_data) {
  spora_plugin_error_t* e = test_stream_check(s);
  if (e) return e;
  if (fn) fn(user_data, NULL); /* all earlier work already finished */
  return NULL;
}

static spora_plugin_error_t* test_event_create(int32_t device, spora_event_t** out) {
  spora_plugin_error_t* e = test_check_device(device);
  spora_event_t* ev;
  if (e) return e;
  if (!out) return test_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[" TEST_PLUGIN_NAME "] event_create: out is NULL");
  ev = (spora_event_t*)malloc(sizeof *ev);
  if (!ev) return test_error(SPORA_PLUGIN_OUT_OF_MEMORY, "[" TEST_PLUGIN_NAME "] event_create: malloc failed");
  ev->recorded = 0;
  *out = ev;
  return NULL;
}
static spora_plugin_error_t* test_event_destroy(spora_event_t* ev) {
  free(ev);
  return NULL;
}
static spora_plugin_error_t* test_event_check(spora_event_t* ev) {
  if (!ev) return test_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[" TEST_PLUGIN_NAME "] NULL event");
  return NULL;
}
static spora_plugin_error_t* test_event_record(spora_event_t* ev, spora_stream_t* s) {
  spora_plugin_error_t* e = test_stream_check(s);
  if (!e) e = test_event_check(ev);
  if (e) return e;
  ev->recorded = 1;
  return NULL;
}
static spora_plugin_error_t* test_event_query(spora_event_t* ev, int32_t* out_done) {
  spora_plugin_error_t* e = test_event_check(ev);
  if (e) return e;
  if (out_done) *out_done = 1;
  return NULL;
}
static spora_plugin_error_t* test_event_synchronize(spora_event_t* ev) { return test_event_check(ev); }
static spora_plugin_error_t* test_event_elapsed_ms(spora_event_t* a, spora_event_t* b, double* out_ms) {
  spora_plugin_error_t* e = test_event_check(a);
  if (!e) e = test_event_check(b);
  if (e) return e;
  if (out_ms) *out_ms = 0.0;
  return NULL;
}

static void test_shutdown(void) { test_initialized = 0; }

/* TEST_V10_TABLE: the table of a plugin built against plugin ABI 1.0, whose
 * struct_size ends at `shutdown`. The 1.1 slot behind it holds a function
 * that aborts, so a host reading past struct_size is caught. */
#ifdef TEST_V10_TABLE
static spora_plugin_error_t* test_memory_stats_poison(int32_t device, spora_memory_stats_t* out) {
  (void)device;
  (void)out;
  fprintf(stderr, "[" TEST_PLUGIN_NAME "] memory_stats called although the table's struct_size ends before it\n");
  abort();
}
#define TEST_TABLE_SIZE offsetof(spora_device_api_t, memory_stats)
#else
#define TEST_TABLE_SIZE sizeof(spora_device_api_t)
#endif

/* Designated initialisers (C99): every entry not named is NULL. */
static const spora_device_api_t test_device_api = {
    .struct_size = TEST_TABLE_SIZE,
    .extensions = NULL,
    .initialize = test_initialize,
    .device_count = test_device_count,
    .device_properties = test_device_properties,
    .mem_alloc = test_mem_alloc,
    .mem_free = test_mem_free,
    .copy_h2d = test_copy_h2d,
    .copy_d2h = test_copy_d2h,
    .copy_d2d = test_copy_d2d,
    .memset = test_memset,
    .copy_h2d_async = test_copy_h2d_async,
    .copy_d2h_async = test_copy_d2h_async,
    .copy_d2d_async = test_copy_d2d_async,
    .memset_async = test_memset_async,
    .stream_create = test_stream_create,
    .stream_destroy = test_stream_destroy,
    .stream_synchronize = test_stream_synchronize,
    .stream_query = test_stream_query,
    .stream_wait_event = test_stream_wait_event,
    .stream_add_callback = test_stream_add_callback,
    .event_create = test_event_create,
    .event_destroy = test_event_destroy,
    .event_record = test_event_record,
    .event_query = test_event_query,
    .event_synchronize = test_event_synchronize,
    .event_elapsed_ms = test_event_elapsed_ms,
    .kernel_ops = NULL,
    .kernel_create = NULL,
    .kernel_destroy = NULL,
    .kernel_launch = NULL,
    .shutdown = test_shutdown,
#ifdef TEST_V10_TABLE
    .memory_stats = test_memory_stats_poison,
#endif
};

/* Fills `out` for a device plugin called TEST_PLUGIN_NAME that reports ABI
 * `major`.`minor`, keeps `host` and records the handshake. */
static void test_fill_info(const spora_host_t* host, spora_plugin_info_t* out, uint32_t major, uint32_t minor) {
  ++test_entry_calls;
  test_host = host;
  if (host)
    snprintf(test_device_name, sizeof test_device_name, "%s test device; host ABI %u.%u floor %u; entry calls %d",
             TEST_PLUGIN_NAME, (unsigned)host->abi_major, (unsigned)host->abi_minor, (unsigned)host->abi_minor_floor,
             test_entry_calls);
  out->abi_major = major;
  out->abi_minor = minor;
  out->kind = SPORA_PLUGIN_KIND_DEVICE;
  out->name = TEST_PLUGIN_NAME;
  out->version = "0.0.1-test";
  out->build = "tests/loader (C99)";
  out->api = &test_device_api;
  if (SPORA_STRUCT_HAS(out, spora_plugin_info_t, extensions)) out->extensions = NULL;
}

#endif /* SPORA_TEST_MINIMAL_DEVICE_H */
