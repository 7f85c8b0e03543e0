/* libspora-device-initfail.so: handshakes fine, but `initialize` fails the
 * way a plugin without its driver would. The loader must record the message
 * as the reason and never call the plugin again. */
#define TEST_PLUGIN_NAME "initfail"
#define TEST_PLUGIN_INIT_ERROR "[initfail] no device: driver missing"
#include "minimal_device.h"

SPORA_PLUGIN_EXPORT spora_plugin_error_t* spora_plugin_entry_v1(const spora_host_t* host, spora_plugin_info_t* out) {
  test_fill_info(host, out, SPORA_PLUGIN_ABI_MAJOR, SPORA_PLUGIN_ABI_MINOR);
  return NULL;
}
