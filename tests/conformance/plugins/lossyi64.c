/* libspora-device-lossyi64.so: a complete device plugin (the loader tests'
 * minimal table) whose one kernel, `sum` of an i64 vector, reads each element
 * through a double, as a kernel that loads integers on a float path would.
 * The result is wrong only for elements beyond 2^53, so `spora plugin check`
 * fails it only if its input generator produces such values exactly (the
 * case reduce.json "sum" i64 over int:-4e18:4e18 asks for them). */
#define TEST_PLUGIN_NAME "lossyi64"
#include "minimal_device.h"

static int lossy_i64_dense(const spora_tensor_desc_t* t) {
  return t->dtype == SPORA_DTYPE_I64 && t->strides == NULL && t->rank >= 0 && t->rank <= SPORA_MAX_RANK &&
         (t->rank == 0 || t->dims != NULL);
}

struct spora_kernel {
  size_t count;
};

static const char* const lossy_ops[] = {"sum", NULL};
static const char* const* lossy_kernel_ops(void) { return lossy_ops; }

static spora_plugin_error_t* lossy_kernel_create(int32_t device, const spora_kernel_desc_t* d, spora_kernel_t** out,
                                                 size_t* out_workspace) {
  spora_plugin_error_t* e = test_check_device(device);
  spora_kernel_t* k;
  size_t outputs = 1;
  int i;
  if (e) return e;
  if (!d || !out || !out_workspace) return test_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[lossyi64] kernel_create: NULL argument");
  if (strcmp(d->op, "sum") != 0) return test_error(SPORA_PLUGIN_UNIMPLEMENTED, "[lossyi64] only sum has a kernel");
  if (d->num_inputs != 1 || d->num_outputs != 1 || !lossy_i64_dense(&d->inputs[0]) || d->inputs[0].rank != 1 ||
      !lossy_i64_dense(&d->outputs[0]))
    return test_error(SPORA_PLUGIN_UNIMPLEMENTED, "[lossyi64] sum: only a whole i64 vector");
  for (i = 0; i < d->outputs[0].rank; ++i) outputs *= (size_t)d->outputs[0].dims[i];
  if (outputs != 1) return test_error(SPORA_PLUGIN_UNIMPLEMENTED, "[lossyi64] sum: only to one element");
  k = (spora_kernel_t*)malloc(sizeof *k);
  if (!k) return test_error(SPORA_PLUGIN_OUT_OF_MEMORY, "[lossyi64] kernel_create: out of memory");
  k->count = (size_t)d->inputs[0].dims[0];
  *out = k;
  *out_workspace = 0;
  return NULL;
}

static spora_plugin_error_t* lossy_kernel_destroy(spora_kernel_t* k) {
  free(k);
  return NULL;
}

static spora_plugin_error_t* lossy_kernel_launch(spora_kernel_t* k, const spora_devptr_t* in, const spora_devptr_t* out,
                                                 spora_devptr_t workspace, spora_stream_t* s) {
  const int64_t* x;
  uint64_t acc = 0; /* wraps like the reference */
  size_t i;
  spora_plugin_error_t* e = test_stream_check(s);
  (void)workspace;
  if (e) return e;
  x = (const int64_t*)in[0];
  for (i = 0; i < k->count; ++i) acc += (uint64_t)(int64_t)(double)x[i]; /* the bug: through a double */
  *(int64_t*)out[0] = (int64_t)acc;
  return NULL;
}

static spora_device_api_t lossy_api;

SPORA_PLUGIN_EXPORT spora_plugin_error_t* spora_plugin_entry_v1(const spora_host_t* host, spora_plugin_info_t* out) {
  if (!host || host->abi_major != SPORA_PLUGIN_ABI_MAJOR)
    return test_error(SPORA_PLUGIN_UNAVAILABLE, "[lossyi64] host speaks another plugin ABI major");
  test_fill_info(host, out, SPORA_PLUGIN_ABI_MAJOR, SPORA_PLUGIN_ABI_MINOR);
  lossy_api = test_device_api;
  lossy_api.kernel_ops = lossy_kernel_ops;
  lossy_api.kernel_create = lossy_kernel_create;
  lossy_api.kernel_destroy = lossy_kernel_destroy;
  lossy_api.kernel_launch = lossy_kernel_launch;
  out->api = &lossy_api;
  return NULL;
}
