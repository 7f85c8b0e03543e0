/*
 * spora/spora.h -- Spora's public C API (libspora.so).
 *
 * Conventions
 * -----------
 *  - Every function returns spora_status_t; results come back through
 *    out-parameters, which are written only on success.
 *  - On failure, spora_last_error() returns a message for the calling thread,
 *    e.g. "[matmul] shapes (2,3) and (4,5) do not contract". The message stays
 *    valid until the next failing call on the same thread.
 *  - Handles are opaque. Objects returned through `**out` are owned by the
 *    caller and released with the matching *_free function. Objects returned
 *    as borrowed (documented per function) must not be freed.
 *  - Devices and plugins are process-wide: once a plugin is loaded it is never
 *    unloaded, so a spora_device_t* stays valid for the life of the process,
 *    and tensors may outlive the context that found their device.
 *  - Thread safety: all functions may be called from any thread. A single
 *    spora_attrs_t must not be modified concurrently.
 *  - No function aborts on bad input: NULL handles, wrong dtypes, bad shapes
 *    and unknown names all return an error status.
 */
#ifndef SPORA_SPORA_H
#define SPORA_SPORA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define SPORA_API __declspec(dllimport)
#else
#define SPORA_API __attribute__((visibility("default")))
#endif

#define SPORA_VERSION_MAJOR 0
#define SPORA_VERSION_MINOR 1
#define SPORA_VERSION_PATCH 0

/* ------------------------------------------------------------------------ */
/* Status and errors                                                        */
/* ------------------------------------------------------------------------ */

typedef int32_t spora_status_t;
enum {
  SPORA_OK = 0,
  SPORA_ERROR_INVALID_ARGUMENT = 1, /* bad handle, shape, dtype, attribute */
  SPORA_ERROR_NOT_FOUND = 2,        /* unknown op, device, plugin or file */
  SPORA_ERROR_UNAVAILABLE = 3,      /* backend could not be loaded or has no device */
  SPORA_ERROR_UNIMPLEMENTED = 4,    /* op or dtype not supported by a backend */
  SPORA_ERROR_OUT_OF_MEMORY = 5,
  SPORA_ERROR_TIMEOUT = 6,
  SPORA_ERROR_ABORTED = 7,
  SPORA_ERROR_INTERNAL = 8,
  SPORA_ERROR_IO = 9
};

/* The calling thread's last error message ("" if none). Never NULL. */
SPORA_API const char* spora_last_error(void);
/* A static name for a status code, e.g. "invalid argument". Never NULL. */
SPORA_API const char* spora_status_string(spora_status_t status);
SPORA_API spora_status_t spora_version(int32_t* major, int32_t* minor, int32_t* patch);

/* ------------------------------------------------------------------------ */
/* Element types (values shared with spora/plugin.h)                        */
/* ------------------------------------------------------------------------ */

#ifndef SPORA_DTYPE_T_DEFINED
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

/* Size of one element in bytes (0 for SPORA_DTYPE_INVALID/unknown). */
SPORA_API size_t spora_dtype_size(spora_dtype_t dtype);
/* Short name: "f32", "f64", ...; "invalid" for unknown values. */
SPORA_API const char* spora_dtype_name(spora_dtype_t dtype);

/* ------------------------------------------------------------------------ */
/* Context, plugins, devices                                                */
/* ------------------------------------------------------------------------ */

typedef struct spora_context spora_context_t;
typedef struct spora_plugin spora_plugin_t;
typedef struct spora_device spora_device_t;

/* Creates a context. Plugin discovery is lazy: it happens on the first
 * plugin or device query, searching, in order, the paths added with
 * spora_context_add_plugin_path, then SPORA_PLUGIN_PATH (':'-separated), then
 * <directory of libspora.so>/spora/plugins. */
SPORA_API spora_status_t spora_context_create(spora_context_t** out);
SPORA_API spora_status_t spora_context_free(spora_context_t* ctx);
/* Adds a plugin file or a directory of plugins to search first. Only takes
 * effect before discovery (the first query); afterwards returns
 * SPORA_ERROR_INVALID_ARGUMENT. */
SPORA_API spora_status_t spora_context_add_plugin_path(spora_context_t* ctx, const char* path);

/* Process-wide options that change how kernels are planned; they apply to
 * kernels planned after the change (eager kernels already cached and
 * compiled executables keep theirs). Unknown keys and values are
 * SPORA_ERROR_INVALID_ARGUMENT. Keys:
 *   "matmul_precision": "highest" (default; f32 matmul, linear, linear_act
 *   and linear_add_act multiply in full FP32), "high" (a device may use
 *   TF32), "medium" (a device may use bf16 or TF32). PyTorch's
 *   torch.set_float32_matmul_precision. The core passes it to kernels as the
 *   attribute "matmul_precision" when it is not "highest".
 *   "conv_precision": "highest" (default; f32 conv2d, its fused forms
 *   conv2d_bias/_act/_add_act, conv2d_grad_input, conv2d_grad_weight and
 *   conv2d_transpose multiply in full FP32), "high" (a device may use TF32).
 *   PyTorch's torch.backends.cudnn.allow_tf32 (which PyTorch enables by
 *   default; Spora does not). Passed as the attribute "conv_precision" when
 *   it is not "highest".
 * spora_get_option's `*out` is a static string. */
SPORA_API spora_status_t spora_set_option(const char* key, const char* value);
SPORA_API spora_status_t spora_get_option(const char* key, const char** out);

/* Every plugin candidate found, usable or not. `*out` is borrowed. */
SPORA_API spora_status_t spora_plugin_count(spora_context_t* ctx, size_t* out);
SPORA_API spora_status_t spora_plugin_get(spora_context_t* ctx, size_t index, spora_plugin_t** out);
/* Describes a plugin. Every out-parameter may be NULL. Strings are borrowed
 * and live as long as the process. `kind` is "device" or "collective" (from
 * the plugin, or from its file name when it never loaded; "unknown" if
 * neither says); `available` is 1 when the plugin loaded and initialised,
 * else 0 and `reason` says why. Asking for `available` or `reason`
 * initialises the plugin if that has not happened yet. */
SPORA_API spora_status_t spora_plugin_describe(const spora_plugin_t* plugin, const char** name,
                                               const char** kind, const char** path,
                                               const char** version, int32_t* available,
                                               const char** reason);

/* Devices of every usable device plugin. `*out` is borrowed. */
SPORA_API spora_status_t spora_device_count(spora_context_t* ctx, size_t* out);
SPORA_API spora_status_t spora_device_get(spora_context_t* ctx, size_t index, spora_device_t** out);
/* Finds "cpu", "cpu:0", "sim:1", ... A name without ":N" means device 0.
 * Unknown backends return SPORA_ERROR_NOT_FOUND; a backend whose plugin
 * failed returns SPORA_ERROR_UNAVAILABLE with the loader's recorded reason. */
SPORA_API spora_status_t spora_device_find(spora_context_t* ctx, const char* name, spora_device_t** out);
/* "sim:0". Borrowed. */
SPORA_API spora_status_t spora_device_name(const spora_device_t* device, const char** out);
/* Properties as key/value strings ("name", "vendor", "arch",
 * "memory_bytes", "compute_units", "unified_memory", "alignment", "plugin",
 * "plugin_version"). Borrowed. */
SPORA_API spora_status_t spora_device_property_count(const spora_device_t* device, size_t* out);
SPORA_API spora_status_t spora_device_property_at(const spora_device_t* device, size_t index,
                                                  const char** key, const char** value);
SPORA_API spora_status_t spora_device_property(const spora_device_t* device, const char* key,
                                               const char** value);
/* Blocks until all work queued on the device has finished; reports the first
 * asynchronous error raised since the last synchronize. */
SPORA_API spora_status_t spora_device_synchronize(spora_device_t* device);
/* Memory statistics of `device`, in bytes, counted by its plugin since it
 * was initialised (the figures of PyTorch's memory_allocated /
 * max_memory_allocated / memory_reserved / max_memory_reserved):
 *   allocated       sizes of the live device allocations (tensors, plan
 *                   arenas, workspaces), as requested, summed;
 *   peak_allocated  the highest `allocated` since the last reset;
 *   reserved        device memory the plugin holds for them, including its
 *                   rounding and freed blocks it caches for reuse (a caching
 *                   allocator's pool); at least `allocated`;
 *   peak_reserved   the highest `reserved` since the last reset.
 * Any out-parameter may be NULL. Cheap: no device synchronization, so
 * frees still waiting for queued work already count as freed. Returns
 * SPORA_ERROR_UNIMPLEMENTED, naming the device, when its plugin does not
 * keep statistics (plugins built against plugin ABI 1.0). */
