/* Just enough of a plugin to link against a vendor library: packaging is
 * under test here, not loading (the probe reports no device). */
#include <spora/plugin.h>
#include <stddef.h>
#include <stdlib.h>

int vendor_device_count(void);

SPORA_PLUGIN_EXPORT void spora_plugin_probe_v1(spora_probe_result_t* out) {
  (void)out;
  /* libc as well, so dpkg-shlibdeps has something Debian owns to report. */
  if (getenv("SPORA_FAKE_VENDOR") != NULL) (void)vendor_device_count();
}

SPORA_PLUGIN_EXPORT spora_plugin_error_t* spora_plugin_entry_v1(const spora_host_t* host, spora_plugin_info_t* out) {
  (void)host;
  (void)out;
  return NULL;
}
