/* libspora-device-probezero.so: its probe says it cannot run here. The
 * loader must not call the entry (which would abort, to prove it). */
#include <spora/plugin.h>

#include <stdlib.h>
#include <string.h>

SPORA_PLUGIN_EXPORT void spora_plugin_probe_v1(spora_probe_result_t* out) {
  static const char why[] = "no XYZ driver (install libxyz.so.1 or set LD_LIBRARY_PATH)";
  out->score = 0;
  if (out->struct_size >= sizeof(spora_probe_result_t)) memcpy(out->reason, why, sizeof why);
}

SPORA_PLUGIN_EXPORT spora_plugin_error_t* spora_plugin_entry_v1(const spora_host_t* host, spora_plugin_info_t* out) {
  (void)host;
  (void)out;
  abort(); /* a probe of 0 means: never enter */
}
