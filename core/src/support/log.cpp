#include "support/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>

namespace spora {

spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> log = [] {
    // Log to stderr: stdout belongs to the user's program.
    auto l = spdlog::stderr_color_mt("spora");
    l->set_pattern("[spora %^%l%$] %v");
    const char* lvl = std::getenv("SPORA_LOG_LEVEL");
    l->set_level(lvl ? spdlog::level::from_str(lvl) : spdlog::level::warn);
    return l;
  }();
  return *log;
}

}  // namespace spora
