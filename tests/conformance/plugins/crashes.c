/* libspora-device-crashes.so: the loader tests' minimal device table whose
 * stream_query dereferences the stream without checking it, so
 * stream_query(NULL, ...) crashes. `spora plugin check` must survive it (the
 * checks run in a child process) and name the call that crashed. */
#define TEST_PLUGIN_NAME "crashes"
#include "minimal_device.h"

static spora_plugin_error_t* crashes_stream_query(spora_stream_t* s, int32_t* out_done) {
  *out_done = s->device == 0; /* the bug: no NULL check */
  return NULL;
}

static spora_device_api_t crashes_api;

SPORA_PLUGIN_EXPORT spora_plugin_error_t* spora_plugin_entry_v1(const spora_host_t* host, spora_plugin_info_t* out) {
  if (!host || host->abi_major != SPORA_PLUGIN_ABI_MAJOR)
    return test_error(SPORA_PLUGIN_UNAVAILABLE, "[crashes] host speaks another plugin ABI major");
  test_fill_info(host, out, SPORA_PLUGIN_ABI_MAJOR, SPORA_PLUGIN_ABI_MINOR);
  crashes_api = test_device_api;
  crashes_api.stream_query = crashes_stream_query;
  out->api = &crashes_api;
  return NULL;
}
