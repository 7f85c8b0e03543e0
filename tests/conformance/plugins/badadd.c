/* libspora-device-badadd.so: a complete, well-behaved device plugin (the
 * loader tests' minimal table) with one deliberately wrong kernel: `add` on
 * f32 subtracts. `spora plugin check` must fail it and name `add`. */
#define TEST_PLUGIN_NAME "badadd"
#include "minimal_device.h"

/* One f32 tensor description the kernel accepts: dense, rank <= 8. */
static int badadd_f32(const spora_tensor_desc_t* t) {
  return t->dtype == SPORA_DTYPE_F32 && t->strides == NULL && t->rank >= 0 && t->rank <= SPORA_MAX_RANK &&
         (t->rank == 0 || t->dims != NULL);
}

static int badadd_same_shape(const spora_tensor_desc_t* a, const spora_tensor_desc_t* b) {
  int i;
  if (a->rank != b->rank) return 0;
  for (i = 0; i < a->rank; ++i)
    if (a->dims[i] != b->dims[i]) return 0;
  return 1;
}

struct spora_kernel {
  size_t count;
};

static const char* const badadd_ops[] = {"add", NULL};
static const char* const* badadd_kernel_ops(void) { return badadd_ops; }

static spora_plugin_error_t* badadd_kernel_create(int32_t device, const spora_kernel_desc_t* d, spora_kernel_t** out,
                                                  size_t* out_workspace) {
  spora_plugin_error_t* e = test_check_device(device);
  spora_kernel_t* k;
  size_t n = 1;
  int i;
  if (e) return e;
  if (!d || !out || !out_workspace) return test_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[badadd] kernel_create: NULL argument");
  if (strcmp(d->op, "add") != 0) return test_error(SPORA_PLUGIN_UNIMPLEMENTED, "[badadd] only add has a kernel");
  if (d->num_inputs != 2 || d->num_outputs != 1 || !badadd_f32(&d->inputs[0]) || !badadd_f32(&d->inputs[1]) ||
      !badadd_f32(&d->outputs[0]) || !badadd_same_shape(&d->inputs[0], &d->outputs[0]) ||
      !badadd_same_shape(&d->inputs[1], &d->outputs[0]))
    return test_error(SPORA_PLUGIN_UNIMPLEMENTED, "[badadd] add: only f32 without broadcasting");
  for (i = 0; i < d->outputs[0].rank; ++i) n *= (size_t)d->outputs[0].dims[i];
  k = (spora_kernel_t*)malloc(sizeof *k);
  if (!k) return test_error(SPORA_PLUGIN_OUT_OF_MEMORY, "[badadd] kernel_create: out of memory");
  k->count = n;
  *out = k;
  *out_workspace = 0;
  return NULL;
}

static spora_plugin_error_t* badadd_kernel_destroy(spora_kernel_t* k) {
  free(k);
  return NULL;
}

static spora_plugin_error_t* badadd_kernel_launch(spora_kernel_t* k, const spora_devptr_t* in, const spora_devptr_t* out,
                                                  spora_devptr_t workspace, spora_stream_t* s) {
  const float* a;
  const float* b;
  float* y;
  size_t i;
  spora_plugin_error_t* e = test_stream_check(s);
  (void)workspace;
  if (e) return e;
  a = (const float*)in[0];
  b = (const float*)in[1];
  y = (float*)out[0];
  for (i = 0; i < k->count; ++i) y[i] = a[i] - b[i]; /* the bug: subtracts */
  return NULL;
}

static spora_device_api_t badadd_api;

SPORA_PLUGIN_EXPORT spora_plugin_error_t* spora_plugin_entry_v1(const spora_host_t* host, spora_plugin_info_t* out) {
  if (!host || host->abi_major != SPORA_PLUGIN_ABI_MAJOR)
    return test_error(SPORA_PLUGIN_UNAVAILABLE, "[badadd] host speaks another plugin ABI major");
  test_fill_info(host, out, SPORA_PLUGIN_ABI_MAJOR, SPORA_PLUGIN_ABI_MINOR);
  badadd_api = test_device_api;
  badadd_api.kernel_ops = badadd_kernel_ops;
  badadd_api.kernel_create = badadd_kernel_create;
  badadd_api.kernel_destroy = badadd_kernel_destroy;
  badadd_api.kernel_launch = badadd_kernel_launch;
  out->api = &badadd_api;
  return NULL;
}