SPORA_API spora_status_t spora_device_memory_stats(spora_device_t* device, uint64_t* allocated,
                                                   uint64_t* peak_allocated, uint64_t* reserved,
                                                   uint64_t* peak_reserved);
/* Starts new peaks: peak_allocated and peak_reserved become the current
 * allocated and reserved bytes. Same errors as spora_device_memory_stats. */
SPORA_API spora_status_t spora_device_reset_peak_memory_stats(spora_device_t* device);
/* Whether ops the device's plugin has no kernel for may still run on it: by
 * their decomposition into other ops, or on the cpu plugin with copies in
 * and out. `enabled` is 1 (the default) or 0. With 0, such an op fails with
 * SPORA_ERROR_UNIMPLEMENTED (carrying the plugin's reason), in eager calls
 * and when compiling a graph, so that only the plugin's own kernels run --
 * what `spora plugin check` needs. Process-wide for this device. */
SPORA_API spora_status_t spora_device_set_fallback(spora_device_t* device, int32_t enabled);

/* ------------------------------------------------------------------------ */
/* Tensors                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct spora_tensor spora_tensor_t;

#define SPORA_MAX_NDIM 8

/* Creates a dense row-major tensor on `device`. When `data` is non-NULL it
 * must hold exactly `data_bytes` == numel * dtype size bytes, which are copied;
 * when NULL the tensor is zero-filled. ndim may be 0 (a scalar). */
SPORA_API spora_status_t spora_tensor_create(spora_device_t* device, spora_dtype_t dtype,
                                             const int64_t* shape, int32_t ndim, const void* data,
                                             size_t data_bytes, spora_tensor_t** out);
/* A copy of `tensor` on `device` (a new handle even when it is already there). */
SPORA_API spora_status_t spora_tensor_to(const spora_tensor_t* tensor, spora_device_t* device,
                                         spora_tensor_t** out);
/* Copies the tensor's contents to host memory; waits for pending work.
 * `capacity` must be at least spora_tensor_nbytes(). */
SPORA_API spora_status_t spora_tensor_read(const spora_tensor_t* tensor, void* dst, size_t capacity);
SPORA_API spora_status_t spora_tensor_dtype(const spora_tensor_t* tensor, spora_dtype_t* out);
SPORA_API spora_status_t spora_tensor_ndim(const spora_tensor_t* tensor, int32_t* out);
/* Writes ndim dims into `dims` (capacity entries; SPORA_MAX_NDIM is enough). */
SPORA_API spora_status_t spora_tensor_shape(const spora_tensor_t* tensor, int64_t* dims, int32_t capacity);
SPORA_API spora_status_t spora_tensor_numel(const spora_tensor_t* tensor, int64_t* out);
SPORA_API spora_status_t spora_tensor_nbytes(const spora_tensor_t* tensor, size_t* out);
/* The device holding the tensor. Borrowed. */
SPORA_API spora_status_t spora_tensor_device(const spora_tensor_t* tensor, spora_device_t** out);
/* The host address of the tensor's first element, for devices whose memory
 * is host memory (device property "unified_memory" = 1, e.g. cpu); waits for
 * pending work on the device first. Other devices return
 * SPORA_ERROR_INVALID_ARGUMENT. The pointer stays valid while any tensor
 * sharing the memory lives. Writing through it changes every tensor sharing
 * the memory (this is how DLPack export is zero-copy). */
SPORA_API spora_status_t spora_tensor_data(const spora_tensor_t* tensor, void** ptr);
/* A dense row-major tensor over existing host memory, without copying (DLPack
 * import). Only for unified-memory devices (else
 * SPORA_ERROR_INVALID_ARGUMENT). `data` must hold numel * dtype size bytes,
 * aligned to the element size, and stay valid until `deleter(ctx)` is
 * called, which happens once, when the last tensor sharing the memory is
 * freed, possibly on another thread. `deleter` may be NULL (memory the
 * caller keeps alive itself). On failure `deleter` is not called. */
SPORA_API spora_status_t spora_tensor_wrap(spora_device_t* device, spora_dtype_t dtype, const int64_t* shape,
                                           int32_t ndim, void* data, void (*deleter)(void*), void* ctx,
                                           spora_tensor_t** out);
/* Releases the handle. Memory is freed when no other tensor shares it
 * (reshape returns views). NULL is a no-op. */
SPORA_API spora_status_t spora_tensor_free(spora_tensor_t* tensor);

/* ------------------------------------------------------------------------ */
/* Op attributes                                                            */
/* ------------------------------------------------------------------------ */

typedef struct spora_attrs spora_attrs_t;

SPORA_API spora_status_t spora_attrs_create(spora_attrs_t** out);
SPORA_API spora_status_t spora_attrs_free(spora_attrs_t* attrs);
/* Setting a name again replaces its value. Arrays are copied. */
SPORA_API spora_status_t spora_attrs_set_int(spora_attrs_t* attrs, const char* name, int64_t value);
SPORA_API spora_status_t spora_attrs_set_float(spora_attrs_t* attrs, const char* name, double value);
SPORA_API spora_status_t spora_attrs_set_bool(spora_attrs_t* attrs, const char* name, int32_t value);
SPORA_API spora_status_t spora_attrs_set_ints(spora_attrs_t* attrs, const char* name, const int64_t* values,
                                              size_t count);
SPORA_API spora_status_t spora_attrs_set_floats(spora_attrs_t* attrs, const char* name, const double* values,
                                                size_t count);
SPORA_API spora_status_t spora_attrs_set_string(spora_attrs_t* attrs, const char* name, const char* value);

/* ------------------------------------------------------------------------ */
/* Ops                                                                      */
/* ------------------------------------------------------------------------ */

/* The most inputs one op call takes and the most outputs it makes (variadic
 * ops such as concat or the optimizer updates; see docs/ops-optim.md). */
#define SPORA_MAX_OP_INPUTS 64
#define SPORA_MAX_OP_OUTPUTS 64

/* Number of registered ops, and the name of op `index` (borrowed). Collective
 * ops (all_reduce), which run only inside graphs through a communicator, are
 * not listed; spora_op_schema and graphs still know them by name. */
SPORA_API spora_status_t spora_op_count(size_t* out);
SPORA_API spora_status_t spora_op_name(size_t index, const char** out);
/* A one-line schema such as
 *   "sum(x: f32|f64) -> (y) attrs: axes: ints = [], keepdims: bool = false"
 * Borrowed; SPORA_ERROR_NOT_FOUND for unknown ops. */
SPORA_API spora_status_t spora_op_schema(const char* op, const char** out);

/* How autodiff treats `op`: `*has_rule` = 1 if it has a gradient rule or is
 * marked not differentiable; `*differentiable` = 1 if gradients flow through
 * it. SPORA_ERROR_NOT_FOUND for unknown ops. */
SPORA_API spora_status_t spora_op_gradient(const char* op, int32_t* has_rule, int32_t* differentiable);

/* Runs `op` eagerly. All inputs must live on one device; it runs there.
 * `device` selects where to run ops without inputs and may otherwise be NULL
 * (if given, it must be the inputs' device). `attrs` may be NULL. On success
 * writes `num_outputs` new tensors (which must equal the op's output count)
 * to `outputs`; the caller frees them. Broadcasting follows numpy. */
SPORA_API spora_status_t spora_op_call(const char* op, spora_device_t* device,
                                       spora_tensor_t* const* inputs, size_t num_inputs,
                                       const spora_attrs_t* attrs, spora_tensor_t** outputs,
                                       size_t num_outputs);
/* spora_op_call with the caller's source location (`file` may be NULL):
 * errors end with " (file:line)", and a recording tape stores the location
 * in the op's node. Costs the same as spora_op_call otherwise. */
SPORA_API spora_status_t spora_op_call_at(const char* op, spora_device_t* device,
                                          spora_tensor_t* const* inputs, size_t num_inputs,
                                          const spora_attrs_t* attrs, const char* file, int32_t line,
                                          spora_tensor_t** outputs, size_t num_outputs);
