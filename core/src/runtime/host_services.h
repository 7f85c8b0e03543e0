// The host-services table libspora hands every plugin (spora_host_t).
#pragma once
#include <spora/plugin.h>

#include <string>

namespace spora {

// The process-wide host description (valid for the life of the process).
const spora_host_t* host_description();

// Config lookup shared with plugins: key "a.b" reads SPORA_A_B from the
// environment. Returns false when unset.
bool config_lookup(const std::string& key, std::string* value);

}  // namespace spora
