// Graph JSON (ir/serialize.h): parse, type-check, bound and verify; a graph
// that loads must write back out and load again.
#include "fuzz_util.h"
#include "ir/serialize.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  spora::fuzz::expect_clean("graph_json", [&] {
    spora::ir::Graph g = spora::ir::from_json(text);
    const std::string again = spora::ir::to_json(g);
    try {
      spora::ir::from_json(again);
    } catch (const spora::Error& e) {
      spora::fuzz::report_escape("graph_json (a loaded graph does not load back)", e.what());
    }
  });
  return 0;
}