/* Runs `op` eagerly like spora_op_call, but writes its results into the
 * existing tensors `outputs`, which must have the op's output dtypes and
 * shapes and live on its device. An output may be the very tensor (the same
 * memory) of the input the op updates in place: a param or optimizer state
 * of sgd_update / adam_update, a tensor of clip_by_global_norm
 * (docs/ops-optim.md). That is how an optimizer step updates its tensors
 * without allocating. Any other overlap between an output and an input or
 * another output is an error, as is an in-place input that another input
 * also reads. Nothing is written unless every check passes. Tensors updated
 * in place change for every handle that shares their memory: do not use it
 * on values a gradient computation still needs. */
SPORA_API spora_status_t spora_op_call_into(const char* op, spora_device_t* device,
                                            spora_tensor_t* const* inputs, size_t num_inputs,
                                            const spora_attrs_t* attrs, spora_tensor_t* const* outputs,
                                            size_t num_outputs);

/* ------------------------------------------------------------------------ */
/* Graphs (graph mode)                                                      */
/* ------------------------------------------------------------------------ */

typedef struct spora_graph spora_graph_t;
typedef struct spora_executable spora_executable_t;
/* A value in a graph: an output of one of its nodes. Only meaningful with
 * the graph that returned it. */
typedef int64_t spora_value_t;

/* An empty graph. `name` may be NULL ("main"). */
SPORA_API spora_status_t spora_graph_create(const char* name, spora_graph_t** out);
SPORA_API spora_status_t spora_graph_free(spora_graph_t* graph);
/* Inputs are fed on every run; weights are named parameters (model state).
 * Both are bound by position, in creation order, when running. */
SPORA_API spora_status_t spora_graph_add_input(spora_graph_t* graph, const char* name, spora_dtype_t dtype,
                                               const int64_t* shape, int32_t ndim, spora_value_t* out);
SPORA_API spora_status_t spora_graph_add_weight(spora_graph_t* graph, const char* name, spora_dtype_t dtype,
                                                const int64_t* shape, int32_t ndim, spora_value_t* out);
/* A constant holding a copy of `value`'s current contents. */
SPORA_API spora_status_t spora_graph_add_constant(spora_graph_t* graph, const spora_tensor_t* value,
                                                  spora_value_t* out);
/* Applies `op` (shapes are inferred now; errors name the op and `file:line`
 * when given). `file` may be NULL. Writes the op's outputs to `outputs`
 * (`capacity` entries) and their count to `*num_outputs`. */
SPORA_API spora_status_t spora_graph_add_op(spora_graph_t* graph, const char* op, const spora_value_t* inputs,
                                            size_t num_inputs, const spora_attrs_t* attrs, const char* file,
                                            int32_t line, spora_value_t* outputs, size_t capacity,
                                            size_t* num_outputs);
/* Control flow. The sub-graphs are copied into `graph` (changing or freeing
 * them afterwards does not affect it). A sub-graph takes only inputs (no
 * weights), bound by position, and returns its outputs
 * (spora_graph_set_outputs).
 *  if:    `cond` is a bool scalar of `graph`; `then_graph` and `else_graph`
 *         each take the `num_inputs` values `inputs` (same types, in input
 *         creation order) and return the same number and types of outputs,
 *         which are the node's outputs.
 *  while: `inputs` are the initial loop-carried values; `cond_graph` takes
 *         them and returns one bool scalar; `body_graph` takes them and
 *         returns their next values (same types). The node's outputs are
 *         the values for which cond first returns false. A run fails with
 *         SPORA_ERROR_ABORTED once a loop exceeds SPORA_MAX_WHILE_ITERATIONS
 *         iterations (environment, default 1000000).
 * At run time the condition is read back to the host. Mismatched types or
 * counts are SPORA_ERROR_INVALID_ARGUMENT naming "[if]" / "[while]" and
 * `file:line` (`file` may be NULL). Writes the node's outputs to `outputs`
 * (`capacity` entries) and their count to `*num_outputs`. value_and_grad
 * differentiates both (through a while loop by recomputing the iterations:
 * O(N^2) body evaluations for N iterations). */
SPORA_API spora_status_t spora_graph_add_if(spora_graph_t* graph, spora_value_t cond, const spora_graph_t* then_graph,
                                            const spora_graph_t* else_graph, const spora_value_t* inputs,
                                            size_t num_inputs, const char* file, int32_t line, spora_value_t* outputs,
                                            size_t capacity, size_t* num_outputs);
SPORA_API spora_status_t spora_graph_add_while(spora_graph_t* graph, const spora_graph_t* cond_graph,
                                               const spora_graph_t* body_graph, const spora_value_t* inputs,
                                               size_t num_inputs, const char* file, int32_t line,
                                               spora_value_t* outputs, size_t capacity, size_t* num_outputs);
/* Calls `sub` inside `graph`: copies sub's nodes into `graph`, binding sub's
 * inputs, in creation order, to `args` (same dtypes and shapes; `sub` must
 * have no weights). Writes the values of sub's outputs in `graph` to
 * `outputs` (`capacity` entries) and their count to `*num_outputs`. This is
 * how a gradient graph built separately (spora_graph_grad of a sub-function)
 * becomes part of a larger graph, e.g. a training step traced as one graph. */
SPORA_API spora_status_t spora_graph_inline(spora_graph_t* graph, const spora_graph_t* sub, const spora_value_t* args,
                                            size_t num_args, spora_value_t* outputs, size_t capacity,
                                            size_t* num_outputs);
SPORA_API spora_status_t spora_graph_set_outputs(spora_graph_t* graph, const spora_value_t* values, size_t count);
/* The graph's outputs: writes min(count, capacity) values and the count. */
SPORA_API spora_status_t spora_graph_outputs(const spora_graph_t* graph, spora_value_t* values, size_t capacity,
                                             size_t* count);
/* dtype and shape of a value (dims: capacity entries). */
SPORA_API spora_status_t spora_graph_value_type(const spora_graph_t* graph, spora_value_t value, spora_dtype_t* dtype,
                                                int64_t* dims, int32_t capacity, int32_t* ndim);
/* Text form (for people) and lossless JSON form. The string is owned by the
 * graph and valid until the graph is next changed or freed. */
SPORA_API spora_status_t spora_graph_to_text(spora_graph_t* graph, const char** out);
SPORA_API spora_status_t spora_graph_to_json(spora_graph_t* graph, const char** out);
/* Parses and verifies a graph written by spora_graph_to_json. */
SPORA_API spora_status_t spora_graph_from_json(const char* json, size_t size, spora_graph_t** out);

/* Runs the optimisation passes of `level` (0 none, 1: shape_inference,
 * inline, dce, cse, algebraic_simplify, constant_folding, recompute,
 * epilogue_fusion;
 * 2: also elementwise_fusion) on the graph in place. No level changes the
 * graph's numerics beyond the kernels' own rounding (mixed precision is
 * spora_graph_run_pass's "mixed_precision").
 * SPORA_DUMP_IR=<dir> writes the IR before and after every pass. Values of
 * the graph before optimising are not valid afterwards (use
 * spora_graph_outputs). */
SPORA_API spora_status_t spora_graph_optimize(spora_graph_t* graph, int32_t level);

/* Runs one optimisation pass by name on the graph in place, with the same
 * instrumentation as spora_graph_optimize. Passes that change a graph's
 * numerics are in no opt level and run only this way:
 *   "mixed_precision"  f32 matrix products (matmul, linear, convolutions and
 *                      their gradients) in bf16, f32 everywhere else.
 * An unknown name is SPORA_ERROR_INVALID_ARGUMENT listing the passes. */
SPORA_API spora_status_t spora_graph_run_pass(spora_graph_t* graph, const char* name);

