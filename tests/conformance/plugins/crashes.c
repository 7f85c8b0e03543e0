/* libspora-device-crashes.so: the loader tests' minimal device table whose
 * stream_query dereferences the stream without checking it, so
 * stream_query(NULL, ...) crashes, and whose one kernel (mul on f32) crashes
 * when launched. `spora plugin check` must survive both (the checks run in
 * child processes), name what crashed, and go on with the next case. */
#define TEST_PLUGIN_NAME "crashes"
#include "minimal_device.h"

static spora_plugin_error_t* crashes_stream_query(spora_stream_t* s, int32_t* out_done) {
  *out_done = s->device == 0; /* the bug: no NULL check */
  return NULL;
}

struct spora_kernel {
  int unused;
};

static const char* const crashes_ops[] = {"mul", NULL};
static const char* const* crashes_kernel_ops(void) { return crashes_ops; }

static spora_plugin_error_t* crashes_kernel_create(int32_t device, const spora_kernel_desc_t* d, spora_kernel_t** out,
                                                   size_t* out_workspace) {
  static spora_kernel_t kernel;
  spora_plugin_error_t* e = test_check_device(device);
  if (e) return e;
  if (!d || !out || !out_workspace) return test_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[crashes] kernel_create: NULL argument");
  if (strcmp(d->op, "mul") != 0 || d->num_outputs != 1 || d->outputs[0].dtype != SPORA_DTYPE_F32)
    return test_error(SPORA_PLUGIN_UNIMPLEMENTED, "[crashes] only mul on f32 has a kernel");
  *out = &kernel;
  *out_workspace = 0;
  return NULL;
}

static spora_plugin_error_t* crashes_kernel_destroy(spora_kernel_t* k) {
  (void)k;
  return NULL;
}

static spora_plugin_error_t* crashes_kernel_launch(spora_kernel_t* k, const spora_devptr_t* in, const spora_devptr_t* out,
                                                   spora_devptr_t workspace, spora_stream_t* s) {
  volatile float* nowhere = NULL;
  (void)k;
  (void)in;
  (void)out;
  (void)workspace;
  (void)s;
  *nowhere = 1.0f; /* the bug */
  return NULL;
}

static spora_device_api_t crashes_api;

SPORA_PLUGIN_EXPORT spora_plugin_error_t* spora_plugin_entry_v1(const spora_host_t* host, spora_plugin_info_t* out) {
  if (!host || host->abi_major != SPORA_PLUGIN_ABI_MAJOR)
    return test_error(SPORA_PLUGIN_UNAVAILABLE, "[crashes] host speaks another plugin ABI major");
  test_fill_info(host, out, SPORA_PLUGIN_ABI_MAJOR, SPORA_PLUGIN_ABI_MINOR);
  crashes_api = test_device_api;
  crashes_api.stream_query = crashes_stream_query;
  crashes_api.kernel_ops = crashes_kernel_ops;
  crashes_api.kernel_create = crashes_kernel_create;
  crashes_api.kernel_destroy = crashes_kernel_destroy;
  crashes_api.kernel_launch = crashes_kernel_launch;
  out->api = &crashes_api;
  return NULL;
}
