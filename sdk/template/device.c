/*
 * device.c -- the smallest complete Spora device plugin (C99, plugin ABI v1).
 *
 * It works as it stands: one device whose memory is host memory (malloc),
 * streams that run every request synchronously on the caller's thread,
 * events that record a timestamp, and one kernel (`add` on f32) to show the
 * plan/launch pattern. Everything else a real accelerator needs is marked
 * FILL IN: replace those parts with calls into your driver.
 *
 * Rules of the contract (spora/plugin.h has the details):
 *  - Export only spora_plugin_probe_v1 and spora_plugin_entry_v1
 *    (spora_add_plugin's version script does that). Everything else static.
 *  - Probe and entry must be cheap and touch no hardware; open the driver in
 *    initialize().
 *  - Every fallible function returns NULL on success or an error object the
 *    host frees with err->destroy(err). Never abort, never print: report.
 *  - Read any host struct field only if SPORA_STRUCT_HAS says it is there.
 *  - The host may call any table function from any thread at once.
 *
 * PLUGIN_NAME and PLUGIN_VERSION come from CMakeLists.txt.
 */
#define _POSIX_C_SOURCE 200112L /* posix_memalign, clock_gettime */

#include <spora/plugin.h>
/* The SDK's table and entry helpers (header-only): X(member) below means the
 * static function plugin_<member>. */
#define SPORA_SDK_FUNCTION_PREFIX plugin_
#include <spora/sdk/plugin_table.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef PLUGIN_NAME
#error "PLUGIN_NAME is not defined: build this file with its CMakeLists.txt (set PLUGIN_NAME there)"
#endif
#ifndef PLUGIN_VERSION
#define PLUGIN_VERSION "0.0.0"
#endif

#define TAG "[" PLUGIN_NAME "] "

/* ======================================================================== */
/* Errors: plugin-owned objects that carry their own destroy                */
/* ======================================================================== */

typedef struct plugin_error {
  spora_plugin_error_t base;
  char text[256];
} plugin_error_t;

static void error_destroy(spora_plugin_error_t* self) { free(self); }
static void static_error_destroy(spora_plugin_error_t* self) { (void)self; }

/* Returned when even the error cannot be allocated. */
static spora_plugin_error_t out_of_memory_error = {sizeof(spora_plugin_error_t), SPORA_PLUGIN_OUT_OF_MEMORY,
                                                   TAG "out of host memory", static_error_destroy};

/* An error with the whole message `text`. */
static spora_plugin_error_t* error_text(int32_t code, const char* text) {
  plugin_error_t* e = (plugin_error_t*)malloc(sizeof *e);
  if (!e) return &out_of_memory_error;
  e->base.struct_size = sizeof(spora_plugin_error_t);
  e->base.code = code;
  snprintf(e->text, sizeof e->text, "%s", text);
  e->base.message = e->text;
  e->base.destroy = error_destroy;
  return &e->base;
}

/* `what` names the function; messages start with [name] and say what to do. */
static spora_plugin_error_t* error(int32_t code, const char* what, const char* message) {
  char text[256];
  snprintf(text, sizeof text, TAG "%s: %s", what, message);
  return error_text(code, text);
}

static spora_plugin_error_t* null_argument(const char* what) {
  return error(SPORA_PLUGIN_INVALID_ARGUMENT, what, "a required pointer argument is NULL");
}

/* ======================================================================== */
/* Plugin state                                                             */
/* ======================================================================== */

static const spora_host_t* g_host = NULL; /* kept from entry, valid forever */
static int g_initialized = 0;
static int32_t g_device_count = 0;

/* Logs through the host (plugins never write to stdout/stderr). */
static void host_log(int32_t level, const char* message) {
  const spora_host_services_t* s = g_host && SPORA_STRUCT_HAS(g_host, spora_host_t, services) ? g_host->services : NULL;
  if (SPORA_STRUCT_HAS(s, spora_host_services_t, log) && s->log) s->log(s->ctx, level, PLUGIN_NAME, message);
}