/* Recomputation (activation checkpointing, MindSpore's Cell.recompute();
 * docs/parallel.md, "Recomputation"). Ops carry the int attribute
 * "recompute" (every op accepts it; a bool is read as 0/1): 1 recomputes
 * that op, a value >= 2 names one recomputed region (a Cell call) whose
 * outputs -- values read in the forward pass outside the region -- are
 * kept, 0 never recomputes it. The pass "recompute" (in opt level 1, or by
 * spora_graph_run_pass), run on a graph from spora_graph_grad, makes every
 * backward reader of a marked forward value read a copy computed just
 * before it from the nearest kept values, so the forward values die after
 * the forward pass and the planned memory (spora_executable_memory) drops.
 * The forward pass is what output 0 depends on. Numbers do not change:
 * random ops are copied with their seed and offset, and collectives, ops
 * updating an input in place and graph outputs are never recomputed.
 *
 * spora_graph_num_nodes writes how many nodes the graph has (ids run from
 * 0 in creation order); spora_graph_mark_recompute gives the op nodes with
 * ids in [first, end) that carry no "recompute" attribute yet the value
 * `mark` (>= 0) and writes how many it marked to `*marked` (may be NULL):
 * marking what a stretch of building added, earlier marks winning. A range
 * outside the graph or a negative mark is SPORA_ERROR_INVALID_ARGUMENT. */
SPORA_API spora_status_t spora_graph_num_nodes(const spora_graph_t* graph, int64_t* out);
SPORA_API spora_status_t spora_graph_mark_recompute(spora_graph_t* graph, int64_t first, int64_t end, int64_t mark,
                                                    int64_t* marked);

/* Pipeline parallelism (docs/parallel.md, "Pipeline parallelism"): stage
 * `stage` of `stages` of `graph`, a traced forward step whose one output is
 * a scalar float loss (one micro-batch). `marks` holds num_marks triples
 * (first, end, stage): op nodes with ids in [first, end) run in that stage,
 * earlier triples winning; an unmarked op runs in the latest stage it reads
 * (0 if none). Values cross only to the next stage (a value read stages
 * later is relayed through the ones between). Writes the stage's forward
 * graph -- inputs: the graph's inputs it reads, then the values received
 * from the previous stage; weights: its own; outputs: the values sent to the
 * next stage, or for the last stage the loss -- and its backward graph --
 * inputs: the forward's, then one cotangent per float value sent; weights:
 * the same; outputs: for the last stage the loss first, then the gradients
 * of the float values received, then of the weights. The backward graph
 * computes the stage's forward again from its inputs (GPipe's
 * re-materialisation), so a micro-batch in flight keeps only its inputs.
 * `*report` (may be NULL; owned by *forward) is JSON: {"stage", "stages",
 * "data_inputs": [indices into graph's inputs], "recv" and "send": [{"dtype",
 * "shape", "differentiable"}], "weights": [names], "ops": count}. Errors
 * (SPORA_ERROR_INVALID_ARGUMENT) name the op, its line and the stages: a
 * stage reading a later stage's value, a stage without ops, a weight read in
 * two stages, a loss that is not one scalar. */
SPORA_API spora_status_t spora_graph_pipeline_stage(const spora_graph_t* graph, int32_t stages, int32_t stage,
                                                    const int64_t* marks, size_t num_marks, spora_graph_t** forward,
                                                    spora_graph_t** backward, const char** report);

/* SPMD partitioning (semi-automatic parallelism, docs/parallel.md): rewrites
 * `graph` in place into what one rank of a device mesh runs, inserting the
 * collectives (all_gather, reduce_scatter, all_reduce) and local slices that
 * move values between layouts. Partition the whole training step (after
 * spora_graph_grad, before spora_graph_optimize). Ops carry the user's
 * strategy in the string attribute "strategy" (every op accepts it: per
 * input, per dim, a block count or a mesh axis name: "4,1;1,1",
 * "dp,1;1,mp"). `options` is a JSON object:
 *   mesh        [sizes per axis], their product the number of ranks
 *   axis_names  optional, one name per axis
 *   rank        this process's rank (row-major over the mesh)
 *   groups      the communicator id (spora_comm_id) of each axis: the ranks
 *               that differ only along it, ordered by their coordinate
 *   semi_auto   true (default): a strategy on an op without a sharding rule,
 *               or one its rule cannot honour, is an error
 *   ties        {"<output index>": "<weight name>"}: outputs that are a
 *               weight's new value keep its layout (written back to its
 *               shard); other outputs come back whole
 * Inputs are fed whole. Weights become local shards: `*report` (JSON, owned
 * by the graph, valid until it next changes) lists each weight's global and
 * local shape and "split" (per dim the mesh axis, -1 whole), each output's
 * layout and one line per op. Errors name the op, the strategy and the
 * user's line: a dim that does not divide, an unknown axis name. */
SPORA_API spora_status_t spora_graph_partition(spora_graph_t* graph, const char* options, const char** report);

/* Reverse-mode autodiff as a graph transform (value_and_grad): returns a new
 * graph whose outputs are `graph`'s outputs followed by the gradient of
 * output `output` (summed first if not a scalar) with respect to each of
 * `wrt` (input or weight values). Values of `graph` remain valid in the
 * result; apply it again for higher order. */
SPORA_API spora_status_t spora_graph_grad(const spora_graph_t* graph, const spora_value_t* wrt, size_t num_wrt,
                                          size_t output, spora_graph_t** out);

/* Compiles for `device`: verifies, places every op (on the device if its
 * plugin has a kernel, else as the op's decomposition, else on the cpu
 * device with the copies it needs planned into the run), plans every kernel,
 * uploads constants and plans intermediate memory. An op neither the device
 * nor cpu can run is SPORA_ERROR_UNIMPLEMENTED naming the op and its source
 * line. */
SPORA_API spora_status_t spora_graph_compile(const spora_graph_t* graph, spora_device_t* device,
                                             spora_executable_t** out);
SPORA_API spora_status_t spora_executable_free(spora_executable_t* exe);
/* Runs once: `params` binds every input and weight in creation order
 * (`num_params` must match); writes one new tensor per graph output.
 * Inputs (not weights) may have shapes other than those the graph was built
 * with, of the same dtype and rank (the last, smaller batch of an epoch):
 * the first run with a new signature re-infers the graph's shapes for it and
 * plans it; later runs with that signature reuse the plan. Each executable
 * keeps SPORA_PLAN_CACHE plans (environment, default 8), dropping the least
 * recently used. A signature the graph cannot take (an attribute fixes a
 * shape, e.g. reshape without -1; dimensions that no longer contract) is
 * SPORA_ERROR_INVALID_ARGUMENT naming the op and its source line.
 * Asynchronous: returns once the work is queued on the device's stream; the
 * host waits only to read if/while conditions, and reading an output waits
 * for it. Runs of one executable are serialised. An op of the run placed on
 * cpu that fails after the call returned (it runs from a host callback in
 * stream order) is reported to the calling thread -- by its next
 * spora_device_synchronize, spora_tensor_read or run -- and never to
 * another thread running the same executable. */
SPORA_API spora_status_t spora_executable_run(spora_executable_t* exe, spora_tensor_t* const* params,
                                              size_t num_params, spora_tensor_t** outputs, size_t num_outputs);
/* spora_executable_run, letting outputs overwrite params (a training step's
 * updated weights and optimizer state written over the old ones instead of
 * into fresh memory): `donate` has num_outputs entries, each a position in
 * `params` or -1. Output i is written into params[donate[i]]'s memory, and
 * outputs[i] shares it, when the compiled plan reads that param before it
 * writes output i (or only in the in-place op writing it), they have the
 * same dtype and shape, no other tensor handle or view holds the param's
 * memory, and no other output took it; otherwise output i is a fresh tensor
 * as with spora_executable_run. A donated param's old value is lost.
 * `donate` may be NULL (no donation). */
SPORA_API spora_status_t spora_executable_run_donating(spora_executable_t* exe, spora_tensor_t* const* params,
                                                       size_t num_params, const int64_t* donate,
                                                       spora_tensor_t** outputs, size_t num_outputs);
/* Runs the graph op by op through eager dispatch on `device` (no compile,
 * no memory plan): PyNative execution of a graph, for debugging and for
 * comparing with the compiled plan. Same bindings as spora_executable_run. */
SPORA_API spora_status_t spora_graph_run_eager(const spora_graph_t* graph, spora_device_t* device,
                                               spora_tensor_t* const* params, size_t num_params,
                                               spora_tensor_t** outputs, size_t num_outputs);
/* Bytes of the planned intermediate arena, and of all intermediate and
 * output tensors without reuse, for the graph's own signature. */
