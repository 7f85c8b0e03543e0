#include "parallel/search.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "parallel/strategy.h"
#include "support/error.h"

namespace spora::parallel {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kTieBreak = 1e-15;  // seconds per byte: 1 ns per MB

// One way to run a node: the layouts its rule wants its inputs in, the
// layouts of its outputs, the strategy text that makes the pass choose
// exactly this, its compute time and the bytes it holds (for the penalty).
struct Cand {
  std::vector<TensorLayout> in, out;
  std::string strategy;
  double compute = 0;
  double bytes = 0;
};

// Where a value goes: consumer node, its input index, the producer's output.
struct Use {
  int32_t node;
  int input;
  int output;
};

// Every layout of a tensor of `shape`: each dim whole or split over one
// mesh axis (of size > 1, dividing it), each axis cutting at most one dim.
void layouts_of(const Shape& shape, const std::vector<int64_t>& mesh, int d, uint32_t used, TensorLayout& cur,
                std::vector<TensorLayout>& out) {
  if (d == shape.rank) {
    out.push_back(cur);
    return;
  }
  cur.dims[static_cast<size_t>(d)] = kReplicated;
  layouts_of(shape, mesh, d + 1, used, cur, out);
  for (size_t a = 0; a < mesh.size(); ++a) {
    if (mesh[a] <= 1 || (used & (1u << a)) || shape.dims[d] % mesh[a] != 0) continue;
    cur.dims[static_cast<size_t>(d)] = static_cast<int>(a);
    layouts_of(shape, mesh, d + 1, used | (1u << a), cur, out);
  }
  cur.dims[static_cast<size_t>(d)] = kReplicated;
}

std::vector<TensorLayout> layouts_of(const Shape& shape, const std::vector<int64_t>& mesh) {
  std::vector<TensorLayout> out;
  TensorLayout cur = TensorLayout::replicated(shape.rank);
  layouts_of(shape, mesh, 0, 0, cur, out);
  return out;
}

double shards_of(const std::vector<TensorLayout>& outs, const std::vector<int64_t>& mesh) {
  uint32_t axes = 0;
  for (const TensorLayout& l : outs) axes |= l.axes_used();
  double s = 1;
  for (size_t a = 0; a < mesh.size(); ++a)
    if (axes & (1u << a)) s *= static_cast<double>(mesh[a]);
  return s;
}

class Search {
 public:
  Search(const ir::Graph& g, const SearchOptions& o)
      : g_(g), o_(o), model_(o.mesh.shape, o.device, o.topology), n_(g.nodes().size()) {
    limit_ = o.memory_limit > 0 ? o.memory_limit : o.device.memory_bytes;
  }

  SearchResult run() {
    Mesh m = o_.mesh;
    m.rank = 0;
    m.groups.assign(m.shape.size(), 0);
    m.check();
    build();
    if (o_.data_parallel_start) add_start(data_parallel());
    for (const StartPlan& st : o_.starts) add_start(st);
    // Memory held costs a token kTieBreak seconds per byte even within the
    // limit, so that between plans of equal time the smaller one wins (a
    // weight kept whole and sliced for free at every use would otherwise tie
    // with the weight stored split).
    SearchResult r = solve_all(kTieBreak);
    int evals = 1;
    if (r.fits) {
      // Restarts: the programme and the one-node refinement can settle in a
      // local minimum that a memory penalty pushes them out of (GPT-2-XL on
      // a (128, 8) mesh: 3.46 s unpenalised, 1.35 s under a penalty;
      // docs/parallel.md). A few penalties from step_time / memory up; a
      // plan is taken only if it fits and is faster.
      double lambda = std::max(r.step_time, 1e-12) / std::max(r.memory_bytes, 1.0);
      SearchResult best = r;
      for (int k = 0; k < o_.restarts; ++k, lambda *= 4) {
        SearchResult t = solve_all(lambda);
        ++evals;
        if (t.fits && t.step_time < best.step_time * (1 - 1e-6)) best = t;
      }
      r = best;
    } else {
      // Lagrangian relaxation of the memory limit: a penalty of lambda
      // seconds per byte held, raised until the plan fits, then bisected
      // (geometrically) to the smallest penalty that still fits, which is
      // the fastest fitting plan this search finds.
      double lo = kTieBreak, hi = std::max(r.step_time, 1e-12) / std::max(r.memory_bytes, 1.0);
      SearchResult fit;
      bool found = false;
      for (int k = 0; k < 40 && !found; ++k, hi *= 4) {
        SearchResult t = solve_all(hi);
        ++evals;
        if (t.fits) {
          fit = t;
          found = true;
          break;
        }
        lo = hi;
        if (t.memory_bytes < r.memory_bytes) r = t;  // keep the smallest, in case nothing fits
      }
      if (found) {
        for (int k = 0; k < 12; ++k) {
          const double mid = std::sqrt(lo * hi);
          SearchResult t = solve_all(mid);
          ++evals;
          if (t.fits) {
            hi = mid;
            if (t.step_time < fit.step_time) fit = t;
          } else {
            lo = mid;
          }
        }
        r = fit;
      }
    }
    // The fastest fitting plan any programme or start reached (a start that
    // fits and beats what the penalties settled on is never lost).
    if (have_fit_ && (!r.fits || best_fit_.step_time < r.step_time * (1 - 1e-9))) r = best_fit_;
    r.evaluations = evals;
    return r;
  }

