// State shared by the cpu plugin's files. The cpu device is the host: device
// addresses are host pointers and every stream runs work inline on the
// calling thread, so a launch has no queueing cost.
#pragma once
#include <spora/plugin.h>

#include <string>

#include "cpu_api.h"

namespace spora::cpu {

// The host's services, kept from entry (valid for the process lifetime).
extern const spora_host_t* g_host;

void log(int32_t level, const std::string& msg);

}  // namespace spora::cpu