SPORA_API spora_status_t spora_executable_memory(const spora_executable_t* exe, uint64_t* planned, uint64_t* naive);
/* The plan's collectives (all_reduce, all_gather, ...), and how many of them
 * start without waiting and overlap the kernels after them (docs/parallel.md,
 * "Overlap"; SPORA_COMM_OVERLAP=0 turns overlap off). Either may be NULL. */
SPORA_API spora_status_t spora_executable_collectives(const spora_executable_t* exe, int32_t* total,
                                                      int32_t* overlapped);

/* ------------------------------------------------------------------------ */
/* Eager tape (autodiff in eager mode)                                      */
/* ------------------------------------------------------------------------ */

/* A tape records eager op calls as the same IR graph mode builds, and
 * computes their gradients with the same autodiff transform, so eager
 * gradients equal graph-mode gradients.
 *
 * Recording. Each thread has a stack of started tapes. While a tape is
 * started, every successful eager op on that thread -- spora_op_call(_at),
 * each op run by spora_graph_run_eager, and the backward ops run by
 * spora_tape_gradient of another tape -- is recorded into every tape on the
 * stack: the op, its attributes, its inputs, its output types and the source
 * location when given. A tensor the tape has not seen before (created with
 * spora_tensor_create, copied with spora_tensor_to, returned by a compiled
 * executable, ...) becomes an input of the recorded graph; gradients do not
 * flow through such copies. The tape keeps a reference to every tensor it
 * recorded (sharing storage with your handles, so freeing a handle does not
 * free the memory while the tape holds it); spora_tape_free releases them.
 * Without a started tape, eager ops pay nothing measurable for this.
 *
 * A tape is used by one thread at a time for recording (the one that
 * started it); its other functions may be called from any thread. */
typedef struct spora_tape spora_tape_t;

SPORA_API spora_status_t spora_tape_create(spora_tape_t** out);
/* Releases the tape and every tensor reference it holds; a started tape is
 * stopped first (on another thread, it stops recording at that thread's
 * next op). NULL is a no-op. */
SPORA_API spora_status_t spora_tape_free(spora_tape_t* tape);
/* Pushes the tape on the calling thread's stack of recording tapes. Fails if
 * it is already started. Tapes nest: start an outer tape, then an inner
 * one, and the inner tape's gradient is recorded on the outer tape, which
 * can then differentiate it again (second order). */
SPORA_API spora_status_t spora_tape_start(spora_tape_t* tape);
/* Pops the tape. Fails with SPORA_ERROR_INVALID_ARGUMENT unless it is the
 * innermost started tape of this thread. A stopped tape keeps what it
 * recorded and can be started again to record more. */
SPORA_API spora_status_t spora_tape_stop(spora_tape_t* tape);
/* Marks `tensor` as a differentiation source (an input of the recorded
 * graph once an op uses it; until then its gradient is zeros). Tensors that
 * recorded ops produced or used need no watching; watching says "I will ask
 * for this one" and lets spora_tape_gradient tell a forgotten tensor from an
 * unused one. The tape keeps a reference to it. */
SPORA_API spora_status_t spora_tape_watch(spora_tape_t* tape, const spora_tensor_t* tensor);
/* Writes d target / d sources[i] to grads[i] for each source (new tensors
 * the caller frees): the vector-Jacobian product with `sens` (a tensor of
 * the target's dtype and shape), or with ones when `sens` is NULL (the
 * gradient of sum(target)). A source the target does not depend on gets
 * zeros of its shape. A source produced on the tape is treated as a
 * variable (its gradient is d target / d source with what computed it held
 * fixed); the other sources' gradients still flow through it.
 * The forward pass is not recomputed: the autodiff transform is applied to
 * the recorded graph and only its backward part runs, eagerly, on the
 * target's device, reusing the recorded forward values. The tape is
 * persistent: ask as often as needed. The backward ops are recorded on the
 * other started tapes of this thread, not on this one.
 * Sources are watched tensors or tensors produced or used by recorded ops
 * (each tensor from outside that a recorded op used is an input of the
 * recorded graph, so its gradient is defined).
 * Errors (SPORA_ERROR_INVALID_ARGUMENT): a source the tape does not know
 * ("source 1 is unknown to this tape ..."), a target the tape never saw,
 * non-float target or sources, a `sens` of the wrong type, NULL handles. */
SPORA_API spora_status_t spora_tape_gradient(spora_tape_t* tape, const spora_tensor_t* target,
                                             const spora_tensor_t* sens, const spora_tensor_t* const* sources,
                                             size_t num_sources, spora_tensor_t** grads);
/* The recorded IR as a new graph (the caller frees it) whose outputs are
 * `outputs` (tensors produced or used by recorded ops, or watched): tensors
 * from outside the tape are its inputs "x0", "x1", ... in first-use order,
 * each recorded op one node, in call order. For inspection, printing,
 * compiling, or comparing with the same model built in graph mode. */
SPORA_API spora_status_t spora_tape_graph(spora_tape_t* tape, const spora_tensor_t* const* outputs,
                                          size_t num_outputs, spora_graph_t** out);

/* ------------------------------------------------------------------------ */
/* Checkpoint and model files                                               */
/* ------------------------------------------------------------------------ */

/* Both use the safetensors layout, so other tools read their tensors: an
 * 8-byte little-endian header length, a JSON header naming each tensor's
 * dtype ("F32", "F64", "F16", "BF16", "I32", "I64", "U8", "BOOL"), shape and
 * byte range, then the raw little-endian data (starting on a 64-byte
 * boundary). The header's "__metadata__" holds string values: the user's,
 * and Spora's own under keys starting with "spora." (format, version, a
 * CRC-32C per tensor and, in model files, the graph JSON).
 *
 * Saving is atomic: the file is written under a temporary name beside
 * `path`, flushed to disk and renamed over `path`, so a failed or
 * interrupted save leaves any previous file intact. Opening checks the whole
 * layout (header length against the file size, dtypes, shapes, byte ranges
 * inside the file, no overlaps, unique names) before reading any tensor, and
 * reading a tensor checks its CRC: a damaged or hostile file is an error
 * status (SPORA_ERROR_INVALID_ARGUMENT, or SPORA_ERROR_NOT_FOUND / _IO for a
 * missing or unreadable file) whose message names the file and, where there
 * is one, the tensor. */

typedef struct spora_checkpoint spora_checkpoint_t;

/* Saves `n` tensors under `names` (unique, non-empty UTF-8, not
 * "__metadata__") to `path`. `metadata_json` is NULL or a JSON object whose
 * values are all strings, e.g. {"epoch": "3"}; keys starting with "spora."
 * are reserved. Tensors are written largest element size first (so each is
 * aligned to its element size), otherwise in the given order. */
SPORA_API spora_status_t spora_checkpoint_save(const char* path, const char* const* names,
                                               spora_tensor_t* const* tensors, size_t n,
                                               const char* metadata_json);
/* Opens `path` and validates its header and layout; no tensor is read yet.
 * Any safetensors file with Spora's dtypes opens (tensors of files written
 * by other tools have no CRC to check), and so does a model file (its
 * tensors are the model's weights). The file stays open until
 * spora_checkpoint_close, so replacing `path` meanwhile does not affect
 * what this handle reads. */
SPORA_API spora_status_t spora_checkpoint_open(const char* path, spora_checkpoint_t** out);
/* NULL is a no-op. Invalidates every string the handle lent out. */
SPORA_API spora_status_t spora_checkpoint_close(spora_checkpoint_t* ckpt);
/* Number of tensors in the file. */
SPORA_API spora_status_t spora_checkpoint_count(const spora_checkpoint_t* ckpt, size_t* out);
/* Tensor `index` (0 <= index < count, in file order): its name (borrowed,
 * valid until close), dtype and shape (`dims` has `capacity` entries;
 * SPORA_MAX_NDIM is enough). Every out-parameter may be NULL. */
SPORA_API spora_status_t spora_checkpoint_entry(const spora_checkpoint_t* ckpt, size_t index, const char** name,
                                                spora_dtype_t* dtype, int64_t* dims, int32_t capacity,
                                                int32_t* ndim);
/* The user metadata (keys not starting with "spora.") as a JSON object of
 * strings, "{}" when there is none. Borrowed, valid until close. */