  // A start priced as written.
  SearchResult priced(const StartPlan& st) {
    build();
    SearchResult r = result(propagate(st), kTieBreak);
    r.origin = st.name;
    r.evaluations = 0;
    return r;
  }

 private:
  const ir::Node& node(size_t id) const { return g_.node(static_cast<int32_t>(id)); }

  std::string strategy_of(const std::vector<TensorLayout>& in) const {
    std::string s;
    for (size_t i = 0; i < in.size(); ++i) {
      if (i) s += ";";
      for (int d = 0; d < in[i].rank(); ++d) {
        if (d) s += ",";
        const int a = in[i].dims[static_cast<size_t>(d)];
        if (a == kReplicated)
          s += "1";
        else if (!o_.mesh.names.empty())
          s += o_.mesh.names[static_cast<size_t>(a)];
        else
          s += std::to_string(o_.mesh.shape[static_cast<size_t>(a)]);
      }
    }
    return s;
  }

  bool divisible(const Shape& s, const TensorLayout& l) const {
    for (int d = 0; d < s.rank; ++d) {
      const int a = l.dims[static_cast<size_t>(d)];
      if (a != kReplicated && (a >= o_.mesh.axes() || s.dims[d] % o_.mesh.shape[static_cast<size_t>(a)] != 0))
        return false;
    }
    return (l.partial >> o_.mesh.axes()) == 0;
  }

  // What the pass does with node n given strategy `asked` (spmd_pass.cpp
  // decide(), semi_auto off): the rule's answer, or replicated.
  bool ask(const ir::Node& n, const std::vector<TensorLayout>& asked, ShardPlan& p) const {
    ShardQuery q;
    q.op = n.op;
    q.attrs = &n.attrs;
    q.mesh = o_.mesh.shape;
    for (ir::Value v : n.inputs) q.in.push_back(g_.meta(v));
    q.out = n.outputs;
    q.in_layouts = asked;
    p = ShardPlan{};
    bool ok = n.op->sharding(q, p) && p.in.size() == n.inputs.size() && p.out.size() == n.outputs.size();
    for (size_t i = 0; ok && i < p.in.size(); ++i)
      ok = p.in[i].rank() == q.in[i].shape.rank && !p.in[i].free && divisible(q.in[i].shape, p.in[i]);
    for (size_t i = 0; ok && i < p.out.size(); ++i)
      ok = p.out[i].rank() == q.out[i].shape.rank && !p.out[i].free && divisible(q.out[i].shape, p.out[i]);
    return ok;
  }

  Cand replicated(const ir::Node& n) const {
    Cand c;
    for (ir::Value v : n.inputs) c.in.push_back(TensorLayout::replicated(g_.meta(v).shape.rank));
    for (const TensorMeta& m : n.outputs) c.out.push_back(TensorLayout::replicated(m.shape.rank));
    return c;
  }

  // Adds candidate c of node id (priced: compute split over its outputs'
  // shards, bytes of its outputs) unless an equal one is there; its index.
  int add_cand(size_t id, Cand c, double base) {
    const ir::Node& n = node(id);
    c.compute = base / shards_of(c.out, o_.mesh.shape);
    for (size_t i = 0; i < c.out.size(); ++i) c.bytes += model_.local_bytes(n.outputs[i], c.out[i]);
    for (size_t k = 0; k < cands_[id].size(); ++k)
      if (cands_[id][k].in == c.in && cands_[id][k].out == c.out) return static_cast<int>(k);
    cands_[id].push_back(std::move(c));
    return static_cast<int>(cands_[id].size() - 1);
  }

