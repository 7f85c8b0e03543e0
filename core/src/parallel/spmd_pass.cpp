#include "parallel/spmd_pass.h"

#include <fmt/format.h>

#include "parallel/redistribute.h"
#include "parallel/strategy.h"
#include "support/error.h"

namespace spora::parallel {
namespace {

std::string layouts_text(const std::vector<TensorLayout>& ls, const Mesh& m) {
  std::string s;
  for (size_t i = 0; i < ls.size(); ++i) s += (i ? ", " : "") + ls[i].str(m.names);
  return s;
}

Attrs without_strategy(const Attrs& a) {
  Attrs out;
  for (const auto& [k, v] : a.items())
    if (k != kStrategyAttr) out.set(k, v);
  return out;
}

class Partitioner {
 public:
  Partitioner(const ir::Graph& g, const PartitionOptions& o) : g_(g), o_(o), m_(o.mesh) {}

  PartitionResult run() {
    m_.check();
    // Pass 1 places the weights (the layout their first consumer asks for);
    // pass 2 builds the rank's graph with every layout known.
    weight_layout_.assign(g_.nodes().size(), TensorLayout{});
    for (int32_t id : g_.weights()) {
      auto it = o_.weights.find(g_.node(id).name);
      if (it == o_.weights.end()) continue;
      TensorLayout l = it->second;
      l.partial = 0;
      l.free = false;
      if (l.rank() != g_.node(id).outputs[0].shape.rank || !divisible(g_.node(id).outputs[0].shape, l))
        fail(Code::kInvalidArgument, "[parallel] weight '{}' of shape {} cannot be laid out {} on mesh {}",
             g_.node(id).name, g_.node(id).outputs[0].shape.str(), l.str(m_.names), m_.str());
      weight_layout_[static_cast<size_t>(id)] = l;
    }
    walk(false);
    for (int32_t id : g_.weights())
      if (weight_layout_[static_cast<size_t>(id)].free || weight_layout_[static_cast<size_t>(id)].rank() !=
                                                              g_.node(id).outputs[0].shape.rank)
        weight_layout_[static_cast<size_t>(id)] = TensorLayout::replicated(g_.node(id).outputs[0].shape.rank);
    PartitionResult r;
    r.graph = ir::Graph(g_.name());
    out_ = &r.graph;
    walk(true);
    std::vector<ir::Value> outs;
    for (size_t i = 0; i < g_.outputs().size(); ++i) {
      const ir::Value v = g_.outputs()[i];
      TensorLayout want = TensorLayout::replicated(g_.meta(v).shape.rank);
      auto tie = o_.ties.find(i);
      if (tie != o_.ties.end()) {
        const int32_t w = weight_named(tie->second);
        want = weight_layout_[static_cast<size_t>(w)];
        if (g_.meta(v).shape != g_.node(w).outputs[0].shape || g_.meta(v).dtype != g_.node(w).outputs[0].dtype)
          fail(Code::kInvalidArgument, "[parallel] output {} is tied to weight '{}' but its type {} differs from {}", i,
               tie->second, g_.meta(v).shape.str(), g_.node(w).outputs[0].shape.str());
      }
      outs.push_back(as(v, want, g_.node(v.node).loc));
      r.outputs.push_back(want);
    }
    r.graph.set_outputs(outs);
    for (int32_t id : g_.weights()) {
      const ir::Node& n = g_.node(id);
      const TensorLayout& l = weight_layout_[static_cast<size_t>(id)];
      r.weights.push_back({n.name, n.outputs[0].shape, local_shape(m_, n.outputs[0].shape, l), l});
    }
    r.decisions = std::move(decisions_);
    return r;
  }

 private:
  int32_t weight_named(const std::string& name) const {
    for (int32_t id : g_.weights())
      if (g_.node(id).name == name) return id;
    fail(Code::kInvalidArgument, "[parallel] an output is tied to weight '{}', which the graph does not have", name);
  }

  // The layout of value v now (pass 1: a weight not placed yet is free).
  TensorLayout layout_of(ir::Value v) const {
    const ir::Node& n = g_.node(v.node);
    if (n.kind == ir::NodeKind::kWeight) {
      const TensorLayout& w = weight_layout_[static_cast<size_t>(v.node)];
      if (w.rank() != n.outputs[0].shape.rank) {
        TensorLayout f = TensorLayout::replicated(n.outputs[0].shape.rank);
        f.free = true;
        return f;
      }
      return w;
    }
    return layouts_[static_cast<size_t>(v.node)][static_cast<size_t>(v.index)];
  }