static spora_plugin_error_t* check_device(const char* what, int32_t device) {
  if (!g_initialized) return error(SPORA_PLUGIN_UNAVAILABLE, what, "called before initialize");
  if (device < 0 || device >= g_device_count) return error(SPORA_PLUGIN_NOT_FOUND, what, "no such device index");
  return NULL;
}

/* ======================================================================== */
/* Lifecycle and device queries                                             */
/* ======================================================================== */

static spora_plugin_error_t* plugin_initialize(void) {
  /* FILL IN (driver): open the driver, enumerate devices, create contexts.
   * On failure return SPORA_PLUGIN_UNAVAILABLE with the reason and a fix,
   * e.g. "libmydrv.so.1 not found; install the driver": the host shows it in
   * `spora devices` and when a user asks for this backend. */
  g_device_count = 1;
  g_initialized = 1;
  host_log(SPORA_LOG_DEBUG, "initialized 1 device (host memory)");
  return NULL;
}

static spora_plugin_error_t* plugin_device_count(int32_t* out_count) {
  if (!out_count) return null_argument("device_count");
  *out_count = g_initialized ? g_device_count : 0;
  return NULL;
}

static spora_plugin_error_t* plugin_device_properties(int32_t device, spora_device_properties_t* out) {
  typedef spora_device_properties_t P;
  spora_plugin_error_t* e = check_device("device_properties", device);
  if (e) return e;
  if (!out) return null_argument("device_properties");
  /* FILL IN (driver): ask the driver. Strings must live for the process. */
  if (SPORA_STRUCT_HAS(out, P, name)) out->name = PLUGIN_NAME " device (template: host memory)";
  if (SPORA_STRUCT_HAS(out, P, vendor)) out->vendor = "FILL IN vendor";
  if (SPORA_STRUCT_HAS(out, P, arch)) out->arch = "host";
  if (SPORA_STRUCT_HAS(out, P, memory_bytes)) out->memory_bytes = 0; /* 0 = unknown */
  if (SPORA_STRUCT_HAS(out, P, compute_units)) out->compute_units = 1;
  if (SPORA_STRUCT_HAS(out, P, unified_memory)) out->unified_memory = 1; /* device addresses are host pointers */
  if (SPORA_STRUCT_HAS(out, P, max_streams)) out->max_streams = 0;       /* unlimited */
  if (SPORA_STRUCT_HAS(out, P, alignment)) out->alignment = 64;
  return NULL;
}

static void plugin_shutdown(void) {
  /* FILL IN (driver): release what initialize created. */
  g_initialized = 0;
}

/* ======================================================================== */
/* Memory                                                                   */
/* ======================================================================== */

/* FILL IN (memory): allocate device memory (cudaMalloc, zeMemAllocDevice,
 * hipMalloc...). The host never dereferences a device address; it only adds
 * byte offsets inside an allocation. Here "device memory" is host memory. */
static spora_plugin_error_t* plugin_mem_alloc(int32_t device, size_t size, spora_devptr_t* out) {
  void* p = NULL;
  spora_plugin_error_t* e = check_device("mem_alloc", device);
  if (e) return e;
  if (!out) return null_argument("mem_alloc");
  /* Size 0 still returns a unique, freeable address. */
  if (posix_memalign(&p, 64, size ? size : 1) != 0 || !p)
    return error(SPORA_PLUGIN_OUT_OF_MEMORY, "mem_alloc", "out of device memory");
  *out = p;
  return NULL;
}

/* The contract: free after the work already queued on the buffer finished.
 * Synchronous streams have none left; a real device defers or syncs. */
static spora_plugin_error_t* plugin_mem_free(int32_t device, spora_devptr_t ptr) {
  spora_plugin_error_t* e = check_device("mem_free", device);
  if (e) return e;
  free(ptr);
  return NULL;
}

/* FILL IN (memory): the copy engine. All three directions are memmove here
 * because device memory is host memory. Synchronous copies must be ordered
 * after work already queued on the device's streams. */
static spora_plugin_error_t* copy_bytes(const char* what, int32_t device, void* dst, const void* src, size_t size) {
  spora_plugin_error_t* e = check_device(what, device);
  if (e) return e;
  if (size == 0) return NULL;
  if (!dst || !src) return null_argument(what);
  memmove(dst, src, size);
  return NULL;
}