  double base_time(size_t id) const {
    const ir::Node& n = node(id);
    std::vector<TensorMeta> in;
    for (ir::Value v : n.inputs) in.push_back(g_.meta(v));
    return model_.op_time(*n.op, in, n.attrs, 1);
  }

  // The candidate a start's propagation takes at node id, whose inputs
  // arrive as `asked`: the strategy the rule answers (added if the seeds
  // missed it), or the replicated one when the rule declines.
  int propagated(size_t id, const std::vector<TensorLayout>& asked) {
    const ir::Node& n = node(id);
    if (!n.op->sharding || n.attrs.find(kStrategyAttr)) return 0;  // a single candidate: the replicated or the user's
    Mesh m = o_.mesh;
    m.rank = 0;
    m.groups.assign(m.shape.size(), 0);
    ShardPlan p;
    if (ask(n, asked, p)) {
      std::vector<TensorLayout> want = p.in;
      for (TensorLayout& l : want) {
        l.partial = 0;
        l.free = false;
      }
      const std::string text = strategy_of(want);
      for (size_t k = 0; k < cands_[id].size(); ++k)
        if (cands_[id][k].strategy == text) return static_cast<int>(k);
      std::vector<TensorLayout> parsed;
      try {
        parsed = parse_strategy(g_, n, text, m);
      } catch (const Error&) {
        parsed.clear();
      }
      if (parsed == want && ask(n, parsed, p)) {
        Cand c;
        c.strategy = text;
        c.in = p.in;
        c.out = p.out;
        return add_cand(id, std::move(c), base_time(id));
      }
    }
    Cand r = replicated(n);
    r.strategy = strategy_of(r.in);
    for (size_t k = 0; k < cands_[id].size(); ++k)
      if (cands_[id][k].in == r.in) return static_cast<int>(k);
    return add_cand(id, std::move(r), base_time(id));
  }

  // A start as a candidate per node: its input and weight layouts (those
  // that do not fit the shape or mesh stay replicated), propagated in
  // graph order.
  std::vector<int> propagate(const StartPlan& s) {
    std::vector<int> choice(n_, 0);
    std::vector<std::vector<TensorLayout>> lay(n_);
    auto named = [&](const std::map<std::string, TensorLayout>& from, const ir::Node& n) {
      TensorLayout l = TensorLayout::replicated(n.outputs[0].shape.rank);
      auto it = from.find(n.name);
      if (it != from.end() && it->second.rank() == l.rank() && !it->second.free &&
          divisible(n.outputs[0].shape, it->second))
        l = it->second;
      return l;
    };
    for (size_t u = 0; u < n_; ++u) {
      const ir::Node& n = node(u);
      if (n.kind == ir::NodeKind::kInput) {
        lay[u] = {named(s.inputs, n)};  // fed whole, sliced for free: only what the ops are asked changes
        continue;
      }
      if (n.kind == ir::NodeKind::kWeight) {
        const TensorLayout want = named(s.weights, n);
        for (size_t k = 0; k < cands_[u].size(); ++k)
          if (cands_[u][k].out[0].dims == want.dims && cands_[u][k].out[0].partial == want.partial)
            choice[u] = static_cast<int>(k);
        lay[u] = {cands_[u][static_cast<size_t>(choice[u])].out[0]};
        continue;
      }
      if (n.kind == ir::NodeKind::kApply) {
        std::vector<TensorLayout> asked;
        for (ir::Value v : n.inputs) asked.push_back(lay[static_cast<size_t>(v.node)][static_cast<size_t>(v.index)]);
        choice[u] = propagated(u, asked);
      }
      lay[u] = cands_[u][static_cast<size_t>(choice[u])].out;
    }
    return choice;
  }

