/*
 * spora/plugin.h -- the pure-C contract between libspora and its plugins, v1.
 *
 * This is the only header a device or collective plugin needs from Spora.
 * It contains no C++ and depends only on <stddef.h> and <stdint.h>.
 *
 * Shape of the contract
 * ---------------------
 * A plugin is a shared object named libspora-device-<name>.so or
 * libspora-collective-<name>.so that exports:
 *
 *   spora_plugin_probe_v1  (optional)  cheap, side-effect free: "can I run
 *                                      here?" -> a score (0 = no) and a reason.
 *   spora_plugin_entry_v1  (required)  version handshake; returns the
 *                                      plugin's info and its root table.
 *
 * The "_v1" suffix is the ABI major. A breaking change adds "_v2" entry
 * points beside these; v1 stays loadable for as long as the host supports it.
 *
 * Versioning rules
 * ----------------
 *  - Every struct and table begins with `size_t struct_size`. The creator
 *    sets it to sizeof() of the struct it was compiled against. A reader
 *    checks "at least": a field is present iff its end offset is
 *    <= struct_size (see SPORA_STRUCT_HAS). Never compare for equality.
 *  - Minor versions only append fields at the end of structs and tables.
 *  - A NULL function pointer means "not implemented"; the host falls back or
 *    reports the feature as unsupported.
 *  - Optional features hang off typed extension chains (spora_ext_t).
 *  - The host accepts a plugin whose major equals its own and whose minor is
 *    >= the host's floor (spora_host_t.abi_minor_floor).
 *
 * Errors
 * ------
 * Fallible functions return `spora_plugin_error_t*`: NULL on success, else an
 * error object. An error object is self-describing: it carries its code,
 * message and its own destroy function, so it may be created by the plugin
 * (its own type) or through the host's error factory
 * (spora_host_services_t.error_create). Whoever receives an error owns it and
 * must release it exactly once with err->destroy(err). No C++ exception, and
 * no longjmp, may cross this boundary.
 *
 * Threads
 * -------
 * Unless a function says otherwise, the host may call any function from any
 * thread, concurrently; a plugin must make its tables thread-safe. Functions
 * documented "host thread" are only ever called from one thread at a time.
 *
 * Lifetime
 * --------
 * The host dlopens a plugin once per process and never unloads it. Nothing
 * may touch hardware (open drivers, create contexts, start threads) before
 * `initialize`; probe and entry must stay cheap and side-effect free.
 */
#ifndef SPORA_PLUGIN_H
#define SPORA_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Versions and conventions                                                 */
/* ------------------------------------------------------------------------ */

#define SPORA_PLUGIN_ABI_MAJOR 1
#define SPORA_PLUGIN_ABI_MINOR 2 /* 1.1: device memory statistics (memory_stats); 1.2: stream capture */

/* Symbols a plugin exports (as plain C names, default visibility). */
#define SPORA_PLUGIN_PROBE_SYMBOL "spora_plugin_probe_v1"
#define SPORA_PLUGIN_ENTRY_SYMBOL "spora_plugin_entry_v1"

#if defined(_WIN32)
#define SPORA_PLUGIN_EXPORT __declspec(dllexport)
#else
#define SPORA_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* True when `ptr`, a struct whose struct_size the creator set, contains
 * `field`. Use before reading any field added after the struct's first
 * version. */
#define SPORA_STRUCT_HAS(ptr, type, field)                                  \
  ((ptr) != NULL && (ptr)->struct_size >= offsetof(type, field) + sizeof(((type*)0)->field))

/* ------------------------------------------------------------------------ */
/* Basic enums                                                              */
/* ------------------------------------------------------------------------ */

/* Element types. Values are part of the ABI: append only. */
#ifndef SPORA_DTYPE_T_DEFINED /* same definition as in spora/spora.h */
#define SPORA_DTYPE_T_DEFINED
typedef enum spora_dtype {
  SPORA_DTYPE_INVALID = 0,
  SPORA_DTYPE_F32 = 1,
  SPORA_DTYPE_F64 = 2,
  SPORA_DTYPE_F16 = 3,
  SPORA_DTYPE_BF16 = 4,
  SPORA_DTYPE_I32 = 5,
  SPORA_DTYPE_I64 = 6,
  SPORA_DTYPE_U8 = 7,
  SPORA_DTYPE_BOOL = 8
} spora_dtype_t;
#endif

