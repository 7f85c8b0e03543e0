// allreduce_fusion: gradient all-reduces fused into buckets (what PyTorch
// DDP's and MindSpore's gradient buckets do). The SPMD pass reduces each
// partial-sum gradient right before its optimizer update, one collective
// per weight: a transformer step pays the collective's latency hundreds of
// times (docs/parallel.md, "Pipelined plans": 2(n-1) alpha per tensor).
// Here the all_reduces whose every reader is an optimizer update ("*_update"
// ops: nothing else can run between them and the end of the step) and that
// share a communicator, reduce op and dtype are packed in node order into
// buckets of at most SPORA_ALLREDUCE_BUCKET_MB (default 25) MiB and 64
// tensors: each bucket is one all_reduce of the members flattened and
// concatenated, split and reshaped back. The numbers do not change (an
// all_reduce is elementwise across ranks). Members join buckets in the
// order backward makes their gradients (by the node producing each), and
// the graph is re-emitted in dependency order with every bucket (and every
// lone gradient all_reduce) placed as soon as its gradients exist: the
// scheduler then starts it while backward goes on with the earlier layers
// (sched/plan_overlap.cpp) and waits for it at the first update reading it.
#include <algorithm>
#include <cstdlib>
#include <map>
#include <queue>
#include <string>
#include <vector>

#include "passes/allreduce_fusion.h"
#include "passes/pass.h"
#include "support/error.h"