static spora_plugin_error_t* plugin_copy_h2d(int32_t device, spora_devptr_t dst, const void* src, size_t size) {
  return copy_bytes("copy_h2d", device, dst, src, size);
}
static spora_plugin_error_t* plugin_copy_d2h(int32_t device, void* dst, spora_devptr_t src, size_t size) {
  return copy_bytes("copy_d2h", device, dst, src, size);
}
static spora_plugin_error_t* plugin_copy_d2d(int32_t device, spora_devptr_t dst, spora_devptr_t src, size_t size) {
  return copy_bytes("copy_d2d", device, dst, src, size);
}
static spora_plugin_error_t* plugin_memset(int32_t device, spora_devptr_t dst, int32_t byte, size_t size) {
  spora_plugin_error_t* e = check_device("memset", device);
  if (e) return e;
  if (size == 0) return NULL;
  if (!dst) return null_argument("memset");
  memset(dst, byte, size);
  return NULL;
}

/* ======================================================================== */
/* Streams and events                                                       */
/* ======================================================================== */

/* FILL IN (streams): a stream is an in-order queue of work on the device
 * (cudaStream_t, a Level Zero command list...). Here every request runs at
 * once on the calling thread, so a stream is always idle when a call returns,
 * callbacks run immediately, and waiting on an event is a no-op. A real
 * device enqueues instead and reports failures of queued work from
 * stream_synchronize and to callbacks. */

#define STREAM_MAGIC 0x5354524du /* catches a wrong or destroyed handle early */
#define EVENT_MAGIC 0x4556454eu

struct spora_stream {
  uint32_t magic;
  int32_t device;
};

struct spora_event {
  uint32_t magic;
  int32_t device;
  int recorded;
  struct timespec when;
};

static spora_plugin_error_t* check_stream(const char* what, const spora_stream_t* s) {
  if (!s || s->magic != STREAM_MAGIC) return error(SPORA_PLUGIN_INVALID_ARGUMENT, what, "not a live stream handle");
  return NULL;
}
static spora_plugin_error_t* check_event(const char* what, const spora_event_t* ev) {
  if (!ev || ev->magic != EVENT_MAGIC) return error(SPORA_PLUGIN_INVALID_ARGUMENT, what, "not a live event handle");
  return NULL;
}

static spora_plugin_error_t* plugin_stream_create(int32_t device, spora_stream_t** out) {
  spora_stream_t* s;
  spora_plugin_error_t* e = check_device("stream_create", device);
  if (e) return e;
  if (!out) return null_argument("stream_create");
  s = (spora_stream_t*)malloc(sizeof *s);
  if (!s) return error(SPORA_PLUGIN_OUT_OF_MEMORY, "stream_create", "out of host memory");
  s->magic = STREAM_MAGIC;
  s->device = device;
  *out = s;
  return NULL;
}

static spora_plugin_error_t* plugin_stream_destroy(spora_stream_t* s) {
  spora_plugin_error_t* e = check_stream("stream_destroy", s);
  if (e) return e;
  s->magic = 0;
  free(s);
  return NULL;
}

static spora_plugin_error_t* plugin_stream_synchronize(spora_stream_t* s) {
  return check_stream("stream_synchronize", s);
}

static spora_plugin_error_t* plugin_stream_query(spora_stream_t* s, int32_t* out_done) {
  spora_plugin_error_t* e = check_stream("stream_query", s);
  if (e) return e;
  if (!out_done) return null_argument("stream_query");
  *out_done = 1;
  return NULL;
}

static spora_plugin_error_t* plugin_stream_wait_event(spora_stream_t* s, spora_event_t* ev) {
  spora_plugin_error_t* e = check_stream("stream_wait_event", s);
  return e ? e : check_event("stream_wait_event", ev);
}

static spora_plugin_error_t* plugin_stream_add_callback(spora_stream_t* s, spora_host_callback_fn fn, void* user_data) {
  spora_plugin_error_t* e = check_stream("stream_add_callback", s);
  if (e) return e;
  if (!fn) return null_argument("stream_add_callback");
  fn(user_data, NULL); /* everything queued before it has finished, successfully */
  return NULL;
}