SPORA_API spora_status_t spora_checkpoint_metadata(const spora_checkpoint_t* ckpt, const char** json);
/* Reads tensor `name` onto `device` after checking its CRC. An unknown name
 * is SPORA_ERROR_NOT_FOUND. */
SPORA_API spora_status_t spora_checkpoint_read(const spora_checkpoint_t* ckpt, const char* name,
                                               spora_device_t* device, spora_tensor_t** out);

typedef struct spora_model spora_model_t;

/* Saves `graph` (its JSON goes into the metadata) with the values of its
 * weights: `weights` binds the graph's weight nodes in creation order, and
 * each tensor is stored under its node's name (names must be unique). A
 * count, dtype or shape that does not match is SPORA_ERROR_INVALID_ARGUMENT
 * naming the weight, reported before the file is touched. The graph must
 * have outputs. */
SPORA_API spora_status_t spora_model_save(const char* path, const spora_graph_t* graph,
                                          spora_tensor_t* const* weights, size_t num_weights);
/* Loads a model file: parses and verifies the graph, checks that the file
 * holds exactly its weights with their dtypes and shapes, and reads them
 * (CRC-checked) onto `device`. A path ending in ".onnx" is imported
 * (spora_model_import_onnx). */
SPORA_API spora_status_t spora_model_load(const char* path, spora_device_t* device, spora_model_t** out);
/* NULL is a no-op. */
SPORA_API spora_status_t spora_model_free(spora_model_t* model);
/* The graph's inputs (creation order): what spora_model_run takes. */
SPORA_API spora_status_t spora_model_num_inputs(const spora_model_t* model, size_t* out);
/* dtype and shape of input `index` (`dims`: `capacity` entries). Every
 * out-parameter may be NULL. */
SPORA_API spora_status_t spora_model_input_type(const spora_model_t* model, size_t index, spora_dtype_t* dtype,
                                                int64_t* dims, int32_t capacity, int32_t* ndim);
/* Name of input `index`. Borrowed, valid until spora_model_free. */
SPORA_API spora_status_t spora_model_input_name(const spora_model_t* model, size_t index, const char** name);
SPORA_API spora_status_t spora_model_num_outputs(const spora_model_t* model, size_t* out);
/* Runs the model: `inputs` binds the graph's inputs only (the stored
 * weights are bound by the model), each with its input's dtype and rank;
 * tensors on another device than the model's are copied over. Writes
 * `num_outputs` (which must equal spora_model_num_outputs) new tensors on
 * the model's device. The first run optimises (level 1) and compiles the
 * graph; later runs reuse the plan. Inputs of other shapes than the stored
 * ones (another batch size) get a plan of their own, kept for later runs;
 * a shape the graph cannot take fails naming the op and its source line.
 * Calls from several threads are serialised. */
SPORA_API spora_status_t spora_model_run(spora_model_t* model, spora_tensor_t* const* inputs, size_t num_inputs,
                                         spora_tensor_t** outputs, size_t num_outputs);
/* The model's graph as stored in the file (not optimised). Borrowed, valid
 * until spora_model_free; use it with the functions taking a const graph
 * (spora_graph_outputs, spora_graph_value_type, spora_graph_grad,
 * spora_graph_compile, ...). */
SPORA_API spora_status_t spora_model_graph(const spora_model_t* model, const spora_graph_t** out);

/* Imports an ONNX model file (ai.onnx opsets 7-21; the ops docs/onnx.md
 * lists) as a model: its graph inputs become the model's inputs (a symbolic
 * dimension such as a batch is stored as 1 and runs at any size), its float
 * initializers the weights (raw_data, typed fields, or external data files
 * inside the model's directory). spora_model_load does the same for a path
 * ending in ".onnx". An unsupported op is SPORA_ERROR_INVALID_ARGUMENT
 * naming its type, node name and the opset; a damaged or hostile file fails
 * naming the file before anything sized by it is allocated. */
SPORA_API spora_status_t spora_model_import_onnx(const char* path, spora_device_t* device, spora_model_t** out);
/* Flags of spora_model_export_onnx. */
#define SPORA_ONNX_DYNAMIC_BATCH 1u /* dimension 0 of the inputs (and outputs) as the symbolic "batch" */
/* Writes `graph` with `weights` (its weight nodes' values, creation order,
 * as for spora_model_save) as an ONNX model (ai.onnx opset 17, IR version 8;
 * weights and constants as initializers) that onnxruntime and other ONNX
 * tools run. With SPORA_ONNX_DYNAMIC_BATCH the file takes any batch size
 * where the graph's reshapes infer that dimension. An op with no ONNX
 * mapping (docs/onnx.md: gradients, optimizer updates, random draws,
 * collectives, control flow) is SPORA_ERROR_INVALID_ARGUMENT naming the op
 * and its source line. Atomic, like spora_model_save. */
SPORA_API spora_status_t spora_model_export_onnx(const char* path, const spora_graph_t* graph,
                                                 spora_tensor_t* const* weights, size_t num_weights, uint32_t flags);
/* A new, independent copy of `graph` (e.g. of spora_model_graph's, to
 * optimise or print it: spora_graph_to_text and spora_graph_optimize take a
 * graph the caller owns). Free it with spora_graph_free. */
SPORA_API spora_status_t spora_graph_copy(const spora_graph_t* graph, spora_graph_t** out);

/* ------------------------------------------------------------------------ */
/* Collectives (data-parallel training across processes)                    */
/* ------------------------------------------------------------------------ */

/* A communicator: `size` processes (ranks) that exchange tensors through a
 * collective plugin (libspora-collective-<backend>.so, e.g. "mpi"). Every
 * call below is collective unless it says otherwise: all ranks make the same
 * calls on a communicator in the same order, with matching dtypes and
 * element counts. Tensors may live on any device; a device without host-
 * addressable memory is staged through the host. Calls on one communicator
 * are serialised. */
typedef struct spora_communicator spora_communicator_t;

#ifndef SPORA_REDUCE_OP_T_DEFINED /* same definition as in spora/plugin.h */
#define SPORA_REDUCE_OP_T_DEFINED
typedef enum spora_reduce_op {
  SPORA_REDUCE_SUM = 1,
  SPORA_REDUCE_PROD = 2,
  SPORA_REDUCE_MAX = 3,
  SPORA_REDUCE_MIN = 4,
  SPORA_REDUCE_AVG = 5 /* sum divided by size (integers truncate toward zero) */
} spora_reduce_op_t;
#endif

/* Joins the communicator of all ranks of the job over `backend` ("mpi").
 * `rank` and `size` < 0 take both from the launcher's environment
 * (OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE, SPORA_RANK/SPORA_WORLD_SIZE;
 * a lone process is rank 0 of 1). Blocks until every rank has joined (or the
 * backend's start-up timeout passes). Fails with NOT_FOUND naming the loaded
 * backends for an unknown one. */
SPORA_API spora_status_t spora_comm_create(spora_context_t* ctx, const char* backend, int32_t rank, int32_t size,
                                           spora_communicator_t** out);
/* The same, for the process that trains on `device`. A backend that moves
 * device memory (NCCL) binds the communicator to it: `device` must be one of
 * that backend's devices (a cuda device for NCCL; else INVALID_ARGUMENT),
 * and its calls then take tensors on `device` and run on its stream, in
 * order with the kernels queued there. `device` NULL picks the backend's
 * device LOCAL_RANK % count (spora_comm_create does the same). A backend
 * that moves host memory (mpi) ignores `device`. */
SPORA_API spora_status_t spora_comm_create_on_device(spora_context_t* ctx, const char* backend,
                                                     spora_device_t* device, int32_t rank, int32_t size,
                                                     spora_communicator_t** out);
/* Not collective. The device the communicator is bound to (its calls take
 * tensors there), or NULL for a host-memory backend. Borrowed. */
SPORA_API spora_status_t spora_comm_device(const spora_communicator_t* comm, spora_device_t** out);
/* Not collective. NULL is a no-op. */
SPORA_API spora_status_t spora_comm_free(spora_communicator_t* comm);
/* Not collective. Either out-parameter may be NULL. */
SPORA_API spora_status_t spora_comm_rank(const spora_communicator_t* comm, int32_t* rank, int32_t* size);
/* Not collective. The backend's name. Borrowed, valid until spora_comm_free. */
SPORA_API spora_status_t spora_comm_backend(const spora_communicator_t* comm, const char** name);
/* Not collective. A process-unique id (> 0) naming this communicator in a
 * graph's all_reduce op (attribute "group"). */