/* Error codes carried by spora_plugin_error_t. Append only. */
typedef enum spora_plugin_code {
  SPORA_PLUGIN_OK = 0,
  SPORA_PLUGIN_INVALID_ARGUMENT = 1, /* caller passed something malformed */
  SPORA_PLUGIN_NOT_FOUND = 2,        /* unknown device, handle or key */
  SPORA_PLUGIN_UNAVAILABLE = 3,      /* no driver / no device / lost device: after initialize, a device
                                        call returning it means the device failed (CUDA sticky error);
                                        the host stops using the device and names this reason */
  SPORA_PLUGIN_UNIMPLEMENTED = 4,    /* op, dtype or feature not supported */
  SPORA_PLUGIN_OUT_OF_MEMORY = 5,
  SPORA_PLUGIN_TIMEOUT = 6,
  SPORA_PLUGIN_ABORTED = 7,          /* communicator aborted, stream poisoned */
  SPORA_PLUGIN_INTERNAL = 8
} spora_plugin_code_t;

typedef enum spora_plugin_kind {
  SPORA_PLUGIN_KIND_DEVICE = 1,
  SPORA_PLUGIN_KIND_COLLECTIVE = 2
} spora_plugin_kind_t;

typedef enum spora_log_level {
  SPORA_LOG_TRACE = 0,
  SPORA_LOG_DEBUG = 1,
  SPORA_LOG_INFO = 2,
  SPORA_LOG_WARN = 3,
  SPORA_LOG_ERROR = 4
} spora_log_level_t;

/* ------------------------------------------------------------------------ */
/* Errors                                                                   */
/* ------------------------------------------------------------------------ */

/* A self-describing error object. The creator allocates it and fills every
 * field; the receiver reads `code` and `message` and releases it with
 * `destroy(self)` exactly once. `message` stays valid until then. */
typedef struct spora_plugin_error {
  size_t struct_size;
  int32_t code;         /* spora_plugin_code_t */
  const char* message;  /* UTF-8, never NULL; start it with "[op-or-part]" */
  void (*destroy)(struct spora_plugin_error* self);
} spora_plugin_error_t;

/* ------------------------------------------------------------------------ */
/* Extension chains                                                         */
/* ------------------------------------------------------------------------ */

/* Header of every extension struct. `type` is a SPORA_EXT_* value (or a
 * vendor's value >= 0x10000); a reader walks `next` and skips unknown types.
 * Extension structs are owned by whoever owns the struct they hang off. */
typedef struct spora_ext {
  size_t struct_size;
  uint32_t type;
  const struct spora_ext* next;
} spora_ext_t;

#define SPORA_EXT_VENDOR_BASE 0x10000u

/* On spora_collective_api_t.extensions: the plugin moves device memory of
 * the device plugin named `device_plugin` ("cuda" for NCCL), not host memory.
 * comm_init's `device` is then an index of that plugin's devices, the
 * buffers of every call are its device addresses, and `native_stream` its
 * stream_native_handle. Without this extension a collective plugin moves
 * host memory and the host stages device tensors through it. */
#define SPORA_EXT_COLLECTIVE_DEVICE 1u
typedef struct spora_ext_collective_device {
  spora_ext_t header; /* type = SPORA_EXT_COLLECTIVE_DEVICE */
  const char* device_plugin;
} spora_ext_collective_device_t;

/* ------------------------------------------------------------------------ */
/* Host services: what the host offers every plugin                          */
/* ------------------------------------------------------------------------ */

/* Table filled by the host, valid for the life of the process. All
 * functions are thread-safe. `ctx` must be passed back unchanged. */