namespace spora::passes {
namespace {

using ir::Graph;
using ir::Node;
using ir::NodeKind;
using ir::Value;

constexpr size_t kMaxMembers = 64;  // concat's and split's operand limit

bool is_update(const Node& n) {
  return n.kind == NodeKind::kApply && n.op && n.op->name.size() > 7 &&
         n.op->name.compare(n.op->name.size() - 7, 7, "_update") == 0;
}

bool fuse(Graph& g, const PassContext&) {
  const double limit = gradient_bucket_bytes();
  if (limit <= 0) return false;
  const size_t n = g.nodes().size();
  // Readers of each node.
  std::vector<std::vector<int32_t>> readers(n);
  for (size_t id = 0; id < n; ++id)
    for (Value v : g.node(static_cast<int32_t>(id)).inputs) readers[static_cast<size_t>(v.node)].push_back(static_cast<int32_t>(id));
  std::vector<bool> is_output(n, false);
  for (Value v : g.outputs()) is_output[static_cast<size_t>(v.node)] = true;
  // Buckets, by (group, op, dtype), in node order.
  std::vector<std::vector<int32_t>> buckets;
  std::map<std::string, size_t> open;  // key -> index of its bucket being filled
  std::map<size_t, double> filled;
  std::vector<int32_t> bucket_of(n, -1);
  std::vector<int32_t> grads;  // gradient all_reduces, in the order backward makes their inputs
  for (size_t id = 0; id < n; ++id) {
    const Node& node = g.node(static_cast<int32_t>(id));
    if (node.kind != NodeKind::kApply || !node.op || node.op->name != "all_reduce" || is_output[id] ||
        readers[id].empty())
      continue;
    bool to_updates = true;
    for (int32_t r : readers[id]) to_updates = to_updates && is_update(g.node(r));
    if (to_updates) grads.push_back(static_cast<int32_t>(id));
  }
  std::stable_sort(grads.begin(), grads.end(),
                   [&](int32_t a, int32_t b) { return g.node(a).inputs[0].node < g.node(b).inputs[0].node; });
  std::vector<bool> is_grad(n, false);
  for (int32_t id : grads) {
    is_grad[static_cast<size_t>(id)] = true;
    const Node& node = g.node(id);
    const TensorMeta& m = node.outputs[0];
    const double bytes = static_cast<double>(m.shape.numel()) * static_cast<double>(dtype_size(m.dtype));
    const AttrValue* op = node.attrs.find("op");
    const std::string key = std::to_string(node.attrs.get_int("group")) + "/" + (op ? op->s : "sum") + "/" +
                            dtype_name(m.dtype);
    auto it = open.find(key);
    if (it == open.end() || filled[it->second] + bytes > limit || buckets[it->second].size() >= kMaxMembers) {
      buckets.push_back({});
      it = open.insert_or_assign(key, buckets.size() - 1).first;
      filled[it->second] = 0;
    }
    buckets[it->second].push_back(id);
    filled[it->second] += bytes;
    bucket_of[static_cast<size_t>(id)] = static_cast<int32_t>(it->second);
  }
  if (grads.empty()) return false;
  bool any = false;
  for (const auto& b : buckets) any = any || b.size() > 1;
  for (size_t b = 0; b < buckets.size(); ++b)
    if (buckets[b].size() == 1) bucket_of[static_cast<size_t>(buckets[b][0])] = -1;  // alone: stays one all_reduce

  // Re-emit in dependency order: a unit is a node, or a bucket (keyed by its
  // smallest member); ready gradient units go out at once, the others
  // smallest key first.
  Graph out(g.name());
  std::vector<std::vector<Value>> map(n);  // old node -> its outputs in `out`
  std::vector<int32_t> key(n);
  for (size_t id = 0; id < n; ++id) key[id] = static_cast<int32_t>(id);
  for (const auto& b : buckets)
    for (int32_t m : b) key[static_cast<size_t>(m)] = *std::min_element(b.begin(), b.end());
  auto unit_of = [&](int32_t id) { return bucket_of[static_cast<size_t>(id)] >= 0 ? key[static_cast<size_t>(id)] : id; };
  std::vector<int32_t> waiting(n, 0);       // per unit key: inputs not yet emitted
  std::vector<std::vector<int32_t>> after(n);  // per unit key: units waiting on it
  for (size_t id = 0; id < n; ++id) {
    const int32_t u = unit_of(static_cast<int32_t>(id));
    for (Value v : g.node(static_cast<int32_t>(id)).inputs) {
      const int32_t p = unit_of(v.node);
      if (p == u) continue;
      ++waiting[static_cast<size_t>(u)];
      after[static_cast<size_t>(p)].push_back(u);
    }
  }
  // (0 for gradient units, else 1; key): gradient units jump the queue.
  using Rank = std::pair<int, int32_t>;
  std::priority_queue<Rank, std::vector<Rank>, std::greater<Rank>> ready;
  auto push = [&](int32_t u) { ready.push({is_grad[static_cast<size_t>(u)] ? 0 : 1, u}); };
  for (size_t id = 0; id < n; ++id)
    if (unit_of(static_cast<int32_t>(id)) == static_cast<int32_t>(id) && waiting[id] == 0) push(static_cast<int32_t>(id));
  size_t emitted = 0;
  bool moved = false;  // whether the order differs from the graph's
  int32_t last = -1;
  // A bucket's reduced buffer is split back into its members right before
  // the first node reading one of them (an update, at the end of the step),
  // not after the all_reduce: the scheduler then has kernels to run while
  // the all_reduce is in flight (sched/plan_overlap.cpp).
  std::vector<Value> reduced(buckets.size());
  auto split_bucket = [&](size_t b) {
    const std::vector<int32_t>& members = buckets[b];
    std::vector<int64_t> sizes;
    for (int32_t m : members) sizes.push_back(g.node(m).outputs[0].shape.numel());
    const Node& first = g.node(*std::min_element(members.begin(), members.end()));
    Attrs split;
    split.set("axis", AttrValue::of_int(0));
    split.set("sizes", AttrValue::of_ints(sizes));
    const std::vector<Value> parts = out.add_op("split", {reduced[b]}, split, first.loc);
    for (size_t k = 0; k < members.size(); ++k) {
      const Node& node = g.node(members[k]);
      Attrs r;
      std::vector<int64_t> dims(node.outputs[0].shape.dims, node.outputs[0].shape.dims + node.outputs[0].shape.rank);
      r.set("shape", AttrValue::of_ints(dims));
      map[static_cast<size_t>(members[k])].push_back(out.add_op("reshape", {parts[k]}, r, node.loc)[0]);
    }
  };
  auto in_out = [&](Value v) {
    const int32_t b = bucket_of[static_cast<size_t>(v.node)];
    if (b >= 0 && map[static_cast<size_t>(v.node)].empty()) split_bucket(static_cast<size_t>(b));
    return map[static_cast<size_t>(v.node)][static_cast<size_t>(v.index)];
  };
  while (!ready.empty()) {
    const int32_t u = ready.top().second;
    ready.pop();
    moved = moved || u < last;
    last = std::max(last, u);
    const int32_t b = bucket_of[static_cast<size_t>(u)];
    if (b < 0) {
      Node copy = g.node(u);
      for (Value& v : copy.inputs) v = in_out(v);
      const int32_t nid = out.append(std::move(copy));
      for (size_t j = 0; j < g.node(u).outputs.size(); ++j) map[static_cast<size_t>(u)].push_back({nid, static_cast<int32_t>(j)});
      ++emitted;
    } else {
      const std::vector<int32_t>& members = buckets[static_cast<size_t>(b)];
      const Node& first = g.node(*std::min_element(members.begin(), members.end()));
      std::vector<Value> flat;
      for (int32_t m : members) {
        const Node& node = g.node(m);
        Attrs r;
        r.set("shape", AttrValue::of_ints({node.outputs[0].shape.numel()}));
        flat.push_back(out.add_op("reshape", {in_out(node.inputs[0])}, r, node.loc)[0]);
      }
      Attrs cat;
      cat.set("axis", AttrValue::of_int(0));
      const Value joined = out.add_op("concat", flat, cat, first.loc)[0];
      reduced[static_cast<size_t>(b)] = out.add_op("all_reduce", {joined}, first.attrs, first.loc)[0];
      emitted += members.size();
    }
    for (int32_t next : after[static_cast<size_t>(u)])
      if (--waiting[static_cast<size_t>(next)] == 0) push(next);
  }
  if (emitted != n)
    fail(Code::kInternal, "[pass allreduce_fusion] {} of {} nodes could not be ordered (a bucket member feeds another)",
         n - emitted, n);
  if (!any && !moved) return false;  // nothing fused, nothing moved
  std::vector<Value> outs;
  for (Value v : g.outputs()) outs.push_back(in_out(v));
  out.set_outputs(outs);
  g = std::move(out);
  return true;
}

}  // namespace

double gradient_bucket_bytes() {
  if (const char* v = std::getenv("SPORA_ALLREDUCE_BUCKET_MB")) {
    char* end = nullptr;
    const double mb = std::strtod(v, &end);
    if (end == v || *end != '\0' || !(mb >= 0))
      fail(Code::kInvalidArgument, "SPORA_ALLREDUCE_BUCKET_MB='{}' is not a size in MiB (0 turns fusion off)", v);
    return mb * 1024 * 1024;
  }
  return 25.0 * 1024 * 1024;
}

SPORA_PASS("allreduce_fusion", 1, fuse, {"shape_inference"});

}  // namespace spora::passes
