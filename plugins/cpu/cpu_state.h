// State shared by the cpu plugin's files. The cpu device is the host: device
// addresses are host pointers and every stream runs work inline on the
// calling thread, so a launch has no queueing cost.
#pragma once
#include <spora/plugin.h>

#include <string>

namespace spora::cpu {

// The host's services, kept from entry (valid for the process lifetime).
extern const spora_host_t* g_host;

void log(int32_t level, const std::string& msg);

// Table pieces defined in the other files.
void fill_memory_api(spora_device_api_t* t);
void fill_stream_api(spora_device_api_t* t);
void fill_kernel_api(spora_device_api_t* t);

}  // namespace spora::cpu