typedef struct spora_host_services {
  size_t struct_size;
  void* ctx;

  /* Log sink. Plugins never write to stdout/stderr themselves. `plugin` is
   * the plugin's name; `message` need not end with a newline. */
  void (*log)(void* ctx, int32_t level, const char* plugin, const char* message);

  /* Error factory: returns a new error object (never NULL; on allocation
   * failure a static out-of-memory error whose destroy is a no-op). The
   * plugin may return it from any table function; the receiver frees it. */
  spora_plugin_error_t* (*error_create)(void* ctx, int32_t code, const char* message);

  /* Config lookup, for keys such as "cuda.allocator" (read from the host's
   * options and SPORA_* environment). Copies the value, NUL-terminated and
   * truncated to `capacity`, into `buf` and returns its full length; returns
   * -1 if the key is not set. `buf` may be NULL when `capacity` is 0. */
  int64_t (*config_get)(void* ctx, const char* key, char* buf, size_t capacity);

  /* Key-value store shared by all ranks of a job, for collective
   * bootstrap (e.g. exchanging unique ids). `put` overwrites. `get` blocks
   * until the key exists or `timeout_ms` passes (SPORA_PLUGIN_TIMEOUT);
   * it copies at most `capacity` bytes and stores the full length in
   * `*out_size`. */
  spora_plugin_error_t* (*kv_put)(void* ctx, const char* key, const void* value, size_t size);
  spora_plugin_error_t* (*kv_get)(void* ctx, const char* key, int64_t timeout_ms, void* buf,
                                  size_t capacity, size_t* out_size);

  /* Trace hooks: spans shown on the host's timeline. `trace_begin` returns
   * an id to pass to `trace_end`; both are cheap no-ops when tracing is off. */
  uint64_t (*trace_begin)(void* ctx, const char* category, const char* name);
  void (*trace_end)(void* ctx, uint64_t span_id);
} spora_host_services_t;

/* What the host tells a plugin at entry. */
typedef struct spora_host {
  size_t struct_size;
  const spora_ext_t* extensions;
  uint32_t abi_major;        /* == SPORA_PLUGIN_ABI_MAJOR of the host */
  uint32_t abi_minor;        /* host's minor */
  uint32_t abi_minor_floor;  /* oldest plugin minor the host accepts */
  const char* host_version;  /* libspora version string, e.g. "0.1.0" */
  const spora_host_services_t* services;
} spora_host_t;

/* ------------------------------------------------------------------------ */
/* Probe and entry                                                          */
/* ------------------------------------------------------------------------ */

/* Filled by spora_plugin_probe_v1. The host zero-fills and sets
 * struct_size before the call. */
typedef struct spora_probe_result {
  size_t struct_size;
  int32_t score;     /* 0 = cannot run here; higher wins among candidates */
  char reason[256];  /* when score == 0: why, and how to fix it */
} spora_probe_result_t;

/* Optional. Must not allocate long-lived resources, start threads or touch
 * devices; may dlopen a driver library to check it exists. Host thread. */
typedef void (*spora_plugin_probe_fn)(spora_probe_result_t* out);

/* What the plugin returns from its entry. The host zero-fills it and sets
 * struct_size; the plugin fills what it knows. All pointers must stay valid
 * for the life of the process (static storage is the norm). */
typedef struct spora_plugin_info {
  size_t struct_size;
  uint32_t abi_major;        /* SPORA_PLUGIN_ABI_MAJOR the plugin was built with */
  uint32_t abi_minor;        /* SPORA_PLUGIN_ABI_MINOR the plugin was built with */
  int32_t kind;              /* spora_plugin_kind_t */
  const char* name;          /* "cpu", "cuda", "mpi": the name users select */
  const char* version;       /* plugin's own version */
  const char* build;         /* free-form build metadata (compiler, libs) */
  /* Root table: a spora_device_api_t* for devices, a
   * spora_collective_api_t* for collectives. */
  const void* api;
  const spora_ext_t* extensions;
} spora_plugin_info_t;

/* Required. Checks the host's version, keeps `host` (valid for the life of
 * the process) and fills `out`. Returns NULL or an error (e.g. "host too
 * old"). No hardware access. Host thread. */
typedef spora_plugin_error_t* (*spora_plugin_entry_fn)(const spora_host_t* host,
                                                       spora_plugin_info_t* out);

/* ------------------------------------------------------------------------ */
/* Tensors, attributes and kernel descriptors                               */
/* ------------------------------------------------------------------------ */

#define SPORA_MAX_RANK 8

/* A tensor's logical description. Memory is dense row-major unless
 * `strides` is non-NULL (strides in elements, may be 0 for broadcast). */