  // Pass 2: v in this rank's graph, laid out as `want` (cached, so a value
  // two consumers want gathered is gathered once).
  ir::Value as(ir::Value v, const TensorLayout& want, const ir::SourceLoc& loc) {
    const TensorLayout have = layout_of(v);
    if (have == want) return values_[static_cast<size_t>(v.node)][static_cast<size_t>(v.index)];
    const std::string key = fmt::format("{}.{}:{}", v.node, v.index, want.str());
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    const ir::Value r =
        redistribute(*out_, m_, values_[static_cast<size_t>(v.node)][static_cast<size_t>(v.index)], have, want, loc);
    cache_[key] = r;
    return r;
  }

  // The node's strategy: the plan's (options.strategies), else the user's.
  const std::string* strategy_for(const ir::Node& n) const {
    auto planned = o_.strategies.find(static_cast<int32_t>(&n - g_.nodes().data()));
    if (planned != o_.strategies.end()) return &planned->second;
    const AttrValue* attr = n.attrs.find(kStrategyAttr);
    return attr ? &attr->s : nullptr;
  }

  ShardPlan decide(const ir::Node& n) {
    ShardQuery q;
    q.op = n.op;
    q.attrs = &n.attrs;
    q.mesh = m_.shape;
    for (ir::Value v : n.inputs) {
      q.in.push_back(g_.meta(v));
      q.in_layouts.push_back(layout_of(v));
    }
    q.out = n.outputs;
    const std::string* strategy = strategy_for(n);
    std::vector<TensorLayout> asked;
    if (strategy) {
      asked = parse_strategy(g_, n, *strategy, m_);
      q.in_layouts = asked;
      if (!n.op->sharding && o_.semi_auto)
        throw Error(Code::kUnimplemented,
                    ir::with_loc(fmt::format("[{}] has no sharding rule, so strategy {} cannot be applied under "
                                             "semi_auto_parallel (remove the strategy to run it replicated)",
                                             n.op->name, strategy_text(*strategy)),
                                 n.loc));
    }
    ShardPlan p;
    bool ok = n.op->sharding && n.op->sharding(q, p);
    if (ok && (p.in.size() != n.inputs.size() || p.out.size() != n.outputs.size()))
      fail(Code::kInternal, "[{}] sharding rule answered for {} inputs and {} outputs", n.op->name, p.in.size(),
           p.out.size());
    if (ok) {
      for (size_t i = 0; i < p.in.size(); ++i) ok = ok && p.in[i].rank() == q.in[i].shape.rank && !p.in[i].free;
      for (size_t i = 0; i < p.out.size(); ++i) ok = ok && p.out[i].rank() == q.out[i].shape.rank && !p.out[i].free;
      for (size_t i = 0; ok && i < p.in.size(); ++i) ok = divisible(q.in[i].shape, p.in[i]);
      for (size_t i = 0; ok && i < p.out.size(); ++i) ok = divisible(q.out[i].shape, p.out[i]);
    }
    if (strategy && o_.semi_auto) {
      for (size_t i = 0; ok && i < asked.size(); ++i)
        if (p.in[i].dims != asked[i].dims)
          throw Error(Code::kInvalidArgument,
                      ir::with_loc(fmt::format("[{}] strategy {} cannot be honoured: the op's sharding rule needs "
                                               "input {} laid out {} instead of {} (mesh {})",
                                               n.op->name, strategy_text(*strategy), i, p.in[i].str(m_.names),
                                               asked[i].str(m_.names), m_.str()),
                                   n.loc));
      if (!ok)
        throw Error(Code::kInvalidArgument,
                    ir::with_loc(fmt::format("[{}] strategy {} has no sharded form for inputs of shapes {}",
                                             n.op->name, strategy_text(*strategy), shapes(n)),
                                 n.loc));
    }
    if (!ok) {
      p = ShardPlan{};
      for (const TensorMeta& m : q.in) p.in.push_back(TensorLayout::replicated(m.shape.rank));
      for (const TensorMeta& m : q.out) p.out.push_back(TensorLayout::replicated(m.shape.rank));
    }
    return p;
  }

  bool divisible(const Shape& s, const TensorLayout& l) const {
    for (int d = 0; d < s.rank; ++d) {
      const int a = l.dims[static_cast<size_t>(d)];
      if (a != kReplicated && (a >= m_.axes() || s.dims[d] % m_.shape[static_cast<size_t>(a)] != 0)) return false;
    }
    for (int a = m_.axes(); a < 32; ++a)
      if (l.partial & (1u << a)) return false;
    return true;
  }

  std::string shapes(const ir::Node& n) const {
    std::string s;
    for (size_t i = 0; i < n.inputs.size(); ++i) s += (i ? ", " : "") + g_.meta(n.inputs[i]).shape.str();
    return s;
  }

