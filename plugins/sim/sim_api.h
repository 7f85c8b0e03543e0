// The functions behind the sim plugin's spora_device_api_t table, grouped by
// the file that defines them. Each one catches every exception (guard) and
// reports problems as "[sim] ..." error objects.
#pragma once
#include <spora/plugin.h>

namespace spora::sim {

// sim_entry.cpp: lifecycle and device queries
spora_plugin_error_t* initialize();
spora_plugin_error_t* device_count(int32_t* out_count);
spora_plugin_error_t* device_properties(int32_t device, spora_device_properties_t* out);
void shutdown();

// sim_copy.cpp: allocation, pinned host memory and data movement
spora_plugin_error_t* mem_alloc(int32_t device, size_t size, spora_devptr_t* out);
spora_plugin_error_t* mem_free(int32_t device, spora_devptr_t ptr);
spora_plugin_error_t* host_alloc_pinned(size_t size, void** out);
spora_plugin_error_t* host_free_pinned(void* ptr);
spora_plugin_error_t* copy_h2d(int32_t device, spora_devptr_t dst, const void* src, size_t size);
spora_plugin_error_t* copy_d2h(int32_t device, void* dst, spora_devptr_t src, size_t size);
spora_plugin_error_t* copy_d2d(int32_t device, spora_devptr_t dst, spora_devptr_t src, size_t size);
spora_plugin_error_t* memset_sync(int32_t device, spora_devptr_t dst, int32_t byte, size_t size);
spora_plugin_error_t* copy_h2d_async(spora_stream_t* stream, spora_devptr_t dst, const void* src, size_t size);
spora_plugin_error_t* copy_d2h_async(spora_stream_t* stream, void* dst, spora_devptr_t src, size_t size);
spora_plugin_error_t* copy_d2d_async(spora_stream_t* stream, spora_devptr_t dst, spora_devptr_t src, size_t size);
spora_plugin_error_t* memset_async(spora_stream_t* stream, spora_devptr_t dst, int32_t byte, size_t size);

// sim_stream_api.cpp: streams and events
spora_plugin_error_t* stream_create(int32_t device, spora_stream_t** out);
spora_plugin_error_t* stream_destroy(spora_stream_t* stream);
spora_plugin_error_t* stream_synchronize(spora_stream_t* stream);
spora_plugin_error_t* stream_query(spora_stream_t* stream, int32_t* out_done);
spora_plugin_error_t* stream_wait_event(spora_stream_t* stream, spora_event_t* event);
spora_plugin_error_t* stream_add_callback(spora_stream_t* stream, spora_host_callback_fn fn, void* user_data);
spora_plugin_error_t* event_create(int32_t device, spora_event_t** out);
spora_plugin_error_t* event_destroy(spora_event_t* event);
spora_plugin_error_t* event_record(spora_event_t* event, spora_stream_t* stream);
spora_plugin_error_t* event_query(spora_event_t* event, int32_t* out_done);
spora_plugin_error_t* event_synchronize(spora_event_t* event);
spora_plugin_error_t* event_elapsed_ms(spora_event_t* start, spora_event_t* end, double* out_ms);

// sim_kernels.cpp: kernels, run by the reference implementations
const char* const* kernel_ops();
spora_plugin_error_t* kernel_create(int32_t device, const spora_kernel_desc_t* desc, spora_kernel_t** out,
                                    size_t* out_workspace);
spora_plugin_error_t* kernel_destroy(spora_kernel_t* kernel);
spora_plugin_error_t* kernel_launch(spora_kernel_t* kernel, const spora_devptr_t* inputs,
                                    const spora_devptr_t* outputs, spora_devptr_t workspace,
                                    spora_stream_t* stream);

}  // namespace spora::sim