typedef struct spora_tensor_desc {
  size_t struct_size;
  int32_t dtype;          /* spora_dtype_t */
  int32_t rank;           /* 0..SPORA_MAX_RANK */
  const int64_t* dims;    /* rank entries; NULL when rank == 0 */
  const int64_t* strides; /* NULL = contiguous row-major */
} spora_tensor_desc_t;

typedef enum spora_attr_type {
  SPORA_ATTR_INT = 1,    /* i */
  SPORA_ATTR_FLOAT = 2,  /* f */
  SPORA_ATTR_BOOL = 3,   /* i (0 or 1) */
  SPORA_ATTR_INTS = 4,   /* ints[0..count) */
  SPORA_ATTR_FLOATS = 5, /* floats[0..count) */
  SPORA_ATTR_STRING = 6  /* s, NUL-terminated */
} spora_attr_type_t;

/* One named, typed attribute of an op. Only the member named by `type` is
 * meaningful. */
typedef struct spora_attr {
  size_t struct_size;
  const char* name;
  int32_t type; /* spora_attr_type_t */
  int64_t i;
  double f;
  const int64_t* ints;
  const double* floats;
  size_t count;
  const char* s;
} spora_attr_t;

/* Everything a plugin needs to plan one op: its name (as in the host's op
 * registry, e.g. "matmul"), the inputs' and outputs' descriptions (output
 * shapes were already inferred by the host) and the attributes, with
 * defaults filled in by the host. Borrowed for the duration of the call. */
typedef struct spora_kernel_desc {
  size_t struct_size;
  const char* op;
  size_t num_inputs;
  const spora_tensor_desc_t* inputs;
  size_t num_outputs;
  const spora_tensor_desc_t* outputs;
  size_t num_attrs;
  const spora_attr_t* attrs;
} spora_kernel_desc_t;

/* ------------------------------------------------------------------------ */
/* Device plugins                                                           */
/* ------------------------------------------------------------------------ */

/* Opaque plugin-defined objects. */
typedef struct spora_stream spora_stream_t;
typedef struct spora_event spora_event_t;
typedef struct spora_kernel spora_kernel_t;
typedef struct spora_graph_exec spora_graph_exec_t;
typedef struct spora_captured spora_captured_t; /* ABI 1.2: recorded stream work */

/* A device address. It is only meaningful to the plugin that returned it;
 * the host never dereferences it, but may add byte offsets within an
 * allocation (sub-buffers). */
typedef void* spora_devptr_t;

/* Properties of one device. The host zero-fills and sets struct_size; the
 * plugin fills what applies. Strings are static or owned by the plugin for
 * the life of the process. */
typedef struct spora_device_properties {
  size_t struct_size;
  const char* name;          /* "Simulated accelerator", "NVIDIA H100" */
  const char* vendor;
  const char* arch;          /* "x86_64-avx512", "sm_90", "gfx90a" */
  uint64_t memory_bytes;     /* total device memory; 0 = unknown */
  int32_t compute_units;     /* cores, SMs, CUs */
  int32_t unified_memory;    /* 1 when device addresses are host pointers */
  int32_t max_streams;       /* 0 = unlimited */
  uint32_t alignment;        /* minimum allocation alignment in bytes */
} spora_device_properties_t;

/* Memory statistics of one device (ABI 1.1), the figures behind
 * memory_allocated / max_memory_allocated and memory_reserved /
 * max_memory_reserved. The host zero-fills it and sets struct_size; the
 * plugin fills the fields that struct_size covers. Bytes, per device,
 * counted since initialize (peaks: since the last reset_peak_memory_stats). */
typedef struct spora_memory_stats {
  size_t struct_size;
  uint64_t allocated_bytes;      /* sizes requested by live mem_alloc allocations, summed */
  uint64_t peak_allocated_bytes; /* highest allocated_bytes */
  uint64_t reserved_bytes;       /* device memory the plugin holds for mem_alloc: live allocations, their
                                    rounding and freed blocks it caches for reuse (>= allocated_bytes) */
  uint64_t peak_reserved_bytes;  /* highest reserved_bytes */
} spora_memory_stats_t;

