// The core's logger (spdlog), level from SPORA_LOG_LEVEL
// (trace|debug|info|warn|error|off; default warn). Plugins log through the
// host services' sink, which forwards here.
#pragma once
#include <spdlog/spdlog.h>

namespace spora {

spdlog::logger& logger();

}  // namespace spora
