// Model files (io/model.h): the safetensors layout, the graph JSON in
// __metadata__, every weight checked against its node and read (onto the sim
// device when there is one; else the checks up to the read, as Model does).
#include "fuzz_util.h"
#include "io/model.h"
#include "io/safetensors.h"
#include "ir/serialize.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = spora::fuzz::as_file(data, size);
  spora::fuzz::expect_clean("model", [&] {
    if (spora::Device* d = spora::fuzz::device()) {
      spora::io::Model m(path, d);
      return;
    }
    spora::io::SafetensorsFile f(path, "model");
    auto g = f.metadata().find("spora.graph");
    if (g == f.metadata().end()) return;
    spora::ir::Graph graph = spora::ir::from_json(g->second);
    for (int32_t id : graph.weights()) {
      const spora::io::TensorInfo* t = f.find(graph.node(id).name);
      if (t) f.read(*t);
    }
  });
  return 0;
}