/* Asynchronous copies: enqueue on the stream. Synchronous here. */
static spora_plugin_error_t* plugin_copy_h2d_async(spora_stream_t* s, spora_devptr_t dst, const void* src,
                                                   size_t size) {
  spora_plugin_error_t* e = check_stream("copy_h2d_async", s);
  return e ? e : copy_bytes("copy_h2d_async", s->device, dst, src, size);
}
static spora_plugin_error_t* plugin_copy_d2h_async(spora_stream_t* s, void* dst, spora_devptr_t src, size_t size) {
  spora_plugin_error_t* e = check_stream("copy_d2h_async", s);
  return e ? e : copy_bytes("copy_d2h_async", s->device, dst, src, size);
}
static spora_plugin_error_t* plugin_copy_d2d_async(spora_stream_t* s, spora_devptr_t dst, spora_devptr_t src,
                                                   size_t size) {
  spora_plugin_error_t* e = check_stream("copy_d2d_async", s);
  return e ? e : copy_bytes("copy_d2d_async", s->device, dst, src, size);
}
static spora_plugin_error_t* plugin_memset_async(spora_stream_t* s, spora_devptr_t dst, int32_t byte, size_t size) {
  spora_plugin_error_t* e = check_stream("memset_async", s);
  return e ? e : plugin_memset(s->device, dst, byte, size);
}

/* FILL IN (events): a marker in a stream (cudaEvent_t...). Here recording
 * takes the time, since the stream has already done everything before it. */
static spora_plugin_error_t* plugin_event_create(int32_t device, spora_event_t** out) {
  spora_event_t* ev;
  spora_plugin_error_t* e = check_device("event_create", device);
  if (e) return e;
  if (!out) return null_argument("event_create");
  ev = (spora_event_t*)calloc(1, sizeof *ev);
  if (!ev) return error(SPORA_PLUGIN_OUT_OF_MEMORY, "event_create", "out of host memory");
  ev->magic = EVENT_MAGIC;
  ev->device = device;
  *out = ev;
  return NULL;
}

static spora_plugin_error_t* plugin_event_destroy(spora_event_t* ev) {
  spora_plugin_error_t* e = check_event("event_destroy", ev);
  if (e) return e;
  ev->magic = 0;
  free(ev);
  return NULL;
}

static spora_plugin_error_t* plugin_event_record(spora_event_t* ev, spora_stream_t* s) {
  spora_plugin_error_t* e = check_event("event_record", ev);
  if (!e) e = check_stream("event_record", s);
  if (e) return e;
  if (ev->device != s->device)
    return error(SPORA_PLUGIN_INVALID_ARGUMENT, "event_record", "event and stream belong to different devices");
  clock_gettime(CLOCK_MONOTONIC, &ev->when);
  ev->recorded = 1;
  return NULL;
}

static spora_plugin_error_t* plugin_event_query(spora_event_t* ev, int32_t* out_done) {
  spora_plugin_error_t* e = check_event("event_query", ev);
  if (e) return e;
  if (!out_done) return null_argument("event_query");
  *out_done = 1; /* recorded points are reached at once; unrecorded count as reached */
  return NULL;
}

static spora_plugin_error_t* plugin_event_synchronize(spora_event_t* ev) {
  return check_event("event_synchronize", ev);
}

static spora_plugin_error_t* plugin_event_elapsed_ms(spora_event_t* start, spora_event_t* end, double* out_ms) {
  spora_plugin_error_t* e = check_event("event_elapsed_ms", start);
  if (!e) e = check_event("event_elapsed_ms", end);
  if (e) return e;
  if (!out_ms) return null_argument("event_elapsed_ms");
  if (!start->recorded || !end->recorded)
    return error(SPORA_PLUGIN_INVALID_ARGUMENT, "event_elapsed_ms", "both events must have been recorded");
  *out_ms = (double)(end->when.tv_sec - start->when.tv_sec) * 1e3 +
            (double)(end->when.tv_nsec - start->when.tv_nsec) / 1e6;
  return NULL;
}