SPORA_API spora_status_t spora_comm_id(const spora_communicator_t* comm, int64_t* id);
/* Not collective. How long each later call waits for the other ranks before
 * failing with SPORA_ERROR_TIMEOUT (< 0: forever; the default is
 * SPORA_COMM_TIMEOUT_MS, else 30 minutes). After a timeout the communicator is
 * unusable: abort and free it. */
SPORA_API spora_status_t spora_comm_set_timeout(spora_communicator_t* comm, int64_t timeout_ms);
/* Not collective; any thread, also while another thread waits in a call on
 * `comm`: that call and every later one fail with SPORA_ERROR_ABORTED. */
SPORA_API spora_status_t spora_comm_abort(spora_communicator_t* comm);
/* Ranks passing the same `color` form a new communicator, ranked by `key`;
 * a rank passing color < 0 gets *out = NULL. */
SPORA_API spora_status_t spora_comm_split(spora_communicator_t* comm, int32_t color, int32_t key,
                                          spora_communicator_t** out);
/* output = op over every rank's input; same dtype and element count (the
 * shapes may differ). `output` may be `input` (in place). */
SPORA_API spora_status_t spora_comm_all_reduce(spora_communicator_t* comm, const spora_tensor_t* input,
                                               spora_tensor_t* output, spora_reduce_op_t op);
/* output (size * numel(input) elements) = every rank's input, rank-major. */
SPORA_API spora_status_t spora_comm_all_gather(spora_communicator_t* comm, const spora_tensor_t* input,
                                               spora_tensor_t* output);
/* input holds size * numel(output) elements; rank r gets block r reduced. */
SPORA_API spora_status_t spora_comm_reduce_scatter(spora_communicator_t* comm, const spora_tensor_t* input,
                                                   spora_tensor_t* output, spora_reduce_op_t op);
/* Overwrites `tensor` on every rank with the root's. */
SPORA_API spora_status_t spora_comm_broadcast(spora_communicator_t* comm, spora_tensor_t* tensor, int32_t root);
/* input and output hold size blocks of equal length; block j of input goes
 * to rank j, which stores it as its block (this rank). */
SPORA_API spora_status_t spora_comm_all_to_all(spora_communicator_t* comm, const spora_tensor_t* input,
                                               spora_tensor_t* output);
/* Point to point (only the two ranks take part). */
SPORA_API spora_status_t spora_comm_send(spora_communicator_t* comm, const spora_tensor_t* tensor, int32_t peer);
SPORA_API spora_status_t spora_comm_recv(spora_communicator_t* comm, spora_tensor_t* tensor, int32_t peer);
SPORA_API spora_status_t spora_comm_barrier(spora_communicator_t* comm);
/* Not collective. Of the graph-mode collectives that host-memory backends
 * ran overlapped with other work (docs/parallel.md, "Overlap") since the
 * last reset: the nanoseconds they ran, and the nanoseconds the step waited
 * for them (exposed, not hidden). The share hidden is 1 - exposed / busy.
 * `reset` != 0 starts both from 0 after reading. Either may be NULL. */
SPORA_API spora_status_t spora_comm_overlap_stats(int64_t* busy_ns, int64_t* exposed_ns, int32_t reset);

/* ------------------------------------------------------------------------ */
/* Data pipeline (MindData)                                                 */
/* ------------------------------------------------------------------------ */
/* A dataset is an immutable description: a source (IDX files or in-memory
 * arrays), then shuffle / map / batch / repeat steps, each returning a new
 * handle (the input stays usable and must still be freed). An iterator
 * runs one epoch: a producer thread pulls the steps, map() transforms rows
 * on a worker pool, and finished rows (batches) wait in a bounded queue.
 * Rows are sequences of named columns; each row comes out as one new
 * tensor per column on the iterator's device.
 *
 * Determinism: all randomness (source shuffle, shuffle(), random
 * transforms) is Philox keyed by (seed, epoch, position), so an epoch's
 * output is a pure function of the dataset, the seeds and the epoch number,
 * whatever the number of workers.
 *
 * Errors (SPORA_ERROR_INVALID_ARGUMENT unless said otherwise) name the file
 * or step: a truncated or garbled IDX file, files or arrays with different
 * sample counts, a batch whose rows differ in shape (reported by
 * spora_dataset_iter_next), an unknown column. */

typedef struct spora_dataset spora_dataset_t;
typedef struct spora_transform spora_transform_t;
typedef struct spora_dataset_iter spora_dataset_iter_t;

/* A source with one column per IDX file (plain or gzip; MNIST and
 * Fashion-MNIST ship in this format), named `names[i]`. `dtypes` may be
 * NULL; else dtypes[i] converts column i on load (SPORA_DTYPE_INVALID keeps
 * the file's type: u8 stays u8, i8/i16/i32 become i32). Files are read
 * whole now. A missing file is SPORA_ERROR_NOT_FOUND. */
SPORA_API spora_status_t spora_dataset_from_idx(const char* const* paths, const char* const* names,
                                                const spora_dtype_t* dtypes, size_t n, spora_dataset_t** out);
/* A source over copies of `n` tensors (any device), column i named
 * `names[i]`; all must have the same first dimension (the sample count). */
SPORA_API spora_status_t spora_dataset_from_tensors(spora_tensor_t* const* tensors, const char* const* names,
                                                    size_t n, spora_dataset_t** out);
/* The source `source` with a sampler: with `shuffle`, a new permutation of
 * all samples each epoch (keyed by seed and epoch, the same on every shard);
 * shard `shard_id` of `num_shards` takes every num_shards-th sample of that
 * order, starting at shard_id. The order is padded by wrapping around so
 * every shard has ceil(n / num_shards) samples; shards are disjoint when
 * num_shards divides n. `source` must be a source dataset. */
SPORA_API spora_status_t spora_dataset_sampler(const spora_dataset_t* source, int32_t shuffle, uint64_t seed,
                                               int64_t num_shards, int64_t shard_id, spora_dataset_t** out);
/* Buffered shuffle (buffer_size >= 2): each output is a random row of a
 * buffer refilled from the input; buffer_size >= the row count gives a
 * uniform permutation. */
SPORA_API spora_status_t spora_dataset_shuffle(const spora_dataset_t* ds, int64_t buffer_size, uint64_t seed,
                                               spora_dataset_t** out);
/* A built-in per-sample transform. Names and attributes (images are HWC or
 * HW, as MindSpore's vision ops take them):
 *   "type_cast"  dtype (string "f32", "i32", ...)
 *   "rescale"    rescale (float), shift (float, 0): x * rescale + shift as f32
 *   "normalize"  mean, std (floats: one per channel, or one), is_hwc (bool, true): (x - mean) / std as f32
 *   "one_hot"    num_classes (int): scalar integer label -> (num_classes,) of its dtype
 *   "hwc2chw"    HWC -> CHW (HW -> 1HW)
 *   "decode"     encoded JPEG/PNG bytes (1-D uint8) -> HWC uint8 RGB (spora_image_decode)
 *   "random_horizontal_flip"  prob (float, 0.5)
 *   "random_crop" size (ints [h, w] or [s]), padding (ints [p], [lr, tb] or [l, t, r, b]), fill_value (int, 0)
 * `attrs` may be NULL. An unknown name is SPORA_ERROR_NOT_FOUND. */
SPORA_API spora_status_t spora_transform_create(const char* name, const spora_attrs_t* attrs,
                                                spora_transform_t** out);
/* NULL is a no-op. Datasets using the transform keep it alive. */
SPORA_API spora_status_t spora_transform_free(spora_transform_t* transform);
/* Applies `ops` in order to each of the named columns (num_columns 0: the
 * first column) on `num_workers` threads (1..256). Random ops draw from
 * (seed, epoch, row number, the op's place in the pipeline). */
SPORA_API spora_status_t spora_dataset_map(const spora_dataset_t* ds, spora_transform_t* const* ops, size_t num_ops,
                                           const char* const* columns, size_t num_columns, int32_t num_workers,
                                           uint64_t seed, spora_dataset_t** out);
