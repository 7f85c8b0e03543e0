// The C API of the SPMD partitioner (parallel/spmd_pass.h): options and the
// report travel as JSON so the entry stays one function as the options grow.
#include <nlohmann/json.hpp>

#include "abi/abi.h"
#include "parallel/spmd_pass.h"

using spora::Code;
using spora::fail;
using spora::abi::guard;
using spora::abi::need;

namespace {

spora::parallel::PartitionOptions parse_options(const char* text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    fail(Code::kInvalidArgument, "[spora_graph_partition] options are not JSON: {}", e.what());
  }
  if (!j.is_object()) fail(Code::kInvalidArgument, "[spora_graph_partition] options must be a JSON object");
  static const char* known[] = {"mesh", "axis_names", "rank", "groups", "semi_auto", "ties"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool ok = false;
    for (const char* k : known) ok = ok || it.key() == k;
    if (!ok)
      fail(Code::kInvalidArgument,
           "[spora_graph_partition] unknown option '{}' (known: mesh, axis_names, rank, groups, semi_auto, ties)",
           it.key());
  }
  spora::parallel::PartitionOptions o;
  try {
    o.mesh.shape = j.at("mesh").get<std::vector<int64_t>>();
    if (j.contains("axis_names")) o.mesh.names = j["axis_names"].get<std::vector<std::string>>();
    o.mesh.rank = j.at("rank").get<int64_t>();
    o.mesh.groups = j.at("groups").get<std::vector<int64_t>>();
    if (j.contains("semi_auto")) o.semi_auto = j["semi_auto"].get<bool>();
    if (j.contains("ties"))
      for (auto it = j["ties"].begin(); it != j["ties"].end(); ++it)
        o.ties[static_cast<size_t>(std::stoull(it.key()))] = it.value().get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    fail(Code::kInvalidArgument, "[spora_graph_partition] bad options: {}", e.what());
  }
  return o;
}

nlohmann::json split_of(const spora::TensorLayout& l) {
  nlohmann::json a = nlohmann::json::array();
  for (int d : l.dims) a.push_back(d);
  return a;
}

}  // namespace

spora_status_t spora_graph_partition(spora_graph_t* graph, const char* options, const char** report) {
  return guard([&] {
    need(graph, "spora_graph_partition", "graph");
    need(options, "spora_graph_partition", "options");
    const spora::parallel::PartitionOptions o = parse_options(options);
    spora::parallel::PartitionResult r = spora::parallel::partition(graph->g, o);
    nlohmann::json j;
    j["mesh"] = o.mesh.shape;
    j["rank"] = o.mesh.rank;
    j["weights"] = nlohmann::json::array();
    for (const auto& w : r.weights)
      j["weights"].push_back({{"name", w.name},
                              {"shape", std::vector<int64_t>(w.global.dims, w.global.dims + w.global.rank)},
                              {"local_shape", std::vector<int64_t>(w.local.dims, w.local.dims + w.local.rank)},
                              {"split", split_of(w.layout)},
                              {"layout", w.layout.str(o.mesh.names)}});
    j["outputs"] = nlohmann::json::array();
    for (const auto& l : r.outputs) j["outputs"].push_back(l.str(o.mesh.names));
    j["decisions"] = r.decisions;
    graph->g = std::move(r.graph);
    graph->text = j.dump();
    if (report) *report = graph->text.c_str();
  });
}
