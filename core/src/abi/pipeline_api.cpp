// The C API of pipeline parallelism's graph side (parallel/pipeline_split.h):
// one stage's forward and backward graphs and a JSON report of what it
// receives, sends and owns.
#include <nlohmann/json.hpp>

#include "abi/abi.h"
#include "parallel/pipeline_split.h"

using spora::Code;
using spora::fail;
using spora::abi::guard;
using spora::abi::need;

namespace {

nlohmann::json boundary(const std::vector<spora::parallel::StageBoundary>& list) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& b : list)
    a.push_back({{"dtype", spora::dtype_name(b.meta.dtype)},
                 {"shape", std::vector<int64_t>(b.meta.shape.dims, b.meta.shape.dims + b.meta.shape.rank)},
                 {"differentiable", b.differentiable}});
  return a;
}

}  // namespace

spora_status_t spora_graph_pipeline_stage(const spora_graph_t* graph, int32_t stages, int32_t stage,
                                          const int64_t* marks, size_t num_marks, spora_graph_t** forward,
                                          spora_graph_t** backward, const char** report) {
  return guard([&] {
    need(graph, "spora_graph_pipeline_stage", "graph");
    need(forward, "spora_graph_pipeline_stage", "forward");
    need(backward, "spora_graph_pipeline_stage", "backward");
    if (num_marks) need(marks, "spora_graph_pipeline_stage", "marks");
    std::vector<spora::parallel::StageMark> m;
    for (size_t i = 0; i < num_marks; ++i) {
      const int64_t s = marks[3 * i + 2];
      if (s < 0 || s > INT32_MAX)
        fail(Code::kInvalidArgument, "[spora_graph_pipeline_stage] mark {} has stage {}", i, s);
      m.push_back({marks[3 * i], marks[3 * i + 1], static_cast<int32_t>(s)});
    }
    spora::parallel::PipelineStage st = spora::parallel::pipeline_stage(graph->g, stages, stage, m);
    nlohmann::json j = {{"stage", st.stage},          {"stages", st.stages},         {"data_inputs", st.data_inputs},
                        {"recv", boundary(st.recv)}, {"send", boundary(st.send)}, {"weights", st.weights},
                        {"ops", st.num_ops}};
    auto* f = new spora_graph{std::move(st.forward), j.dump()};
    auto* b = new spora_graph{std::move(st.backward), {}};
    *forward = f;
    *backward = b;
    if (report) *report = f->text.c_str();
  });
}