  // Data parallelism as a start: inputs split by their leading dim over
  // mesh axis 0, weights replicated.
  StartPlan data_parallel() const {
    StartPlan s;
    s.name = "data parallel";
    if (o_.mesh.shape.empty() || o_.mesh.shape[0] < 2) return s;
    for (int32_t id : g_.inputs()) {
      const ir::Node& n = node(static_cast<size_t>(id));
      if (n.outputs.empty() || n.outputs[0].shape.rank < 1 || n.outputs[0].shape.dims[0] % o_.mesh.shape[0] != 0)
        continue;
      TensorLayout l = TensorLayout::replicated(n.outputs[0].shape.rank);
      l.dims[0] = 0;
      s.inputs[n.name] = l;
    }
    return s;
  }

  void apply_candidates(size_t id) {
    const ir::Node& n = node(id);
    std::vector<TensorMeta> in;
    for (ir::Value v : n.inputs) in.push_back(g_.meta(v));
    const double base = model_.op_time(*n.op, in, n.attrs, 1);
    auto finish = [&](Cand c) { add_cand(id, std::move(c), base); };
    if (!n.op->sharding) {
      finish(replicated(n));
      return;
    }
    Mesh m = o_.mesh;
    m.rank = 0;
    m.groups.assign(m.shape.size(), 0);
    if (const AttrValue* user = n.attrs.find(kStrategyAttr)) {
      // A strategy the user wrote is kept: the search only plans around it.
      Cand c;
      c.strategy = user->s;
      ShardPlan p;
      if (ask(n, parse_strategy(g_, n, user->s, m), p)) {
        c.in = p.in;
        c.out = p.out;
      } else {
        Cand r = replicated(n);
        c.in = r.in;
        c.out = r.out;
      }
      finish(std::move(c));
      return;
    }
    // Seeds: every layout of the first two inputs of rank >= 1 (all pairs),
    // the other inputs free for the rule to match; then each answer is
    // asked again as a strategy, exactly as the pass will ask it.
    std::vector<size_t> primary;
    for (size_t i = 0; i < n.inputs.size() && primary.size() < 2; ++i)
      if (in[i].shape.rank > 0) primary.push_back(i);
    std::vector<std::vector<TensorLayout>> seeds;
    std::vector<TensorLayout> free_in;
    for (const TensorMeta& m : in) {
      TensorLayout f = TensorLayout::replicated(m.shape.rank);
      f.free = true;
      free_in.push_back(f);
    }
    seeds.push_back(free_in);
    for (size_t k = 0; k < primary.size(); ++k) {
      std::vector<std::vector<TensorLayout>> next;
      for (const auto& s : seeds)
        for (const TensorLayout& l : layouts_of(in[primary[k]].shape, o_.mesh.shape)) {
          next.push_back(s);
          next.back()[primary[k]] = l;
        }
      seeds = std::move(next);
    }
    // The replicated strategy first: it is what a tie between equal costs keeps.
    std::vector<TensorLayout> all_r;
    for (const TensorMeta& t : in) all_r.push_back(TensorLayout::replicated(t.shape.rank));
    seeds.insert(seeds.begin(), all_r);
    for (const auto& seed : seeds) {
      ShardPlan p;
      if (!ask(n, seed, p)) continue;
      std::vector<TensorLayout> asked = p.in;
      for (TensorLayout& l : asked) {
        l.partial = 0;
        l.free = false;
      }
      const std::string text = strategy_of(asked);
      std::vector<TensorLayout> parsed;
      try {
        parsed = parse_strategy(g_, n, text, m);
      } catch (const Error&) {
        continue;  // not expressible as a strategy on this mesh (a count two axes share)
      }
      if (parsed != asked) continue;
      Cand c;
      c.strategy = text;
      if (ask(n, parsed, p)) {
        c.in = p.in;
        c.out = p.out;
      } else {
        Cand r = replicated(n);
        c.in = r.in;
        c.out = r.out;
      }
      finish(std::move(c));
    }
    if (cands_[id].empty()) {
      Cand c = replicated(n);
      c.strategy = strategy_of(c.in);
      finish(std::move(c));
    }
  }

