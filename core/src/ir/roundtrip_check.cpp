// SPORA_CHECK_JSON_ROUNDTRIP: proves, on every graph the tests build, that
// the JSON form loses nothing (ir/serialize.h).
#include <cstdlib>
#include <cstring>

#include "ir/printer.h"
#include "ir/serialize.h"
#include "support/error.h"

namespace spora::ir {
namespace {

bool enabled() {
  // Read on every call (cheap next to serialising a graph) so a test can
  // switch it on and off.
  const char* v = std::getenv("SPORA_CHECK_JSON_ROUNDTRIP");
  return v && *v && std::strcmp(v, "0") != 0;
}

// Where two texts first differ, with a little context, for the message.
std::string first_difference(const std::string& a, const std::string& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  const size_t from = i > 40 ? i - 40 : 0;
  return fmt::format("at byte {}: '{}' became '{}'", i, a.substr(from, 100), b.substr(from, 100));
}

}  // namespace

void check_json_roundtrip(const Graph& g, const char* where) {
  if (!enabled()) return;
  std::string json1, json2, text1, text2;
  try {
    json1 = to_json(g);
    const Graph back = from_json(json1);
    json2 = to_json(back);
    text1 = to_text(g);
    text2 = to_text(back);
  } catch (const Error& e) {
    fail(Code::kInternal, "[json round trip] graph '{}' ({}) does not survive JSON: {}", g.name(), where, e.what());
  }
  if (json1 != json2)
    fail(Code::kInternal, "[json round trip] graph '{}' ({}): JSON changes when read back {}", g.name(), where,
         first_difference(json1, json2));
  if (text1 != text2)
    fail(Code::kInternal, "[json round trip] graph '{}' ({}): text form changes when read back from JSON {}", g.name(),
         where, first_difference(text1, text2));
}

}  // namespace spora::ir