/* Host callback run in stream order, on a plugin-owned thread, after all
 * earlier work in the stream finished. `status` is NULL if that work
 * succeeded, else a borrowed error describing the failure (do not destroy). It
 * must not call back into the same stream synchronously. The thread is not
 * the one that runs kernels and may be shared by all streams of the device
 * (CUDA runs host functions on one runtime thread): a callback must not
 * block on another stream's callbacks. Once the device has failed (a sticky
 * error such as an illegal address), a plugin may skip callbacks queued
 * behind the failure: CUDA never runs them. The host therefore never waits
 * for a callback alone; it also watches stream_query or a timeout. */
typedef void (*spora_host_callback_fn)(void* user_data, const spora_plugin_error_t* status);

/* Root table of a device plugin. Functions marked (optional) may be NULL.
 * `device` arguments are indices in [0, device_count). Pointers passed in are
 * borrowed for the duration of the call unless stated otherwise. */
typedef struct spora_device_api {
  size_t struct_size;
  const spora_ext_t* extensions;

  /* ---- lifecycle ---- */

  /* Opens drivers and devices. Called once, before any other table
   * function, from the host thread. On error, the host records the message
   * as the reason the plugin is unavailable and never calls it again. */
  spora_plugin_error_t* (*initialize)(void);
  /* Number of devices; call after initialize. */
  spora_plugin_error_t* (*device_count)(int32_t* out_count);
  spora_plugin_error_t* (*device_properties)(int32_t device, spora_device_properties_t* out);

  /* ---- memory ---- */

  /* Allocates `size` bytes (size 0 returns a unique non-NULL address) aligned
   * to at least properties.alignment. The returned address is freed with
   * mem_free. Thread-safe. */
  spora_plugin_error_t* (*mem_alloc)(int32_t device, size_t size, spora_devptr_t* out);
  /* Frees after all work already enqueued on any stream that uses it
   * completes (the host guarantees nothing new is enqueued). NULL is a no-op. */
  spora_plugin_error_t* (*mem_free)(int32_t device, spora_devptr_t ptr);
  /* (optional) Page-locked ("pinned") host memory. Asynchronous copies from
   * and to it are ordered by the stream alone (see below), so the host may
   * fill it from a host callback queued before the copy. A plugin whose
   * runtime stages or reads pageable memory early must provide these; the
   * host then allocates every host buffer that takes part in stream-ordered
   * copies here. Without them the host orders such copies itself
   * (synchronous copies). */
  spora_plugin_error_t* (*host_alloc_pinned)(size_t size, void** out);
  spora_plugin_error_t* (*host_free_pinned)(void* ptr);

  /* Synchronous copies: return when the data has arrived. They are ordered
   * after all work previously enqueued on the device's streams that writes
   * or reads the buffers (implementations may simply synchronize the
   * device). */
  spora_plugin_error_t* (*copy_h2d)(int32_t device, spora_devptr_t dst, const void* src, size_t size);
  spora_plugin_error_t* (*copy_d2h)(int32_t device, void* dst, spora_devptr_t src, size_t size);
  spora_plugin_error_t* (*copy_d2d)(int32_t device, spora_devptr_t dst, spora_devptr_t src, size_t size);
  spora_plugin_error_t* (*memset)(int32_t device, spora_devptr_t dst, int32_t byte, size_t size);

  /* Asynchronous copies: enqueue on `stream` and return. Host memory must
   * stay valid (and, for d2h, unread) until the stream reaches the copy.
   *
   * Ordering contract for the host side of a copy (CUDA's, which every
   * plugin may have):
   * - memory from host_alloc_pinned is read (h2d) or written (d2h) when the
   *   stream reaches the copy, after all earlier work on the stream,
   *   including host callbacks: a callback may produce the bytes an h2d
   *   copy queued after it sends, or consume what a d2h copy before it
   *   wrote. The conformance kit checks this on every plugin that has
   *   pinned memory.
   * - any other (pageable) host memory may be read by an h2d copy at any
   *   time from the call until the stream reaches it: cudaMemcpyAsync reads
   *   it during the call. The bytes must be final before the call and stay
   *   unchanged until the stream passes the copy; work queued earlier on
   *   the stream (a callback) must not be what writes them. A d2h copy to
   *   pageable memory may block the caller until the stream reaches it and
   *   it completes. */
  spora_plugin_error_t* (*copy_h2d_async)(spora_stream_t* stream, spora_devptr_t dst, const void* src,
                                          size_t size);
  spora_plugin_error_t* (*copy_d2h_async)(spora_stream_t* stream, void* dst, spora_devptr_t src,
                                          size_t size);
  spora_plugin_error_t* (*copy_d2d_async)(spora_stream_t* stream, spora_devptr_t dst, spora_devptr_t src,
                                          size_t size);
  spora_plugin_error_t* (*memset_async)(spora_stream_t* stream, spora_devptr_t dst, int32_t byte,
                                        size_t size);

  /* ---- streams: in-order queues of work ---- */

  spora_plugin_error_t* (*stream_create)(int32_t device, spora_stream_t** out);
  /* Waits for enqueued work, then releases the stream. */
  spora_plugin_error_t* (*stream_destroy)(spora_stream_t* stream);
  /* Blocks until all enqueued work finished; returns the first error any of
   * it raised since the last synchronize (and clears it). */
  spora_plugin_error_t* (*stream_synchronize)(spora_stream_t* stream);
  /* *out_done = 1 when all enqueued work finished. Never blocks. */
  spora_plugin_error_t* (*stream_query)(spora_stream_t* stream, int32_t* out_done);
  /* Future work on `stream` waits until `event`'s recorded point is reached. */
  spora_plugin_error_t* (*stream_wait_event)(spora_stream_t* stream, spora_event_t* event);
  /* Enqueues `fn(user_data, status)`; see spora_host_callback_fn. */
  spora_plugin_error_t* (*stream_add_callback)(spora_stream_t* stream, spora_host_callback_fn fn,
                                               void* user_data);
  /* (optional) The native handle (cudaStream_t, hipStream_t,
   * ze_command_list_handle_t) for collective plugins on the same hardware. */
  spora_plugin_error_t* (*stream_native_handle)(spora_stream_t* stream, void** out);

  /* ---- events: points in a stream ---- */

  spora_plugin_error_t* (*event_create)(int32_t device, spora_event_t** out);
  spora_plugin_error_t* (*event_destroy)(spora_event_t* event);
  /* Captures the current end of `stream`; re-recording moves the point. */
  spora_plugin_error_t* (*event_record)(spora_event_t* event, spora_stream_t* stream);
  /* *out_done = 1 when reached (an event never recorded counts as reached). */
  spora_plugin_error_t* (*event_query)(spora_event_t* event, int32_t* out_done);
  spora_plugin_error_t* (*event_synchronize)(spora_event_t* event);
  /* Milliseconds between two reached events on the same device. */
  spora_plugin_error_t* (*event_elapsed_ms)(spora_event_t* start, spora_event_t* end, double* out_ms);

  /* ---- kernels (optional): plan once, launch many times ---- */

  /* NUL-terminated array of the op names this plugin has kernels for; the
   * scheduler asks it before placing work. Static storage. */
  const char* const* (*kernel_ops)(void);
  /* Plans `desc` on `device`: chooses the implementation, creates library
   * primitives and sizes the workspace (bytes the host must pass to every
   * launch, *out_workspace; 0 = none). Returns SPORA_PLUGIN_UNIMPLEMENTED
   * when the op, dtype or attribute combination is not supported, with a
   * message saying which; the host then decomposes or falls back. The
   * state is immutable and may be launched from several threads. */
  spora_plugin_error_t* (*kernel_create)(int32_t device, const spora_kernel_desc_t* desc,
                                         spora_kernel_t** out, size_t* out_workspace);
  spora_plugin_error_t* (*kernel_destroy)(spora_kernel_t* kernel);
  /* Enqueues the kernel on `stream`. `inputs`/`outputs` follow the order of
   * the descriptor; `workspace` has the planned size (NULL if 0). Outputs
   * never alias inputs unless the op's schema says it is in-place. Errors
   * found while running are reported by the stream (synchronize/callback). */
  spora_plugin_error_t* (*kernel_launch)(spora_kernel_t* kernel, const spora_devptr_t* inputs,
                                         const spora_devptr_t* outputs, spora_devptr_t workspace,
                                         spora_stream_t* stream);

  /* ---- whole graphs (optional): the on-device execution path ---- */

  /* Compiles a serialized subgraph (Spora IR JSON, `size` bytes) for
   * `device`. `options` is a JSON object or NULL. */
  spora_plugin_error_t* (*graph_compile)(int32_t device, const char* ir_json, size_t size,
                                         const char* options, spora_graph_exec_t** out);
  spora_plugin_error_t* (*graph_destroy)(spora_graph_exec_t* exe);
  /* Enqueues one run; buffers follow the graph's parameter/result order. */
  spora_plugin_error_t* (*graph_execute)(spora_graph_exec_t* exe, const spora_devptr_t* inputs,
                                         size_t num_inputs, const spora_devptr_t* outputs,
                                         size_t num_outputs, spora_stream_t* stream);

  /* Releases everything initialize created. Called at most once, at process
   * exit, from the host thread; may be NULL. */
  void (*shutdown)(void);

  /* ---- ABI 1.1: read only when struct_size covers them (SPORA_STRUCT_HAS);
   * a table built against 1.0 ends at shutdown ---- */

  /* (optional) Memory statistics of `device` (see spora_memory_stats_t).
   * Cheap (counters, no device synchronization); any thread. */
  spora_plugin_error_t* (*memory_stats)(int32_t device, spora_memory_stats_t* out);
  /* (optional; with memory_stats) Starts new peaks: peak_allocated_bytes and
   * peak_reserved_bytes become the current allocated and reserved bytes. */
  spora_plugin_error_t* (*reset_peak_memory_stats)(int32_t device);

  /* ---- ABI 1.2 (optional: all four or none): stream capture, CUDA graphs'
   * model. The host records a run of launches once and replays it with one
   * call per step, paying the launch cost of each kernel once.
   *
   * capture_begin gives a recording stream of `device` (*out_stream): the
   * kernel launches, async d2d copies and async memsets enqueued on it are
   * recorded, not run, with the addresses they were given, until
   * capture_end. It is not a stream of the device's work (the allocator need
   * not order anything with it) and is valid until capture_end. While it
   * records, a call from the recording thread that would wait for the device
   * or allocate/free device memory (stream_synchronize, event_synchronize,
   * synchronous copies and memset, mem_alloc, mem_free) and work the plugin
   * cannot record (host callbacks, events, copies from or to pageable
   * memory) fail with an error and break the capture; the plugin may break
   * it for other reasons (a kernel that must allocate). */
  spora_plugin_error_t* (*capture_begin)(int32_t device, spora_stream_t** out_stream);
  /* Ends the capture of the recording stream `stream` (which is gone
   * afterwards, whatever the outcome): *out is the recorded work, ready to
   * launch, or the call fails with the reason the capture broke (*out NULL). */
  spora_plugin_error_t* (*capture_end)(spora_stream_t* stream, spora_captured_t** out);
  /* Enqueues one replay of `captured` on `stream` (of the same device): the
   * recorded work, in order, on the addresses recorded -- the host keeps
   * that memory allocated while `captured` lives, and ordered like any
   * other work on `stream`. */
  spora_plugin_error_t* (*captured_launch)(spora_captured_t* captured, spora_stream_t* stream);
  /* Frees `captured`; replays already enqueued still run. */
  spora_plugin_error_t* (*captured_destroy)(spora_captured_t* captured);
} spora_device_api_t;