/* ======================================================================== */
/* Kernels: plan once (kernel_create), launch many times (kernel_launch)     */
/* ======================================================================== */

/* FILL IN (kernels): list every op you implement (names as in the host's op
 * registry: `spora_op_schema` or the cases under share/spora/conformance).
 * Ops you leave out still run: the host uses the op's decomposition into
 * ops you do have, or the cpu plugin with copies in and out. */
static const char* const kernel_names[] = {"add", NULL};

static const char* const* plugin_kernel_ops(void) { return kernel_names; }

/* A planned kernel: everything launch needs, immutable after create (the
 * host may launch one state from several threads). */
struct spora_kernel {
  uint32_t magic;
  size_t count; /* elements */
};
#define KERNEL_MAGIC 0x4b45524eu

static int dense_f32(const spora_tensor_desc_t* t) {
  return SPORA_STRUCT_HAS(t, spora_tensor_desc_t, strides) && t->dtype == SPORA_DTYPE_F32 && t->strides == NULL &&
         t->rank >= 0 && t->rank <= SPORA_MAX_RANK && (t->rank == 0 || t->dims != NULL);
}

static int same_shape(const spora_tensor_desc_t* a, const spora_tensor_desc_t* b) {
  int32_t i;
  if (a->rank != b->rank) return 0;
  for (i = 0; i < a->rank; ++i)
    if (a->dims[i] != b->dims[i]) return 0;
  return 1;
}

/* Plans `desc`. Answer SPORA_PLUGIN_UNIMPLEMENTED, saying what is missing,
 * for anything you do not handle: the host then decomposes or falls back.
 * This is where a real plugin builds its library primitives (cuBLAS plans,
 * compiled shaders) and sizes the workspace. */
static spora_plugin_error_t* plugin_kernel_create(int32_t device, const spora_kernel_desc_t* desc,
                                                  spora_kernel_t** out, size_t* out_workspace) {
  spora_kernel_t* k;
  size_t count = 1;
  int32_t i;
  spora_plugin_error_t* e = check_device("kernel_create", device);
  if (e) return e;
  if (!out || !out_workspace || !SPORA_STRUCT_HAS(desc, spora_kernel_desc_t, attrs) || !desc->op)
    return null_argument("kernel_create");
  if (strcmp(desc->op, "add") != 0) return error(SPORA_PLUGIN_UNIMPLEMENTED, "kernel_create", "no kernel for this op");
  /* FILL IN (kernels): dispatch on desc->op to your kernels' planners. The
   * host has already inferred output shapes and padded binary inputs to the
   * output's rank; broadcast dimensions have size 1. */
  if (desc->num_inputs != 2 || desc->num_outputs != 1 || !desc->inputs || !desc->outputs)
    return error(SPORA_PLUGIN_INVALID_ARGUMENT, "kernel_create", "add takes 2 inputs and 1 output");
  if (!dense_f32(&desc->inputs[0]) || !dense_f32(&desc->inputs[1]) || !dense_f32(&desc->outputs[0]))
    return error(SPORA_PLUGIN_UNIMPLEMENTED, "kernel_create", "add: only dense f32 tensors are supported");
  if (!same_shape(&desc->inputs[0], &desc->outputs[0]) || !same_shape(&desc->inputs[1], &desc->outputs[0]))
    return error(SPORA_PLUGIN_UNIMPLEMENTED, "kernel_create", "add: broadcasting is not supported");
  for (i = 0; i < desc->outputs[0].rank; ++i) {
    if (desc->outputs[0].dims[i] < 0) return error(SPORA_PLUGIN_INVALID_ARGUMENT, "kernel_create", "negative dimension");
    count *= (size_t)desc->outputs[0].dims[i];
  }
  k = (spora_kernel_t*)malloc(sizeof *k);
  if (!k) return error(SPORA_PLUGIN_OUT_OF_MEMORY, "kernel_create", "out of host memory");
  k->magic = KERNEL_MAGIC;
  k->count = count;
  *out = k;
  *out_workspace = 0;
  return NULL;
}

