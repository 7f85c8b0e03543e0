/* libspora-device-noevents.so: the loader tests' minimal device table
 * without event_record. The loader accepts it (it needs only memory, copies
 * and streams), but the contract requires events: `spora plugin check` must
 * fail it and name the missing function. */
#define TEST_PLUGIN_NAME "noevents"
#include "minimal_device.h"

static spora_device_api_t noevents_api;

SPORA_PLUGIN_EXPORT spora_plugin_error_t* spora_plugin_entry_v1(const spora_host_t* host, spora_plugin_info_t* out) {
  if (!host || host->abi_major != SPORA_PLUGIN_ABI_MAJOR)
    return test_error(SPORA_PLUGIN_UNAVAILABLE, "[noevents] host speaks another plugin ABI major");
  test_fill_info(host, out, SPORA_PLUGIN_ABI_MAJOR, SPORA_PLUGIN_ABI_MINOR);
  noevents_api = test_device_api;
  noevents_api.event_record = NULL;
  out->api = &noevents_api;
  return NULL;
}