/* ------------------------------------------------------------------------ */
/* Collective plugins                                                       */
/* ------------------------------------------------------------------------ */

typedef struct spora_comm spora_comm_t;

/* Opaque bootstrap token, created on one rank and shared with the others
 * (through the host's kv store) before comm_init. */
typedef struct spora_comm_id {
  uint8_t bytes[128];
} spora_comm_id_t;

#ifndef SPORA_REDUCE_OP_T_DEFINED /* same definition as in spora/spora.h */
#define SPORA_REDUCE_OP_T_DEFINED
typedef enum spora_reduce_op {
  SPORA_REDUCE_SUM = 1,
  SPORA_REDUCE_PROD = 2,
  SPORA_REDUCE_MAX = 3,
  SPORA_REDUCE_MIN = 4,
  SPORA_REDUCE_AVG = 5 /* sum divided by size (integers truncate toward zero) */
} spora_reduce_op_t;
#endif

/* Every data-moving call below: buffers are device addresses of the device
 * the communicator was created for (host pointers for a host transport);
 * `native_stream` is the device plugin's native stream
 * (spora_device_api_t.stream_native_handle) or NULL to run synchronously;
 * `timeout_ms` < 0 waits forever, otherwise the call (or the enqueued work)
 * fails with SPORA_PLUGIN_TIMEOUT and the communicator must be aborted.
 * Counts are in elements of `dtype`. Calls on one communicator must be made
 * in the same order on every rank, from one thread at a time. */