static spora_plugin_error_t* plugin_kernel_destroy(spora_kernel_t* k) {
  if (!k || k->magic != KERNEL_MAGIC)
    return error(SPORA_PLUGIN_INVALID_ARGUMENT, "kernel_destroy", "not a live kernel handle");
  k->magic = 0;
  free(k);
  return NULL;
}

/* Enqueues the planned kernel on `stream`. Here it runs at once. */
static spora_plugin_error_t* plugin_kernel_launch(spora_kernel_t* k, const spora_devptr_t* inputs,
                                                  const spora_devptr_t* outputs, spora_devptr_t workspace,
                                                  spora_stream_t* stream) {
  const float *a, *b;
  float* y;
  size_t i;
  spora_plugin_error_t* e = check_stream("kernel_launch", stream);
  (void)workspace;
  if (e) return e;
  if (!k || k->magic != KERNEL_MAGIC)
    return error(SPORA_PLUGIN_INVALID_ARGUMENT, "kernel_launch", "not a live kernel handle");
  if (!inputs || !outputs) return null_argument("kernel_launch");
  a = (const float*)inputs[0];
  b = (const float*)inputs[1];
  y = (float*)outputs[0];
  if (k->count && (!a || !b || !y)) return null_argument("kernel_launch");
  /* FILL IN (kernels): launch your kernel on the stream's queue. */
  for (i = 0; i < k->count; ++i) y[i] = a[i] + b[i];
  return NULL;
}

/* ======================================================================== */
/* The table, probe and entry                                               */
/* ======================================================================== */

/* The table functions this plugin implements, each the static function
 * plugin_<member> above. Every member not listed is NULL, "not implemented"
 * (pinned host memory, native stream handles, whole-graph compilation): add
 * X(host_alloc_pinned) X(host_free_pinned) once you define them, and so on. */
#define PLUGIN_DEVICE_FUNCTIONS(X)                                                              \
  X(initialize) X(device_count) X(device_properties) X(shutdown)                                \
  X(mem_alloc) X(mem_free) X(copy_h2d) X(copy_d2h) X(copy_d2d) X(memset)                        \
  X(copy_h2d_async) X(copy_d2h_async) X(copy_d2d_async) X(memset_async)                         \
  X(stream_create) X(stream_destroy) X(stream_synchronize) X(stream_query) X(stream_wait_event) \
  X(stream_add_callback) X(event_create) X(event_destroy) X(event_record) X(event_query)        \
  X(event_synchronize) X(event_elapsed_ms)                                                      \
  X(kernel_ops) X(kernel_create) X(kernel_destroy) X(kernel_launch)

static const spora_device_api_t device_api = SPORA_SDK_TABLE(spora_device_api_t, PLUGIN_DEVICE_FUNCTIONS);

/* Cheap and side-effect free: can this plugin run on this machine? */
SPORA_PLUGIN_EXPORT void spora_plugin_probe_v1(spora_probe_result_t* out) {
  /* FILL IN (driver): check that the driver library exists (dlopen it and
   * close it again) and that a device is present. If not, answer score 0 and
   * a reason with the fix, e.g. "libmydrv.so.1 not found; install the driver". */
  spora_sdk_probe_answer(out, 10, ""); /* higher wins when several files provide one name */
}

/* The version handshake: keep `host`, describe the plugin, return the table. */
SPORA_PLUGIN_EXPORT spora_plugin_error_t* spora_plugin_entry_v1(const spora_host_t* host, spora_plugin_info_t* out) {
  char why[SPORA_SDK_MESSAGE_MAX];
  int32_t code = spora_sdk_check_entry(host, out, PLUGIN_NAME, why, sizeof why);
  if (code) return error_text(code, why); /* "[name] ..." */
  g_host = host;
  /* The name must match the file name libspora-device-<name>.so. */
  spora_sdk_fill_info(out, SPORA_PLUGIN_KIND_DEVICE, PLUGIN_NAME, PLUGIN_VERSION, "Spora device plugin template (C99)",
                      &device_api);
  return NULL;
}
