#include "parallel/pipeline_split.h"

#include <algorithm>
#include <map>
#include <utility>

#include "autodiff/grad.h"
#include "parallel/cost_model.h"
#include "support/error.h"

namespace spora::parallel {
namespace {

using ir::Graph;
using ir::Node;
using ir::NodeKind;
using ir::Value;

bool is_op(const Node& n) { return n.kind != NodeKind::kInput && n.kind != NodeKind::kWeight && n.kind != NodeKind::kConstant; }

std::string op_name(const Node& n) {
  if (n.kind == NodeKind::kApply && n.op) return n.op->name;
  return ir::node_kind_name(n.kind);
}

// Per value (node, output) of g: the latest stage reading it (-1: none).
std::map<std::pair<int32_t, int32_t>, int32_t> last_readers(const Graph& g, const std::vector<int32_t>& stage) {
  std::map<std::pair<int32_t, int32_t>, int32_t> last;
  for (size_t id = 0; id < g.nodes().size(); ++id) {
    const Node& n = g.node(static_cast<int32_t>(id));
    if (!is_op(n)) continue;
    for (Value v : n.inputs) {
      auto& l = last.try_emplace({v.node, v.index}, -1).first->second;
      l = std::max(l, stage[id]);
    }
  }
  return last;
}

}  // namespace

std::vector<StageMark> balanced_marks(const Graph& g, int32_t stages) {
  if (stages < 1) fail(Code::kInvalidArgument, "[pipeline] pipeline_stages must be >= 1, got {}", stages);
  const size_t n = g.nodes().size();
  // Each op's time on one device (the cost model's roofline), as prefix sums.
  const CostModel model({1}, DeviceSpec{}, Topology{});
  std::vector<double> before(n + 1, 0);  // before[i]: the time of ops with id < i
  for (size_t id = 0; id < n; ++id) {
    const Node& node = g.node(static_cast<int32_t>(id));
    double t = 0;
    if (node.kind == NodeKind::kApply) {
      std::vector<TensorMeta> in;
      for (Value v : node.inputs) in.push_back(g.meta(v));
      t = model.op_time(*node.op, in, node.attrs, 1);
    }
    before[id + 1] = before[id] + t;
  }
  // Bytes live across a cut before node i: op outputs made before i and
  // read at or after it (a difference array over (producer, last reader]).
  std::vector<double> cross(n + 2, 0);
  std::vector<int32_t> last(n, -1);
  for (size_t id = 0; id < n; ++id)
    for (Value v : g.node(static_cast<int32_t>(id)).inputs) last[static_cast<size_t>(v.node)] = static_cast<int32_t>(id);
  for (Value v : g.outputs()) last[static_cast<size_t>(v.node)] = static_cast<int32_t>(n);
  for (size_t id = 0; id < n; ++id) {
    const Node& node = g.node(static_cast<int32_t>(id));
    if (!is_op(node) || last[id] <= static_cast<int32_t>(id)) continue;
    double bytes = 0;
    for (const TensorMeta& m : node.outputs) bytes += static_cast<double>(m.shape.numel()) * dtype_size(m.dtype);
    cross[id + 1] += bytes;
    cross[static_cast<size_t>(last[id]) + 1] -= bytes;
  }
  for (size_t i = 1; i <= n + 1; ++i) cross[i] += cross[i - 1];
  // A cut may not separate two readers of one weight.
  std::vector<bool> allowed(n + 1, true);
  for (int32_t w : g.weights()) {
    int32_t lo = -1, hi = -1;
    for (size_t id = 0; id < n; ++id)
      for (Value v : g.node(static_cast<int32_t>(id)).inputs)
        if (v.node == w) {
          if (lo < 0) lo = static_cast<int32_t>(id);
          hi = static_cast<int32_t>(id);
        }
    for (int32_t i = lo + 1; lo >= 0 && i <= hi; ++i) allowed[static_cast<size_t>(i)] = false;
  }
  // Cut j near total * j / stages: among the cuts within a tenth of a
  // stage's time of the target, the one with the fewest bytes crossing
  // (the activation sent per micro-batch); else the nearest allowed.
  const double total = before[n], window = total / stages * 0.1;
  std::vector<int64_t> cuts = {0};
  for (int32_t j = 1; j < stages; ++j) {
    const double target = total * j / stages;
    int64_t best = -1, nearest = -1;
    for (size_t i = static_cast<size_t>(cuts.back()) + 1; i < n; ++i) {
      if (!allowed[i] || g.node(static_cast<int32_t>(i)).kind != NodeKind::kApply) continue;
      if (nearest < 0 || std::abs(before[i] - target) < std::abs(before[static_cast<size_t>(nearest)] - target))
        nearest = static_cast<int64_t>(i);
      if (std::abs(before[i] - target) <= window &&
          (best < 0 || cross[i] < cross[static_cast<size_t>(best)] * (1 - 1e-12)))
        best = static_cast<int64_t>(i);
    }
    if (best < 0) best = nearest;
    if (best < 0)
      fail(Code::kInvalidArgument,
           "[pipeline] cannot split the network into {} balanced stages: too few ops between weights shared by "
           "several ops (give cells pipeline_stage instead)",
           stages);
    cuts.push_back(best);
  }
  cuts.push_back(static_cast<int64_t>(n));
  std::vector<StageMark> marks;
  for (int32_t j = 0; j < stages; ++j)
    marks.push_back({cuts[static_cast<size_t>(j)], cuts[static_cast<size_t>(j) + 1], j});
  return marks;
}

std::vector<int32_t> assign_stages(const Graph& g, int32_t stages, const std::vector<StageMark>& given) {
  if (stages < 1) fail(Code::kInvalidArgument, "[pipeline] pipeline_stages must be >= 1, got {}", stages);
  const std::vector<StageMark> marks = given.empty() && stages > 1 ? balanced_marks(g, stages) : given;
  const size_t n = g.nodes().size();
  std::vector<int32_t> marked(n, -1), stage(n, -1);
  for (const StageMark& m : marks) {
    if (m.stage < 0 || m.stage >= stages)
      fail(Code::kInvalidArgument,
           "[pipeline] a cell has pipeline_stage {} but pipeline_stages is {} (stages are 0..{})", m.stage, stages,
           stages - 1);
    if (m.first < 0 || m.end < m.first || m.end > static_cast<int64_t>(n))
      fail(Code::kInvalidArgument, "[pipeline] stage mark [{}, {}) is outside the graph's {} nodes", m.first, m.end, n);
    for (int64_t id = m.first; id < m.end; ++id)
      if (marked[static_cast<size_t>(id)] < 0) marked[static_cast<size_t>(id)] = m.stage;
  }
  std::vector<int32_t> count(static_cast<size_t>(stages), 0);
  for (size_t id = 0; id < n; ++id) {
    const Node& node = g.node(static_cast<int32_t>(id));
    if (!is_op(node)) continue;
    int32_t latest = 0;  // the latest stage among what it reads
    int32_t from = -1;
    for (Value v : node.inputs)
      if (stage[static_cast<size_t>(v.node)] > latest) {
        latest = stage[static_cast<size_t>(v.node)];
        from = v.node;
      }
    int32_t s = marked[id] >= 0 ? marked[id] : latest;
    if (s < latest) {
      const Node& p = g.node(from);
      fail(Code::kInvalidArgument,
           "{}",
           ir::with_loc(fmt::format("[pipeline] op '{}' is in pipeline stage {} but reads the output of '{}'{} "
                                    "computed in stage {}: stages must follow the data flow (give the cell that "
                                    "runs it a pipeline_stage >= {})",
                                    op_name(node), s, op_name(p), p.loc.empty() ? "" : " (" + p.loc.str() + ")",
                                    latest, latest),
                        node.loc));
    }
    stage[id] = s;
    ++count[static_cast<size_t>(s)];
  }
  for (int32_t s = 0; s < stages; ++s)
    if (count[static_cast<size_t>(s)] == 0)
      fail(Code::kInvalidArgument,
           "[pipeline] pipeline stage {} of {} has no ops: give a cell of the network pipeline_stage = {} (cells "
           "run in stage order; ops outside any marked cell follow the stage of what they read)",
           s, stages, s);
  // A weight read by two stages would need its gradient summed across them.
  for (int32_t w : g.weights()) {
    int32_t first = -1;
    for (size_t id = 0; id < n; ++id) {
      const Node& node = g.node(static_cast<int32_t>(id));
      if (!is_op(node)) continue;
      for (Value v : node.inputs) {
        if (v.node != w) continue;
        if (first < 0) first = stage[id];
        if (stage[id] != first)
          fail(Code::kInvalidArgument, "{}",
               ir::with_loc(fmt::format("[pipeline] Parameter '{}' is read in pipeline stages {} and {} ('{}'); a "
                                        "weight shared across stages is not supported: give it its own copy per "
                                        "stage or put its readers in one stage",
                                        g.node(w).name, first, stage[id], op_name(node)),
                            node.loc));
      }
    }
  }
  return stage;
}

PipelineStage pipeline_stage(const Graph& g, int32_t stages, int32_t k, const std::vector<StageMark>& marks) {
  if (k < 0 || k >= stages)
    fail(Code::kInvalidArgument, "[pipeline] stage {} is outside 0..{}", k, stages - 1);
  if (g.outputs().size() != 1)
    fail(Code::kInvalidArgument,
         "[pipeline] a pipelined network returns its loss only (one scalar); this one returns {} values",
         g.outputs().size());
  const Value loss = g.outputs()[0];
  const TensorMeta& lm = g.meta(loss);
  if (lm.shape.rank != 0 || !dtype_is_float(lm.dtype))
    fail(Code::kInvalidArgument, "[pipeline] a pipelined network returns a scalar float loss; got {} {}",
         dtype_name(lm.dtype), lm.shape.str());
  const std::vector<int32_t> stage = assign_stages(g, stages, marks);
  auto last = last_readers(g, stage);
  // The loss leaves the last stage (it is what that stage returns).
  if (stage[static_cast<size_t>(loss.node)] >= 0 && stage[static_cast<size_t>(loss.node)] != stages - 1)
    fail(Code::kInvalidArgument, "[pipeline] the loss is computed in stage {}, not the last ({})",
         stage[static_cast<size_t>(loss.node)], stages - 1);

  // Boundary lists: crossing(j) = op values made in a stage <= j and read in a stage > j.
  auto crossing = [&](int32_t j) {
    std::vector<Value> out;
    for (const auto& [v, l] : last) {
      const int32_t made = stage[static_cast<size_t>(v.first)];
      if (made >= 0 && made <= j && l > j) out.push_back({v.first, v.second});
    }
    return out;  // map order: by node id, then output
  };
  const std::vector<Value> in_list = k > 0 ? crossing(k - 1) : std::vector<Value>{};
  const std::vector<Value> out_list = k < stages - 1 ? crossing(k) : std::vector<Value>{loss};

  PipelineStage r;
  r.stage = k;
  r.stages = stages;
  auto used_here = [&](int32_t node) {
    for (size_t id = 0; id < g.nodes().size(); ++id) {
      if (stage[id] != k) continue;
      for (Value v : g.node(static_cast<int32_t>(id)).inputs)
        if (v.node == node) return true;
    }
    return false;
  };
  const std::vector<int32_t> inputs = g.inputs();
  for (size_t i = 0; i < inputs.size(); ++i)
    if (used_here(inputs[i])) r.data_inputs.push_back(static_cast<int32_t>(i));
  for (Value v : in_list) r.recv.push_back({g.meta(v), dtype_is_float(g.meta(v).dtype)});
  if (k < stages - 1)
    for (Value v : out_list) r.send.push_back({g.meta(v), dtype_is_float(g.meta(v).dtype)});
  for (int32_t w : g.weights())
    if (used_here(w)) r.weights.push_back(g.node(w).name);

  // The stage's graph: inputs (data, received values, then -- for the
  // backward graph -- a cotangent per differentiable sent value), weights
  // (executables bind inputs, then weights, in creation order), its ops.
  struct Built {
    Graph g;
    std::vector<int32_t> recv, weights;
    std::vector<Value> outs, cot;  // cot[j]: cotangent of outs[j] (invalid if none)
  };
  auto build = [&](bool cotangents) {
    Built b;
    b.g = Graph(g.name() + "_stage" + std::to_string(k));
    std::map<std::pair<int32_t, int32_t>, Value> map;
    for (int32_t i : r.data_inputs) {
      const Node& n = g.node(inputs[static_cast<size_t>(i)]);
      map[{inputs[static_cast<size_t>(i)], 0}] = b.g.add_input(n.name, n.outputs[0].dtype, n.outputs[0].shape);
    }
    for (size_t i = 0; i < in_list.size(); ++i) {
      const TensorMeta& m = r.recv[i].meta;
      const Value v = b.g.add_input("pipe_recv" + std::to_string(i), m.dtype, m.shape);
      map[{in_list[i].node, in_list[i].index}] = v;
      b.recv.push_back(v.node);
    }
    b.cot.assign(out_list.size(), Value{});
    if (cotangents)
      for (size_t j = 0; j < r.send.size(); ++j)
        if (r.send[j].differentiable)
          b.cot[j] = b.g.add_input("pipe_grad" + std::to_string(j), r.send[j].meta.dtype, r.send[j].meta.shape);
    for (int32_t w : g.weights()) {
      if (!used_here(w)) continue;
      const Node& n = g.node(w);
      const Value v = b.g.add_weight(n.name, n.outputs[0].dtype, n.outputs[0].shape);
      map[{w, 0}] = v;
      b.weights.push_back(v.node);
    }
    for (size_t id = 0; id < g.nodes().size(); ++id) {
      const Node& n = g.node(static_cast<int32_t>(id));
      const bool constant_here = n.kind == NodeKind::kConstant && used_here(static_cast<int32_t>(id));
      if (!constant_here && stage[id] != k) continue;
      Node copy = n;
      for (Value& v : copy.inputs) {
        auto it = map.find({v.node, v.index});
        if (it == map.end())
          fail(Code::kInternal, "[pipeline] stage {}: input {}:{} of '{}' was not carried to the stage", k, v.node,
               v.index, op_name(n));
        v = it->second;
      }
      const int32_t nid = b.g.append(std::move(copy));
      for (size_t j = 0; j < n.outputs.size(); ++j)
        map[{static_cast<int32_t>(id), static_cast<int32_t>(j)}] = {nid, static_cast<int32_t>(j)};
    }
    for (Value v : out_list) b.outs.push_back(map.at({v.node, v.index}));
    b.g.set_outputs(b.outs);
    return b;
  };
  Built fwd = build(false);
  for (size_t id = 0; id < g.nodes().size(); ++id) r.num_ops += stage[id] == k;
  r.forward = fwd.g;

  // Backward: gradients of the differentiable received values and of the
  // weights, of the loss (last stage) or of sum_j <sent_j, cotangent_j>.
  auto wrt_of = [&](const Built& b) {
    std::vector<int32_t> wrt;
    for (size_t i = 0; i < b.recv.size(); ++i)
      if (r.recv[i].differentiable) wrt.push_back(b.recv[i]);
    wrt.insert(wrt.end(), b.weights.begin(), b.weights.end());
    return wrt;
  };
  if (k == stages - 1) {
    r.backward = autodiff::value_and_grad(fwd.g, wrt_of(fwd), 0);  // outputs: loss, then the gradients
    return r;
  }
  Built bw = build(true);
  Graph& b = bw.g;
  std::vector<std::pair<Value, Value>> pairs;  // (sent value, its cotangent input)
  for (size_t j = 0; j < bw.outs.size(); ++j)
    if (bw.cot[j].valid()) pairs.push_back({bw.outs[j], bw.cot[j]});
  if (pairs.empty())
    fail(Code::kInvalidArgument,
         "[pipeline] stage {} sends no float value to stage {}: no gradient can reach its ops", k, k + 1);
  Graph grads;
  if (pairs.size() == 1) {
    // One sent value: its cotangent seeds the backward pass directly.
    b.set_outputs({pairs[0].first});
    grads = autodiff::value_and_grad(b, wrt_of(bw), 0, pairs[0].second);
  } else {
    Value total;
    for (const auto& [y, dy] : pairs) {
      Value t = b.add_op("mul", {y, dy}, Attrs{})[0];
      if (b.meta(t).shape.rank > 0) t = b.add_op("sum", {t}, Attrs{})[0];
      if (b.meta(t).dtype != SPORA_DTYPE_F32) {
        Attrs c;
        c.set("dtype", AttrValue::of_string("f32"));
        t = b.add_op("cast", {t}, c)[0];
      }
      total = total.valid() ? b.add_op("add", {total, t}, Attrs{})[0] : t;
    }
    b.set_outputs({total});
    grads = autodiff::value_and_grad(b, wrt_of(bw), 0);
  }
  std::vector<Value> g_outs(grads.outputs().begin() + 1, grads.outputs().end());  // drop the objective
  grads.set_outputs(g_outs);
  r.backward = std::move(grads);
  return r;
}

}  // namespace spora::parallel