  void build() {
    // Optimizer updates: the gradient all_reduces into them run in buckets.
    update_.assign(n_, false);
    for (size_t id = 0; id < n_; ++id) {
      const ir::Node& n = node(id);
      update_[id] = n.kind == ir::NodeKind::kApply && n.op && n.op->name.size() > 7 &&
                    n.op->name.compare(n.op->name.size() - 7, 7, "_update") == 0;
    }
    cands_.assign(n_, {});
    uses_.assign(n_, {});
    fanout_.assign(n_, 0);
    for (size_t id = 0; id < n_; ++id) {
      const ir::Node& n = node(id);
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        uses_[static_cast<size_t>(n.inputs[i].node)].push_back({static_cast<int32_t>(id), static_cast<int>(i),
                                                                 n.inputs[i].index});
        ++fanout_[static_cast<size_t>(n.inputs[i].node)];
      }
      switch (n.kind) {
        case ir::NodeKind::kWeight:
          if (auto f = o_.fixed_weights.find(n.name); f != o_.fixed_weights.end()) {
            Cand c;
            c.out = {f->second};
            c.bytes = model_.local_bytes(n.outputs[0], f->second);
            cands_[id].push_back(std::move(c));
            break;
          }
          for (const TensorLayout& l : layouts_of(n.outputs[0].shape, o_.mesh.shape)) {
            Cand c;
            c.out = {l};
            c.bytes = model_.local_bytes(n.outputs[0], l);
            cands_[id].push_back(std::move(c));
          }
          break;
        case ir::NodeKind::kApply: apply_candidates(id); break;
        default: cands_[id].push_back(replicated(n)); break;  // inputs, constants, control flow
      }
    }
    sinks_.assign(n_, {});
    for (size_t i = 0; i < g_.outputs().size(); ++i) {
      const ir::Value v = g_.outputs()[i];
      int32_t tie = -1;
      auto t = o_.ties.find(i);
      if (t != o_.ties.end())
        for (int32_t w : g_.weights())
          if (node(static_cast<size_t>(w)).name == t->second) tie = w;
      if (tie >= 0) ties_[tie].push_back(v);
      sinks_[static_cast<size_t>(v.node)].push_back({v.index, tie});
      ++fanout_[static_cast<size_t>(v.node)];
    }
  }

  double own(size_t id, int c, double lambda) const {
    const Cand& k = cands_[id][static_cast<size_t>(c)];
    return k.compute + lambda * k.bytes;
  }

  // Moving output j of node p (candidate cp) into what candidate cc of node
  // u wants for its input i.
  double edge(size_t p, int cp, int j, size_t u, int cc, int i) const {
    const TensorLayout& from = cands_[p][static_cast<size_t>(cp)].out[static_cast<size_t>(j)];
    const TensorLayout& to = cands_[u][static_cast<size_t>(cc)].in[static_cast<size_t>(i)];
    if (from.dims == to.dims && from.partial == to.partial) return 0;
    return model_.redistribute(g_.meta({static_cast<int32_t>(p), j}), from, to, update_[u]);
  }

  // Graph outputs of node p: returned whole, or in their tied weight's layout.
  double sink(size_t p, int cp, const std::vector<int>& choice) const {
    double t = 0;
    for (const auto& [j, tie] : sinks_[p]) {
      const TensorLayout& from = cands_[p][static_cast<size_t>(cp)].out[static_cast<size_t>(j)];
      TensorLayout to = TensorLayout::replicated(from.rank());
      if (tie >= 0 && !choice.empty() && choice[static_cast<size_t>(tie)] >= 0)
        to = cands_[static_cast<size_t>(tie)][static_cast<size_t>(choice[static_cast<size_t>(tie)])].out[0];
      else if (tie >= 0)
        continue;  // its weight is not chosen yet
      if (from.dims != to.dims || from.partial != to.partial)
        t += model_.redistribute(g_.meta({static_cast<int32_t>(p), j}), from, to);
    }
    return t;
  }

  // A weight's tied outputs, moved into candidate c of the weight.
  double tied(size_t w, int c, const std::vector<int>& choice) const {
    auto it = ties_.find(static_cast<int32_t>(w));
    if (it == ties_.end()) return 0;
    double t = 0;
    const TensorLayout& to = cands_[w][static_cast<size_t>(c)].out[0];
    for (ir::Value v : it->second) {
      const int cp = choice[static_cast<size_t>(v.node)];
      if (cp < 0) continue;
      const TensorLayout& from = cands_[static_cast<size_t>(v.node)][static_cast<size_t>(cp)].out[static_cast<size_t>(v.index)];
      if (from.dims != to.dims || from.partial != to.partial) t += model_.redistribute(g_.meta(v), from, to);
    }
    return t;
  }

