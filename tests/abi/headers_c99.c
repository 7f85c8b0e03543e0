/* Compiled as C99 with -Wall -Wextra -pedantic -Werror by the abi_headers_c99
 * test: the public headers must be plain C, must coexist in one translation
 * unit, and their structs must keep the sizes of the current minor.
 *
 * Compile-time tripwires: a struct that grows changes the plugin ABI. When
 * one of these fires, append the field at the END of the struct, bump
 * SPORA_PLUGIN_ABI_MINOR, and update the size here (x86_64 LP64 values). */
#include <spora/plugin.h>
#include <spora/spora.h>

#define SPORA_TRIPWIRE(name, cond) typedef char spora_tripwire_##name[(cond) ? 1 : -1]

#if defined(__x86_64__) && SPORA_PLUGIN_ABI_MAJOR == 1 && SPORA_PLUGIN_ABI_MINOR == 1
SPORA_TRIPWIRE(error, sizeof(spora_plugin_error_t) == 32);
SPORA_TRIPWIRE(ext, sizeof(spora_ext_t) == 24);
SPORA_TRIPWIRE(host_services, sizeof(spora_host_services_t) == 72);
SPORA_TRIPWIRE(host, sizeof(spora_host_t) == 48);
SPORA_TRIPWIRE(probe, sizeof(spora_probe_result_t) == 272);
SPORA_TRIPWIRE(info, sizeof(spora_plugin_info_t) == 64);
SPORA_TRIPWIRE(tensor_desc, sizeof(spora_tensor_desc_t) == 32);
SPORA_TRIPWIRE(attr, sizeof(spora_attr_t) == 72);
SPORA_TRIPWIRE(kernel_desc, sizeof(spora_kernel_desc_t) == 64);
SPORA_TRIPWIRE(properties, sizeof(spora_device_properties_t) == 56);
SPORA_TRIPWIRE(device_api, sizeof(spora_device_api_t) == 352);
SPORA_TRIPWIRE(memory_stats, sizeof(spora_memory_stats_t) == 40);
SPORA_TRIPWIRE(comm_id, sizeof(spora_comm_id_t) == 128);
SPORA_TRIPWIRE(collective_api, sizeof(spora_collective_api_t) == 152);
#endif

/* Enum values are ABI too. */
SPORA_TRIPWIRE(dtype_f32, SPORA_DTYPE_F32 == 1);
SPORA_TRIPWIRE(dtype_bool, SPORA_DTYPE_BOOL == 8);
SPORA_TRIPWIRE(code_internal, SPORA_PLUGIN_INTERNAL == 8);
SPORA_TRIPWIRE(status_internal, SPORA_ERROR_INTERNAL == 8);
SPORA_TRIPWIRE(reduce_avg, SPORA_REDUCE_AVG == 5); /* one enum shared by spora.h and plugin.h */
SPORA_TRIPWIRE(first_field, offsetof(spora_device_api_t, struct_size) == 0);

/* Layout: slots added by a minor go after every slot of the minors before
 * it, so a table built against 1.0 (which ends at `shutdown`) has exactly
 * the 1.0 offsets. x86_64 LP64 values. */
#if defined(__x86_64__)
SPORA_TRIPWIRE(v10_last_slot, offsetof(spora_device_api_t, shutdown) == 296);
SPORA_TRIPWIRE(v11_memory_stats, offsetof(spora_device_api_t, memory_stats) == 304);
SPORA_TRIPWIRE(v11_reset_peak, offsetof(spora_device_api_t, reset_peak_memory_stats) == 312);
SPORA_TRIPWIRE(v12_capture_begin, offsetof(spora_device_api_t, capture_begin) == 320);
SPORA_TRIPWIRE(v12_captured_destroy, offsetof(spora_device_api_t, captured_destroy) == 344);
SPORA_TRIPWIRE(stats_allocated, offsetof(spora_memory_stats_t, allocated_bytes) == 8);
SPORA_TRIPWIRE(stats_peak_reserved, offsetof(spora_memory_stats_t, peak_reserved_bytes) == 32);
#endif

int spora_headers_c99_compiles(void);
int spora_headers_c99_compiles(void) { return SPORA_PLUGIN_ABI_MAJOR; }
