/* libspora-device-noentry.so: exports the probe symbol only -- no
 * spora_plugin_entry_v1. The loader must refuse it without calling anything. */
#include <spora/plugin.h>

SPORA_PLUGIN_EXPORT void spora_plugin_probe_v1(spora_probe_result_t* out) {
  out->score = 100;
  out->reason[0] = '\0';
}