/* Stacks batch_size rows (a leading batch dimension); the last, smaller
 * batch is kept unless drop_remainder. */
SPORA_API spora_status_t spora_dataset_batch(const spora_dataset_t* ds, int64_t batch_size, int32_t drop_remainder,
                                             spora_dataset_t** out);
/* The input `count` (>= 1) times per epoch, each pass reshuffled. */
SPORA_API spora_status_t spora_dataset_repeat(const spora_dataset_t* ds, int64_t count, spora_dataset_t** out);
/* NULL is a no-op. Iterators keep what they run alive. */
SPORA_API spora_status_t spora_dataset_free(spora_dataset_t* ds);
/* Rows (batches after batch()) one epoch yields, exactly. */
SPORA_API spora_status_t spora_dataset_size(const spora_dataset_t* ds, int64_t* out);
SPORA_API spora_status_t spora_dataset_num_columns(const spora_dataset_t* ds, size_t* out);
/* Borrowed, valid while `ds` lives. */
SPORA_API spora_status_t spora_dataset_column_name(const spora_dataset_t* ds, size_t index, const char** out);
/* Starts epoch `epoch` of `ds`, producing tensors on `device`, keeping up
 * to `prefetch` (1..1024) rows ready ahead of the caller. */
SPORA_API spora_status_t spora_dataset_iter_create(const spora_dataset_t* ds, spora_device_t* device, uint64_t epoch,
                                                   int32_t prefetch, spora_dataset_iter_t** out);
/* The device queue of an iterator whose device has its own memory (not
 * cpu): when spora_dataset_iter_next hands out row k, the host->device
 * copies of the next `depth` rows are already enqueued on the device's copy
 * stream, overlapping the caller's work on row k; work the caller enqueues
 * on the device after taking a row waits for that row's copies (an event),
 * the host does not. A pipeline error met while copying ahead is returned
 * at the row that failed. On by default with depth 1; 0 turns it off (each
 * row is copied when taken); 0..64. Call before the first
 * spora_dataset_iter_next (else SPORA_ERROR_INVALID_ARGUMENT); a no-op on
 * devices that share host memory or lack async copies and events. */
SPORA_API spora_status_t spora_dataset_iter_set_device_queue(spora_dataset_iter_t* iter, int32_t depth);
/* Writes the next row's tensors (one per column, new handles the caller
 * frees) to `outs` (`capacity` >= the column count) and sets *has_row = 1;
 * at the end of the epoch sets *has_row = 0. A pipeline error is returned
 * here, naming the file or step. */
SPORA_API spora_status_t spora_dataset_iter_next(spora_dataset_iter_t* iter, spora_tensor_t** outs, size_t capacity,
                                                 int32_t* has_row);
/* Stops the pipeline (mid-epoch is fine). NULL is a no-op. */
SPORA_API spora_status_t spora_dataset_iter_free(spora_dataset_iter_t* iter);

/* A device queue for batches made outside a spora_dataset_t (a language
 * binding's own pipeline: Python's GeneratorDataset and Python map steps
 * use it). spora_device_queue_push enqueues one batch's host->device copies
 * on the device's copy stream and returns without waiting for them (the
 * bytes are staged, in pinned memory where the plugin has it, or copied
 * before it returns); spora_device_queue_pop hands out the oldest pushed
 * batch, first in first out, and the device work the caller enqueues after
 * it waits for that batch's copies (an event; the host does not wait). To
 * overlap the next batch's copy with a step, push batch k+1 before running
 * the step on batch k. A queue serves one thread at a time. */
typedef struct spora_device_queue spora_device_queue_t;
/* A queue for `device`; *out is NULL (and the status SPORA_OK) on a device
 * that shares host memory or lacks async copies and events (cpu): there is
 * nothing to copy ahead there. */
SPORA_API spora_status_t spora_device_queue_create(spora_device_t* device, spora_device_queue_t** out);
/* Enqueues the copies of a batch of `num_columns` columns (0 is allowed):
 * column i is a dense row-major array of dtypes[i] with shape shapes[i]
 * (ndims[i] dimensions) whose data_bytes[i] bytes (numel * dtype size) are
 * at data[i]; they are read before the call returns. A column that does not
 * fit its dtype and shape is SPORA_ERROR_INVALID_ARGUMENT, and then nothing
 * is enqueued. */
SPORA_API spora_status_t spora_device_queue_push(spora_device_queue_t* queue, const spora_dtype_t* dtypes,
                                                 const int64_t* const* shapes, const int32_t* ndims,
                                                 const void* const* data, const size_t* data_bytes,
                                                 size_t num_columns);
/* Writes the oldest pushed batch's tensors (new handles on the device, the
 * caller frees them) to `outs` and their count to *num_columns. With no
 * batch queued, or `capacity` below its column count, it is
 * SPORA_ERROR_INVALID_ARGUMENT and the queue is unchanged. */
SPORA_API spora_status_t spora_device_queue_pop(spora_device_queue_t* queue, spora_tensor_t** outs, size_t capacity,
                                                size_t* num_columns);
/* Batches pushed and not popped yet. */
SPORA_API spora_status_t spora_device_queue_pending(const spora_device_queue_t* queue, size_t* out);
/* Waits for the copies still in flight (their host memory is freed), then
 * frees the queue; tensors already popped stay valid. NULL is a no-op. */
SPORA_API spora_status_t spora_device_queue_free(spora_device_queue_t* queue);
/* Decodes one JPEG (libjpeg-turbo) or PNG (libpng) image of `size` bytes
 * into a new HWC uint8 RGB tensor on `device` (grey and palette images
 * expanded to RGB, alpha composited onto black, 16-bit samples reduced to
 * 8). `name` (NULL: "image") names the image in errors, e.g. its file: a
 * corrupt or truncated image (libjpeg's corrupt-data warnings included),
 * another format, or more than 2^28 pixels is SPORA_ERROR_INVALID_ARGUMENT
 * naming it; a format this build lacks the library for is
 * SPORA_ERROR_UNIMPLEMENTED. The "decode" transform does the same in a
 * pipeline. */
SPORA_API spora_status_t spora_image_decode(const void* data, size_t size, const char* name, spora_device_t* device,
                                            spora_tensor_t** out);

/* ------------------------------------------------------------------------ */
/* Profiler                                                                 */
/* ------------------------------------------------------------------------ */

/* One process-wide session records, while it runs: every eager op call and
 * every step of a compiled graph (name, input/output dtypes and shapes,
 * device, the caller's source line when known, host time), the device work
 * plugins report through their trace hooks (one track per stream or plugin
 * thread, with flow arrows from the op that launched it), user ranges (step
 * markers), collectives (bytes, communicator) and memory counters
 * (allocated / reserved bytes per device). When no session runs an op pays
 * one relaxed atomic load. See docs/profiler.md. */

/* Starts a session, dropping what an earlier one recorded.
 * SPORA_ERROR_INVALID_ARGUMENT when one already runs. */
SPORA_API spora_status_t spora_profiler_start(void);
/* Stops recording; the session stays readable (write_trace, summary) until
 * the next start. SPORA_ERROR_INVALID_ARGUMENT when none runs. */
SPORA_API spora_status_t spora_profiler_stop(void);
/* *out = 1 while a session records, else 0. */
SPORA_API spora_status_t spora_profiler_running(int32_t* out);
/* Writes the last (or running) session as Chrome trace-event JSON, which
 * Perfetto (ui.perfetto.dev) and chrome://tracing open. SPORA_ERROR_IO
 * naming `path` when it cannot be written. */
SPORA_API spora_status_t spora_profiler_write_trace(const char* path);
/* The op summary of the last (or running) session as text: per op name the
 * calls, self and total host time and the share of all ops' self time, then
 * the device work per name. Borrowed: valid until the next
 * spora_profiler_summary call on the same thread. */
SPORA_API spora_status_t spora_profiler_summary(const char** out);
/* A user range on the calling thread's track, e.g. category "step", name
 * "step 3". *out is the id to end it with, 0 when no session runs (ending 0
 * does nothing). Ranges nest; one begun before a session started is not
 * recorded. */
SPORA_API spora_status_t spora_profiler_range_begin(const char* category, const char* name, uint64_t* out);
SPORA_API spora_status_t spora_profiler_range_end(uint64_t id);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SPORA_SPORA_H */