  void walk(bool build) {
    layouts_.assign(g_.nodes().size(), {});
    values_.assign(g_.nodes().size(), {});
    cache_.clear();
    for (size_t id = 0; id < g_.nodes().size(); ++id) {
      const ir::Node& n = g_.node(static_cast<int32_t>(id));
      auto& lay = layouts_[id];
      auto& val = values_[id];
      switch (n.kind) {
        case ir::NodeKind::kInput:
        case ir::NodeKind::kConstant:
          lay = {TensorLayout::replicated(n.outputs[0].shape.rank)};
          if (build) {
            if (n.kind == ir::NodeKind::kInput)
              val = {out_->add_input(n.name, n.outputs[0].dtype, n.outputs[0].shape)};
            else
              val = {{out_->append(n), 0}};
          }
          break;
        case ir::NodeKind::kWeight:
          lay = {layout_of({static_cast<int32_t>(id), 0})};
          if (build) {
            const TensorLayout& l = weight_layout_[id];
            val = {out_->add_weight(n.name, n.outputs[0].dtype, local_shape(m_, n.outputs[0].shape, l))};
          }
          break;
        case ir::NodeKind::kApply: apply(n, static_cast<int32_t>(id), build); break;
        default: {  // control flow: replicated in and out
          std::vector<ir::Value> ins;
          if (build)
            for (ir::Value v : n.inputs) ins.push_back(as(v, TensorLayout::replicated(g_.meta(v).shape.rank), n.loc));
          for (const TensorMeta& m : n.outputs) lay.push_back(TensorLayout::replicated(m.shape.rank));
          if (build) {
            ir::Node copy = n;
            copy.inputs = ins;
            const int32_t nid = out_->append(std::move(copy));
            for (size_t i = 0; i < n.outputs.size(); ++i) val.push_back({nid, static_cast<int32_t>(i)});
          }
          break;
        }
      }
    }
  }

  void apply(const ir::Node& n, int32_t id, bool build) {
    ShardPlan p = decide(n);
    if (!build) {
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        const ir::Value v = n.inputs[i];
        if (g_.node(v.node).kind == ir::NodeKind::kWeight && layout_of(v).free) {
          TensorLayout w = p.in[i];
          w.partial = 0;
          w.free = false;
          weight_layout_[static_cast<size_t>(v.node)] = w;
        }
      }
      layouts_[static_cast<size_t>(id)] = p.out;
      return;
    }
    std::vector<ir::Value> ins;
    for (size_t i = 0; i < n.inputs.size(); ++i) ins.push_back(as(n.inputs[i], p.in[i], n.loc));
    const Attrs attrs = without_strategy(p.attrs_changed ? p.local_attrs : n.attrs);
    std::vector<ir::Value> outs = out_->add_op(n.op->name, ins, attrs, n.loc);
    for (size_t i = 0; i < outs.size(); ++i) {
      const Shape want = local_shape(m_, n.outputs[i].shape, p.out[i]);
      if (out_->meta(outs[i]).shape != want)
        throw Error(Code::kInternal,
                    ir::with_loc(fmt::format("[{}] sharding rule: output {} is {} on this rank, expected {} ({} of {})",
                                             n.op->name, i, out_->meta(outs[i]).shape.str(), want.str(),
                                             p.out[i].str(m_.names), n.outputs[i].shape.str()),
                                 n.loc));
    }
    layouts_[static_cast<size_t>(id)] = p.out;
    values_[static_cast<size_t>(id)] = outs;
    std::vector<TensorLayout> in_now;
    for (ir::Value v : n.inputs) in_now.push_back(layout_of(v));
    decisions_.push_back(fmt::format("%{} {}{}: ({}) -> ({})", id, n.op->name,
                                     strategy_for(n) ? " [strategy " + strategy_text(*strategy_for(n)) + "]" : "",
                                     layouts_text(p.in, m_), layouts_text(p.out, m_)));
  }

  const ir::Graph& g_;
  const PartitionOptions& o_;
  const Mesh& m_;
  ir::Graph* out_ = nullptr;
  std::vector<TensorLayout> weight_layout_;             // by node id (weights only)
  std::vector<std::vector<TensorLayout>> layouts_;      // by node id, per output
  std::vector<std::vector<ir::Value>> values_;          // pass 2: the rank graph's values
  std::map<std::string, ir::Value> cache_;
  std::vector<std::string> decisions_;
};

}  // namespace

PartitionResult partition(const ir::Graph& g, const PartitionOptions& options) {
  return Partitioner(g, options).run();
}

}  // namespace spora::parallel