  // Node u's whole cost with candidate c, every other node as in `choice`.
  double local(size_t u, int c, const std::vector<int>& choice, double lambda) const {
    const ir::Node& n = node(u);
    double t = own(u, c, lambda);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const size_t p = static_cast<size_t>(n.inputs[i].node);
      t += edge(p, choice[p], n.inputs[i].index, u, c, static_cast<int>(i));
    }
    for (const Use& k : uses_[u]) t += edge(u, c, k.output, static_cast<size_t>(k.node), choice[static_cast<size_t>(k.node)], k.input);
    t += sink(u, c, choice) + tied(u, c, choice);
    return t;
  }

  // The dynamic programme, then local improvement; returns a candidate per node.
  std::vector<int> solve(double lambda) const {
    // Forward, in topological (id) order: acc[u][c] is u's cost with c plus,
    // per input, the cheapest producer candidate's acc (shared by its
    // consumers: divided by its fan-out) and the move into what c wants.
    // Exact on trees; on a DAG an estimate the next two steps correct.
    std::vector<std::vector<double>> acc(n_);
    for (size_t u = 0; u < n_; ++u) {
      const ir::Node& n = node(u);
      acc[u].assign(cands_[u].size(), 0);
      for (size_t c = 0; c < cands_[u].size(); ++c) {
        double t = own(u, static_cast<int>(c), lambda);
        for (size_t i = 0; i < n.inputs.size(); ++i) {
          const size_t p = static_cast<size_t>(n.inputs[i].node);
          double best = kInf;
          for (size_t cp = 0; cp < cands_[p].size(); ++cp)
            best = std::min(best, acc[p][cp] / std::max(fanout_[p], 1) +
                                      edge(p, static_cast<int>(cp), n.inputs[i].index, u, static_cast<int>(c), static_cast<int>(i)));
          t += best;
        }
        acc[u][c] = t;
      }
    }
    // Backward: each node, last first, takes the candidate best for its own
    // cost and the already chosen consumers.
    std::vector<int> choice(n_, -1);
    for (size_t u = n_; u-- > 0;) {
      double best = kInf;
      for (size_t c = 0; c < cands_[u].size(); ++c) {
        double t = acc[u][c] + sink(u, static_cast<int>(c), choice);
        for (const Use& k : uses_[u])
          t += edge(u, static_cast<int>(c), k.output, static_cast<size_t>(k.node), choice[static_cast<size_t>(k.node)], k.input);
        if (t < best - 1e-18) {
          best = t;
          choice[u] = static_cast<int>(c);
        }
      }
    }
    refine(choice, lambda);
    return choice;
  }

  // Local improvement (iterated conditional modes): each node in turn
  // takes its best candidate with every other node fixed, until no node
  // changes; the exact objective never increases. Whether anything moved.
  bool refine(std::vector<int>& choice, double lambda) const {
    bool moved = false;
    for (int round = 0; round < o_.refine_rounds; ++round) {
      bool changed = false;
      for (size_t u = 0; u < n_; ++u) {
        if (cands_[u].size() < 2) continue;
        const double now = local(u, choice[u], choice, lambda);
        for (size_t c = 0; c < cands_[u].size(); ++c) {
          if (static_cast<int>(c) == choice[u]) continue;
          const double t = local(u, static_cast<int>(c), choice, lambda);
          if (t < now * (1 - 1e-9) - 1e-15) {
            choice[u] = static_cast<int>(c);
            changed = true;
            break;
          }
        }
      }
      if (!changed) break;
      moved = true;
    }
    return moved;
  }

  // The programme's plan and each start's, as written and refined, under
  // penalty lambda: the best by step time + lambda x memory. Every fitting
  // plan seen is offered to best_fit_.
  SearchResult solve_all(double lambda) {
    SearchResult best = result(solve(lambda), lambda);
    best.origin = "programme";
    offer(best);
    for (const auto& [name, start] : starts_) {
      std::vector<int> c = start;
      SearchResult t = result(c, lambda);
      t.origin = name;
      offer(t);
      if (better(t, best, lambda)) best = t;
      if (refine(c, lambda)) {
        t = result(c, lambda);
        t.origin = name + "+refined";
        offer(t);
        if (better(t, best, lambda)) best = t;
      }
    }
    return best;
  }

  static bool better(const SearchResult& a, const SearchResult& b, double lambda) {
    return a.step_time + lambda * a.memory_bytes < (b.step_time + lambda * b.memory_bytes) * (1 - 1e-9);
  }

  void offer(const SearchResult& r) {
    if (r.fits && (!have_fit_ || r.step_time < best_fit_.step_time * (1 - 1e-9))) {
      best_fit_ = r;
      have_fit_ = true;
    }
  }

  SearchResult result(const std::vector<int>& choice, double lambda) const {
    SearchResult r;
    r.memory_limit = limit_;
    r.lambda = lambda;
    std::vector<double> live(n_ + 1, 0);  // bytes allocated at node id, freed after its last use
    for (size_t u = 0; u < n_; ++u) {
      const ir::Node& n = node(u);
      const Cand& c = cands_[u][static_cast<size_t>(choice[u])];
      if (n.kind == ir::NodeKind::kWeight) {
        r.weights[n.name] = c.out[0];
        r.weight_bytes += c.bytes;
        r.comm_time += tied(u, choice[u], choice);
        continue;
      }
      double comm = 0;
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        const size_t p = static_cast<size_t>(n.inputs[i].node);
        comm += edge(p, choice[p], n.inputs[i].index, u, choice[u], static_cast<int>(i));
      }
      r.comm_time += comm + sink(u, choice[u], choice);
      // Liveness: this node's outputs live until their last consumer (to the end for graph outputs).
      size_t last = u;
      for (const Use& k : uses_[u]) last = std::max(last, static_cast<size_t>(k.node));
      if (!sinks_[u].empty()) last = n_;
      double bytes = 0;
      for (size_t j = 0; j < n.outputs.size(); ++j) {
        bool into_weight = false;  // a tied output is written over its weight (donated), no new memory
        for (const auto& [out, tie] : sinks_[u]) into_weight = into_weight || (out == static_cast<int>(j) && tie >= 0);
        if (!into_weight) bytes += model_.local_bytes(n.outputs[j], c.out[j]);
      }
      live[u] += bytes;
      if (last < n_) live[last + 1] -= bytes;
      if (n.kind != ir::NodeKind::kApply) continue;
      r.compute_time += c.compute;
      NodeChoice nc;
      nc.node = static_cast<int32_t>(u);
      nc.op = n.op->name;
      nc.strategy = n.op->sharding ? c.strategy : "";
      nc.in = c.in;
      nc.out = c.out;
      nc.compute = c.compute;
      nc.comm = comm;
      nc.candidates = static_cast<int>(cands_[u].size());
      if (n.op->sharding) r.strategies[nc.node] = c.strategy;
      r.nodes.push_back(std::move(nc));
    }
    double cur = 0;
    for (size_t u = 0; u < n_; ++u) {
      cur += live[u];
      r.activation_bytes = std::max(r.activation_bytes, cur);
    }
    r.step_time = r.compute_time + r.comm_time;
    r.memory_bytes = r.weight_bytes + r.activation_bytes;
    r.fits = r.memory_bytes <= limit_;
    return r;
  }

  void add_start(const StartPlan& st) {
    if (st.inputs.empty() && st.weights.empty()) return;  // nothing split: the replicated plan
    starts_.emplace_back(st.name.empty() ? "start " + std::to_string(starts_.size()) : st.name, propagate(st));
  }

  const ir::Graph& g_;
  const SearchOptions& o_;
  std::vector<std::pair<std::string, std::vector<int>>> starts_;
  SearchResult best_fit_;
  bool have_fit_ = false;
  CostModel model_;
  size_t n_;
  double limit_ = 0;
  std::vector<std::vector<Cand>> cands_;
  std::vector<bool> update_;  // node id -> an optimizer update (its gradient moves are bucketed)
  std::vector<std::vector<Use>> uses_;
  std::vector<int> fanout_;
  std::vector<std::vector<std::pair<int, int32_t>>> sinks_;  // per node: (output, tied weight or -1)
  std::map<int32_t, std::vector<ir::Value>> ties_;           // weight -> outputs tied to it
};

}  // namespace

SearchResult search(const ir::Graph& g, const SearchOptions& options) { return Search(g, options).run(); }

SearchResult evaluate(const ir::Graph& g, const SearchOptions& options, const StartPlan& start) {
  return Search(g, options).priced(start);
}

}  // namespace spora::parallel
