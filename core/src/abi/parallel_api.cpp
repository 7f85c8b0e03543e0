// The C API of the SPMD partitioner (parallel/spmd_pass.h): options and the
// report travel as JSON so the entry stays one function as the options grow.
#include <nlohmann/json.hpp>

#include "abi/abi.h"
#include "parallel/search.h"
#include "parallel/spmd_pass.h"

using spora::Code;
using spora::fail;
using spora::abi::guard;
using spora::abi::need;

namespace {

struct Options {
  spora::parallel::PartitionOptions partition;
  bool search = false;  // "search": "dynamic_programming"
  spora::parallel::SearchOptions plan;
};

double number(const nlohmann::json& j, const char* key, double fallback) {
  return j.contains(key) ? j[key].get<double>() : fallback;
}

Options parse_options(const char* text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    fail(Code::kInvalidArgument, "[spora_graph_partition] options are not JSON: {}", e.what());
  }
  if (!j.is_object()) fail(Code::kInvalidArgument, "[spora_graph_partition] options must be a JSON object");
  static const char* known[] = {"mesh", "axis_names", "rank", "groups", "semi_auto", "ties",
                                "search", "device", "topology", "memory_limit", "weights"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool ok = false;
    for (const char* k : known) ok = ok || it.key() == k;
    if (!ok)
      fail(Code::kInvalidArgument,
           "[spora_graph_partition] unknown option '{}' (known: mesh, axis_names, rank, groups, semi_auto, ties, search, device, topology, "
           "memory_limit, weights)",
           it.key());
  }
  Options opts;
  spora::parallel::PartitionOptions& o = opts.partition;
  try {
    o.mesh.shape = j.at("mesh").get<std::vector<int64_t>>();
    if (j.contains("axis_names")) o.mesh.names = j["axis_names"].get<std::vector<std::string>>();
    o.mesh.rank = j.at("rank").get<int64_t>();
    o.mesh.groups = j.at("groups").get<std::vector<int64_t>>();
    if (j.contains("semi_auto")) o.semi_auto = j["semi_auto"].get<bool>();
    if (j.contains("ties"))
      for (auto it = j["ties"].begin(); it != j["ties"].end(); ++it)
        o.ties[static_cast<size_t>(std::stoull(it.key()))] = it.value().get<std::string>();
    if (j.contains("search")) {
      const std::string mode = j["search"].get<std::string>();
      if (mode != "dynamic_programming")
        fail(Code::kInvalidArgument,
             "[spora_graph_partition] unknown search '{}' (known: dynamic_programming; leave it out to propagate "
             "from the annotated ops)",
             mode);
      opts.search = true;
    }
    spora::parallel::SearchOptions& s = opts.plan;
    if (j.contains("device")) {
      const auto& d = j["device"];
      s.device.peak_flops = number(d, "peak_flops", s.device.peak_flops);
      s.device.mem_bandwidth = number(d, "mem_bandwidth", s.device.mem_bandwidth);
      s.device.memory_bytes = number(d, "memory_bytes", s.device.memory_bytes);
    }
    if (j.contains("topology")) {
      const auto& t = j["topology"];
      s.topology.devices_per_node = t.contains("devices_per_node") ? t["devices_per_node"].get<int64_t>()
                                                                   : s.topology.devices_per_node;
      s.topology.intra.bandwidth = number(t, "intra_bandwidth", s.topology.intra.bandwidth);
      s.topology.intra.latency = number(t, "intra_latency", s.topology.intra.latency);
      s.topology.inter.bandwidth = number(t, "inter_bandwidth", s.topology.inter.bandwidth);
      s.topology.inter.latency = number(t, "inter_latency", s.topology.inter.latency);
    }
    s.memory_limit = number(j, "memory_limit", 0);
    // Weights already split by an earlier plan: {name: [mesh axis or -1 per dim]}.
    if (j.contains("weights"))
      for (auto it = j["weights"].begin(); it != j["weights"].end(); ++it) {
        spora::TensorLayout l;
        l.dims = it.value().get<std::vector<int>>();
        for (int a : l.dims)
          if (a < -1 || a >= static_cast<int>(o.mesh.shape.size()))
            fail(Code::kInvalidArgument, "[spora_graph_partition] weights['{}']: mesh axis {} outside the {}-axis mesh",
                 it.key(), a, o.mesh.shape.size());
        for (int& a : l.dims)
          if (a < 0) a = spora::kReplicated;
        o.weights[it.key()] = l;
        s.fixed_weights[it.key()] = l;
      }
  } catch (const nlohmann::json::exception& e) {
    fail(Code::kInvalidArgument, "[spora_graph_partition] bad options: {}", e.what());
  }
  opts.plan.mesh = o.mesh;
  opts.plan.ties = o.ties;
  return opts;
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
    Options opts = parse_options(options);
    const spora::parallel::PartitionOptions& o = opts.partition;
    nlohmann::json j;
    if (opts.search) {
      // auto_parallel: the search plans every node, the pass applies the plan.
      const spora::parallel::SearchResult s = spora::parallel::search(graph->g, opts.plan);
      opts.partition.strategies = s.strategies;
      opts.partition.weights = s.weights;
      opts.partition.semi_auto = false;
      nlohmann::json ops = nlohmann::json::array();
      for (const auto& n : s.nodes) {
        std::vector<std::string> in, out;
        for (const auto& l : n.in) in.push_back(l.str(o.mesh.names));
        for (const auto& l : n.out) out.push_back(l.str(o.mesh.names));
        ops.push_back({{"node", n.node}, {"op", n.op}, {"strategy", n.strategy}, {"in", in}, {"out", out},
                       {"compute_s", n.compute}, {"comm_s", n.comm}, {"candidates", n.candidates}});
      }
      j["plan"] = {{"search", "dynamic_programming"},
                   {"ops", ops},
                   {"compute_s", s.compute_time},
                   {"comm_s", s.comm_time},
                   {"step_time_s", s.step_time},
                   {"weight_bytes", s.weight_bytes},
                   {"activation_bytes", s.activation_bytes},
                   {"memory_bytes", s.memory_bytes},
                   {"memory_limit", s.memory_limit},
                   {"fits", s.fits},
                   {"lambda", s.lambda},
                   {"evaluations", s.evaluations}};
    }
    spora::parallel::PartitionResult r = spora::parallel::partition(graph->g, o);
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
