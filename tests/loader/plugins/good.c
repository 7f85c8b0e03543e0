/* libspora-device-good.so: a minimal but real device plugin. One device,
 * malloc memory, memcpy copies, inline streams, no kernels. */
#define TEST_PLUGIN_NAME "good"
#include "minimal_device.h"

SPORA_PLUGIN_EXPORT void spora_plugin_probe_v1(spora_probe_result_t* out) {
  out->score = 1;
  out->reason[0] = '\0';
}

SPORA_PLUGIN_EXPORT spora_plugin_error_t* spora_plugin_entry_v1(const spora_host_t* host, spora_plugin_info_t* out) {
  if (!host || host->abi_major != SPORA_PLUGIN_ABI_MAJOR)
    return test_error(SPORA_PLUGIN_UNAVAILABLE, "[good] host speaks another plugin ABI major");
  test_fill_info(host, out, SPORA_PLUGIN_ABI_MAJOR, SPORA_PLUGIN_ABI_MINOR);
  return NULL;
}
