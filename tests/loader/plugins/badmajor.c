/* libspora-device-badmajor.so: a complete device plugin whose entry claims
 * plugin ABI 2.0. The v1 symbol exists, so only the version handshake can
 * catch it: the loader must refuse it before touching the table. */
#define TEST_PLUGIN_NAME "badmajor"
#include "minimal_device.h"

SPORA_PLUGIN_EXPORT spora_plugin_error_t* spora_plugin_entry_v1(const spora_host_t* host, spora_plugin_info_t* out) {
  test_fill_info(host, out, 2, 0);
  return NULL;
}