typedef struct spora_collective_api {
  size_t struct_size;
  const spora_ext_t* extensions;

  /* Opens the transport. Host thread, once, before anything else. */
  spora_plugin_error_t* (*initialize)(void);
  /* Creates a new bootstrap token (on one rank). */
  spora_plugin_error_t* (*get_unique_id)(spora_comm_id_t* out);
  /* Collective over all `size` ranks; `device` is the device index the
   * communicator's buffers live on (-1 for host memory). */
  spora_plugin_error_t* (*comm_init)(const spora_comm_id_t* id, int32_t rank, int32_t size,
                                     int32_t device, spora_comm_t** out);
  /* Collective: ranks with the same `color` form a new communicator, ranked
   * by `key`; color < 0 returns *out = NULL. */
  spora_plugin_error_t* (*comm_split)(spora_comm_t* comm, int32_t color, int32_t key,
                                      spora_comm_t** out);
  /* Makes every pending and future call on `comm` fail promptly; safe from
   * any thread, also while another thread is blocked in the communicator. */
  spora_plugin_error_t* (*comm_abort)(spora_comm_t* comm);
  spora_plugin_error_t* (*comm_destroy)(spora_comm_t* comm);
  /* Non-blocking check for an asynchronous failure (peer lost, timeout):
   * *out is NULL if healthy, else a new error owned by the caller. */
  spora_plugin_error_t* (*comm_async_error)(spora_comm_t* comm, spora_plugin_error_t** out);
  spora_plugin_error_t* (*comm_rank)(spora_comm_t* comm, int32_t* out_rank, int32_t* out_size);

  spora_plugin_error_t* (*all_reduce)(spora_comm_t* comm, const void* send, void* recv, size_t count,
                                      int32_t dtype, int32_t op, void* native_stream, int64_t timeout_ms);
  /* recv holds size * count elements, rank-major. */
  spora_plugin_error_t* (*all_gather)(spora_comm_t* comm, const void* send, void* recv, size_t count,
                                      int32_t dtype, void* native_stream, int64_t timeout_ms);
  /* send holds size * recv_count elements; rank r receives block r reduced. */
  spora_plugin_error_t* (*reduce_scatter)(spora_comm_t* comm, const void* send, void* recv,
                                          size_t recv_count, int32_t dtype, int32_t op,
                                          void* native_stream, int64_t timeout_ms);
  spora_plugin_error_t* (*broadcast)(spora_comm_t* comm, const void* send, void* recv, size_t count,
                                     int32_t dtype, int32_t root, void* native_stream, int64_t timeout_ms);
  /* send and recv hold size * count elements; block j of send goes to rank j. */
  spora_plugin_error_t* (*all_to_all)(spora_comm_t* comm, const void* send, void* recv, size_t count,
                                      int32_t dtype, void* native_stream, int64_t timeout_ms);
  spora_plugin_error_t* (*send)(spora_comm_t* comm, const void* buf, size_t count, int32_t dtype,
                                int32_t peer, void* native_stream, int64_t timeout_ms);
  spora_plugin_error_t* (*recv)(spora_comm_t* comm, void* buf, size_t count, int32_t dtype, int32_t peer,
                                void* native_stream, int64_t timeout_ms);
  spora_plugin_error_t* (*barrier)(spora_comm_t* comm, void* native_stream, int64_t timeout_ms);

  /* Host thread, at most once, at process exit; may be NULL. */
  void (*shutdown)(void);
} spora_collective_api_t;

/* ------------------------------------------------------------------------ */
/* Exported entry points (declarations for plugin authors)                  */
/* ------------------------------------------------------------------------ */

SPORA_PLUGIN_EXPORT void spora_plugin_probe_v1(spora_probe_result_t* out);
SPORA_PLUGIN_EXPORT spora_plugin_error_t* spora_plugin_entry_v1(const spora_host_t* host,
                                                                spora_plugin_info_t* out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SPORA_PLUGIN_H */
