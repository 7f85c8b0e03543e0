/* libspora-device-hangs.so: the loader tests' minimal device table whose
 * event_synchronize never returns for an event that was never recorded
 * (the contract says such an event counts as reached). `spora plugin check`
 * must give up after its timeout and name the check that hung. */
#define _POSIX_C_SOURCE 199309L /* nanosleep */
#define TEST_PLUGIN_NAME "hangs"
#include "minimal_device.h"

#include <time.h>

static spora_plugin_error_t* hangs_event_synchronize(spora_event_t* ev) {
  const struct timespec tick = {0, 10000000};
  if (!ev) return test_error(SPORA_PLUGIN_INVALID_ARGUMENT, "[hangs] NULL event");
  while (!ev->recorded) nanosleep(&tick, NULL); /* the bug: waits for a record that never comes */
  return NULL;
}

static spora_device_api_t hangs_api;

SPORA_PLUGIN_EXPORT spora_plugin_error_t* spora_plugin_entry_v1(const spora_host_t* host, spora_plugin_info_t* out) {
  if (!host || host->abi_major != SPORA_PLUGIN_ABI_MAJOR)
    return test_error(SPORA_PLUGIN_UNAVAILABLE, "[hangs] host speaks another plugin ABI major");
  test_fill_info(host, out, SPORA_PLUGIN_ABI_MAJOR, SPORA_PLUGIN_ABI_MINOR);
  hangs_api = test_device_api;
  hangs_api.event_synchronize = hangs_event_synchronize;
  out->api = &hangs_api;
  return NULL;
}
