/* libspora-device-oldminor.so: a complete device plugin that reports plugin
 * ABI 1.<TEST_REPORTED_MINOR> (compile-time define, default 0).
 *
 * Under the default floor it loads (and its device's properties.name records
 * the host version and floor it was told at entry). With the host's floor
 * raised above the reported minor (SPORA_PLUGIN_ABI_MINOR_FLOOR), the loader
 * must refuse it after the handshake. */
#ifndef TEST_REPORTED_MINOR
#define TEST_REPORTED_MINOR 0
#endif
#define TEST_PLUGIN_NAME "oldminor"
#include "minimal_device.h"

SPORA_PLUGIN_EXPORT spora_plugin_error_t* spora_plugin_entry_v1(const spora_host_t* host, spora_plugin_info_t* out) {
  test_fill_info(host, out, SPORA_PLUGIN_ABI_MAJOR, TEST_REPORTED_MINOR);
  return NULL;
}
