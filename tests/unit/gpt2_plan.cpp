// "Planning past this machine" (issue 15 line 5; docs/parallel.md): builds
// GPT-2 small/medium/large/XL training steps as IR graphs -- weights
// declared by shape only, nothing allocated -- and plans each on simulated
// 8-, 64- and 1024-device clusters of 80 GB GPUs, 8 per node: the strategy
// search (auto_parallel) against two hand-written plans, pure data parallel
// and Megatron-style tensor parallel 8 within a node x data parallel across
// nodes. It lives here, not in bench/, because it needs core internals (the
// sharding rules, the search) and benches may use only the public API.
// The hand plans are written as a strategy on every op, so the same
// search/cost model prices them (with their strategies kept as written).
//
//   build/bin/bench_gpt2_plan                     every model on 8, 64, 1024 devices
//   build/bin/bench_gpt2_plan small 8             one model, one device count
//   build/bin/bench_gpt2_plan --detail xl 1024    also print the searched plan's ops
//
// The cluster (each figure's source is in docs/parallel.md, "Planning past
// this machine"): H100 SXM, 989e12 flop/s dense bf16, 3.35e12 B/s HBM3,
// 80e9 B; NVLink 4 450e9 B/s per direction per GPU, ~3 us; InfiniBand NDR
// 400 Gb/s = 50e9 B/s per GPU, ~5 us.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "autodiff/grad.h"
#include "ir/graph.h"
#include "ir/op.h"
#include "ir/sharding.h"
#include "parallel/search.h"
#include "passes/recompute.h"
#include "parallel/strategy.h"
#include "support/error.h"

namespace {

using namespace spora;

struct GptConfig {
  const char* name;
  int layers;
  int64_t d_model, heads;
};

const GptConfig kModels[] = {
    {"small", 12, 768, 12}, {"medium", 24, 1024, 16}, {"large", 36, 1280, 20}, {"xl", 48, 1600, 25}};

constexpr int64_t kBatch = 512, kSeq = 1024;
// GPT-2's vocabulary is 50257 = 29 x 1733, which no mesh axis divides; like
// Megatron-LM and nanoGPT we pad it to 50304 (a multiple of 128) so the
// vocabulary dim can be split at all.
constexpr int64_t kVocab = 50304;
constexpr DType kDt = SPORA_DTYPE_F32;

Shape shp(std::initializer_list<int64_t> d) {
  Shape s;
  for (int64_t v : d) s.push_back(v);
  return s;
}

Attrs ints(const char* k, std::vector<int64_t> v) {
  Attrs a;
  a.set(k, AttrValue::of_ints(std::move(v)));
  return a;
}

struct Step {
  ir::Graph g;
  std::map<size_t, std::string> ties;
  double params = 0;
};

// One AdamW training step: embedding (wte, wpe) + N pre-LN blocks + final LN
// + LM head tied to wte + mean cross-entropy; gradients by autodiff; one
// adam_update (decoupled) over every parameter with m and v as weights.
// `recompute`: each block is one recomputed region (Cell.recompute() on
// every block, passes/recompute.h): its activations are computed again in
// the backward pass instead of kept; only the block's output stays.
Step gpt2_step(const GptConfig& c, bool recompute = false) {
  const int64_t b = kBatch, s = kSeq, d = c.d_model, h = c.heads, dh = d / h, v = kVocab;
  ir::Graph f;
  const ir::Value ids = f.add_input("ids", SPORA_DTYPE_I32, shp({b, s}));
  const ir::Value targets = f.add_input("targets", SPORA_DTYPE_I32, shp({b * s}));
  const ir::Value mask = f.add_input("causal_mask", kDt, shp({s, s}));  // 0 / -inf, fed whole
  const ir::Value scale = f.add_input("attn_scale", kDt, shp({}));
  std::vector<int32_t> params;
  auto weight = [&](const std::string& n, Shape sh) {
    const ir::Value w = f.add_weight(n, kDt, sh);
    params.push_back(w.node);
    return w;
  };
  auto op = [&](const char* name, std::vector<ir::Value> in, Attrs a = Attrs{}) { return f.add_op(name, in, a)[0]; };
  auto ln = [&](ir::Value x, const std::string& p) {
    return f.add_op("layer_norm", {x, weight(p + ".g", shp({d})), weight(p + ".b", shp({d}))}, Attrs{})[0];
  };
  auto linear = [&](ir::Value x, const std::string& p, int64_t in, int64_t out) {
    return op("add", {op("matmul", {x, weight(p + ".w", shp({in, out}))}), weight(p + ".bias", shp({out}))});
  };
  const ir::Value wte = weight("wte", shp({v, d}));
  const ir::Value wpe = weight("wpe", shp({s, d}));
  ir::Value x = op("reshape", {op("add", {op("embedding", {wte, ids}), wpe})}, ints("shape", {b * s, d}));
  for (int l = 0; l < c.layers; ++l) {
    const std::string p = "h" + std::to_string(l);
    const auto first = static_cast<int32_t>(f.nodes().size());
    const ir::Value a_in = ln(x, p + ".ln1");
    auto heads = [&](const char* n) {  // (b*s, d) -> (b, h, s, dh)
      const ir::Value t = op("reshape", {linear(a_in, p + "." + n, d, d)}, ints("shape", {b, s, h, dh}));
      return op("transpose", {t}, ints("perm", {0, 2, 1, 3}));
    };
    const ir::Value q = heads("q"), k = heads("k"), val = heads("v");
    Attrs tb;
    tb.set("transpose_b", AttrValue::of_bool(true));
    const ir::Value scores = op("add", {op("mul", {f.add_op("matmul", {q, k}, tb)[0], scale}), mask});
    Attrs last;
    last.set("axis", AttrValue::of_int(-1));
    const ir::Value ctx = op("matmul", {op("softmax", {scores}, last), val});
    const ir::Value merged =
        op("reshape", {op("transpose", {ctx}, ints("perm", {0, 2, 1, 3}))}, ints("shape", {b * s, d}));
    x = op("add", {x, linear(merged, p + ".o", d, d)});
    const ir::Value m_in = ln(x, p + ".ln2");
    x = op("add", {x, linear(op("gelu", {linear(m_in, p + ".fc1", d, 4 * d)}), p + ".fc2", 4 * d, d)});
    if (recompute) passes::mark_recompute(f, first, static_cast<int32_t>(f.nodes().size()), 2 + l);
  }
  Attrs tb;
  tb.set("transpose_b", AttrValue::of_bool(true));
  const ir::Value logits = f.add_op("matmul", {ln(x, "lnf"), wte}, tb)[0];
  // The mean over tokens as sum x 1/(b*s): cross_entropy's rule keeps a
  // batch split only for reduction "sum" (a partial sum) or "none"; "mean"
  // would gather the (b*s, vocab) logits on every device.
  Attrs sum;
  sum.set("reduction", AttrValue::of_string("sum"));
  const ir::Value inv_tokens = f.add_input("inv_tokens", kDt, shp({}));
  f.set_outputs({op("mul", {f.add_op("cross_entropy", {logits, targets}, sum)[0], inv_tokens})});

  Step st;
  st.g = autodiff::value_and_grad(f, params, 0);
  if (recompute) passes::recompute(st.g);  // before the updates: output 0 is the loss
  ir::Graph& g = st.g;
  // One adam_update per parameter (an op takes at most SPORA_MAX_OP_INPUTS
  // inputs; per-parameter updates also let each take its own layout).
  const ir::Value lr = g.add_input("lr", SPORA_DTYPE_F32, shp({}));
  const ir::Value step = g.add_input("step", SPORA_DTYPE_F32, shp({}));
  const ir::Value gscale = g.add_input("grad_scale", SPORA_DTYPE_F32, shp({}));
  Attrs adamw;
  adamw.set("decoupled", AttrValue::of_bool(true));
  adamw.set("weight_decay", AttrValue::of_float(0.1));
  std::vector<ir::Value> outs = {g.outputs()[0]};
  const std::vector<ir::Value> grads(g.outputs().begin() + 1, g.outputs().end());
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string name = g.node(params[i]).name;
    const Shape sh = g.node(params[i]).outputs[0].shape;
    const ir::Value m = g.add_weight("m." + name, kDt, sh), v = g.add_weight("v." + name, kDt, sh);
    const std::vector<ir::Value> upd =
        g.add_op("adam_update", {lr, step, gscale, ir::Value{params[i], 0}, grads[i], m, v}, adamw);
    const std::string tied[3] = {name, "m." + name, "v." + name};
    for (int k = 0; k < 3; ++k) {
      st.ties[outs.size()] = tied[k];
      outs.push_back(upd[static_cast<size_t>(k)]);
    }
  }
  g.set_outputs(outs);
  for (int32_t w : params) st.params += static_cast<double>(g.node(w).outputs[0].shape.numel());
  return st;
}

// ---- hand plans, as starting plans (parallel::StartPlan): layouts of the
// inputs and weights, propagated through every op by the core as sharding
// propagation does ----

using LayoutFn = TensorLayout (*)(const std::string& name, const Shape& shape, const parallel::Mesh& m);

parallel::StartPlan hand_plan(const ir::Graph& g, const parallel::Mesh& mesh, const std::string& name,
                              LayoutFn input_layout, LayoutFn weight_layout) {
  parallel::StartPlan st;
  st.name = name;
  for (int32_t id : g.inputs()) st.inputs[g.node(id).name] = input_layout(g.node(id).name, g.node(id).outputs[0].shape, mesh);
  for (int32_t id : g.weights())
    st.weights[g.node(id).name] = weight_layout(g.node(id).name, g.node(id).outputs[0].shape, mesh);
  return st;
}

TensorLayout batch_over_dp(const std::string& name, const Shape& s, const parallel::Mesh& m) {
  TensorLayout l = TensorLayout::replicated(s.rank);
  // Axis 0 is dp in both hand meshes (of size 1 on a (1, 8) mesh: nothing to split).
  if ((name == "ids" || name == "targets") && m.shape[0] > 1) l.dims[0] = 0;
  return l;
}

TensorLayout all_replicated(const std::string&, const Shape& s, const parallel::Mesh&) {
  return TensorLayout::replicated(s.rank);
}

bool ends_with(const std::string& s, const std::string& t) {
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

// Megatron-LM's split over mp (axis 1): q, k, v and fc1 by columns (their
// biases with them), o and fc2 by rows; layer norms, biases after a row
// split, and the embeddings replicated (the embedding's rule keeps the
// vocabulary whole, and cross_entropy needs the class dim whole).
// Adam's m and v follow their parameter.
TensorLayout megatron(const std::string& name0, const Shape& s, const parallel::Mesh&) {
  std::string name = name0;
  if (name.rfind("m.", 0) == 0 || name.rfind("v.", 0) == 0) name = name.substr(2);
  TensorLayout l = TensorLayout::replicated(s.rank);
  const bool col = name.find(".q.") != std::string::npos || name.find(".k.") != std::string::npos ||
                   name.find(".v.") != std::string::npos || name.find(".fc1.") != std::string::npos;
  const bool row = name.find(".o.") != std::string::npos || name.find(".fc2.") != std::string::npos;
  if (col && ends_with(name, ".w")) l.dims[1] = 1;
  if (col && ends_with(name, ".bias")) l.dims[0] = 1;
  if (row && ends_with(name, ".w")) l.dims[0] = 1;
  return l;
}

// Megatron-LM's vocabulary-parallel LM head: wte (and its Adam state) split
// by vocabulary rows over mp; the embedding's rule gathers it, the head's
// logits come out split by class, and cross_entropy (class dim whole)
// gathers them (Megatron's fused vocab-parallel loss has no rule here).
TensorLayout megatron_vocab(const std::string& name, const Shape& s, const parallel::Mesh& m) {
  TensorLayout l = megatron(name, s, m);
  if (name == "wte" || name == "m.wte" || name == "v.wte") l.dims[0] = 1;
  return l;
}

parallel::SearchOptions cluster(std::vector<int64_t> shape, std::vector<std::string> names) {
  parallel::SearchOptions o;
  o.mesh.shape = std::move(shape);
  o.mesh.names = std::move(names);
  o.device.peak_flops = 989e12;     // H100 SXM dense bf16 (NVIDIA H100 datasheet)
  o.device.mem_bandwidth = 3.35e12; // HBM3 (datasheet)
  o.device.memory_bytes = 80e9;
  o.topology.devices_per_node = 8;  // DGX H100
  o.topology.intra = {450e9, 3e-6}; // NVLink 4: 900 GB/s bidirectional per GPU
  o.topology.inter = {50e9, 5e-6};  // one 400 Gb/s NDR InfiniBand NIC per GPU
  o.restarts = 3;  // when a plan fits, try memory penalties for a faster one
  o.data_parallel_start = false;  // the bench names its starts: the hand plans below
  return o;
}

struct Row {
  std::string plan;
  double step = 0, memory = 0, secs = 0;
  bool fits = false;
  std::string summary;
  std::string origin;
  int evals = 0;
};

std::string layout_of(const parallel::SearchResult& r, const std::string& w, const parallel::Mesh& m) {
  auto it = r.weights.find(w);
  return it == r.weights.end() ? "?" : it->second.str(m.names);
}

std::string summary(const parallel::SearchResult& r, const parallel::Mesh& m) {
  return "wte " + layout_of(r, "wte", m) + " q " + layout_of(r, "h0.q.w", m) + " o " + layout_of(r, "h0.o.w", m) +
         " fc1 " + layout_of(r, "h0.fc1.w", m) + " fc2 " + layout_of(r, "h0.fc2.w", m) + " m.fc1 " +
         layout_of(r, "m.h0.fc1.w", m);
}

// The fc1 matmul of layer 0 and the LM head (the biggest matmuls): their strategies.
std::string big_matmuls(const ir::Graph& g, const parallel::SearchResult& r, const parallel::Mesh& m) {
  std::string s;
  for (const parallel::NodeChoice& n : r.nodes) {
    if (n.op != "matmul" && n.op != "embedding") continue;
    const ir::Node& node = g.node(n.node);
    for (ir::Value v : node.inputs) {
      const std::string& wn = g.node(v.node).name;
      if (g.node(v.node).kind == ir::NodeKind::kWeight && (wn == "h0.fc1.w" || wn == "wte")) {
        s += "  " + n.op + "(" + wn + ") '" + n.strategy + "' -> " + n.out[0].str(m.names) + "\n";
        break;
      }
    }
  }
  return s;
}

Row run(const ir::Graph& g, parallel::SearchOptions o, const std::string& plan, bool detail,
        const parallel::StartPlan* priced = nullptr) {
  Row row;
  row.plan = plan;
  const auto t0 = std::chrono::steady_clock::now();
  const parallel::SearchResult r = priced ? parallel::evaluate(g, o, *priced) : parallel::search(g, o);
  row.secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  row.step = r.step_time;
  row.memory = r.memory_bytes;
  row.fits = r.memory_bytes <= 80e9;
  row.evals = r.evaluations;
  row.summary = summary(r, o.mesh);
  if (detail) {
    std::printf("%s\n%s", row.summary.c_str(), big_matmuls(g, r, o.mesh).c_str());
    // The costliest ops (compute + redistribution into them).
    std::vector<const parallel::NodeChoice*> top;
    for (const parallel::NodeChoice& n : r.nodes) top.push_back(&n);
    std::sort(top.begin(), top.end(), [](const auto* a, const auto* b) { return a->compute + a->comm > b->compute + b->comm; });
    for (size_t i = 0; i < top.size() && i < 8; ++i) {
      std::string in;
      for (ir::Value v : g.node(top[i]->node).inputs) in += g.meta(v).shape.str() + " ";
      const ir::Node& nd = g.node(top[i]->node);
      std::vector<TensorMeta> metas;
      for (ir::Value v : nd.inputs) metas.push_back(g.meta(v));
      OpCall call;
      infer_call(*nd.op, metas.data(), static_cast<int>(metas.size()), nd.attrs, call);
      const Cost cc = nd.op->estimate(call);
      std::printf("  %%%d %s %s'%s' compute %.4f s comm %.4f s flops %.3g bytes %.3g\n", top[i]->node, top[i]->op.c_str(), in.c_str(),
                  top[i]->strategy.c_str(), top[i]->compute, top[i]->comm, cc.flops, cc.bytes);
    }
  }
  if (detail) {
    // Where the memory goes: weights, and the largest op outputs per device.
    parallel::CostModel cm(o.mesh.shape, o.device, o.topology);
    std::vector<std::pair<double, std::string>> big;
    double sum_out = 0;
    for (const parallel::NodeChoice& n : r.nodes)
      for (size_t j = 0; j < n.out.size(); ++j) {
        const double b = cm.local_bytes(g.node(n.node).outputs[j], n.out[j]);
        sum_out += b;
        big.push_back({b, "%" + std::to_string(n.node) + " " + n.op + " " + g.node(n.node).outputs[j].shape.str() +
                              " " + n.out[j].str(o.mesh.names)});
      }
    std::sort(big.rbegin(), big.rend());
    std::printf("  weights %.2f GB, activations (peak live) %.2f GB, all op outputs %.2f GB; largest:\n",
                r.weight_bytes / 1e9, r.activation_bytes / 1e9, sum_out / 1e9);
    for (size_t i = 0; i < big.size() && i < 6; ++i) std::printf("    %.3f GB %s\n", big[i].first / 1e9, big[i].second.c_str());
  }
  row.origin = r.origin;
  std::printf("  %-22s step %9.3f s  compute %8.3f  comm %8.3f  memory %7.1f GB (%s)  %6.2f s, %d programmes, from %s\n",
              plan.c_str(), r.step_time, r.compute_time, r.comm_time, r.memory_bytes / 1e9,
              row.fits ? "fits" : "over", row.secs, r.evaluations, r.origin.c_str());
  std::fflush(stdout);
  return row;
}

std::string mesh_str(const parallel::Mesh& m) {
  std::string s = "(";
  for (size_t i = 0; i < m.shape.size(); ++i) s += (i ? ", " : "") + std::to_string(m.shape[i]);
  s += ") (";
  for (size_t i = 0; i < m.names.size(); ++i) s += (i ? ", " : "") + m.names[i];
  return s + ")";
}

// The searched plan on both meshes ((devices/8, 8) named (dp, mp), starting
// also from the hand plans on it; and a 1-D mesh of every device, starting
// from data parallelism), under `limit`: the better of the two (a fitting
// one, then the faster; when neither fits, the smaller; unlimited: the
// faster). A planner trying both meshes pays both searches.
Row searched(const Step& st, int64_t devices, double limit, const std::string& label, bool detail) {
  parallel::SearchOptions s = cluster({devices / 8, 8}, {"dp", "mp"});
  s.ties = st.ties;
  s.memory_limit = limit;
  s.starts = {hand_plan(st.g, s.mesh, "data parallel over dp", batch_over_dp, all_replicated),
              hand_plan(st.g, s.mesh, "megatron", batch_over_dp, megatron),
              hand_plan(st.g, s.mesh, "megatron vocab-split", batch_over_dp, megatron_vocab)};
  parallel::SearchOptions o1 = cluster({devices}, {"all"});
  o1.ties = st.ties;
  o1.memory_limit = limit;
  if (kBatch % devices == 0) o1.starts = {hand_plan(st.g, o1.mesh, "data parallel", batch_over_dp, all_replicated)};
  Row a = run(st.g, s, label + " (dp, mp)", detail);
  Row b = run(st.g, o1, label + " 1-D", detail);
  const bool unlimited = limit > 1e29;
  const bool better = unlimited ? b.step < a.step : (b.fits != a.fits ? b.fits : (b.fits ? b.step < a.step : b.memory < a.memory));
  Row r = better ? b : a;
  r.secs = a.secs + b.secs;
  return r;
}

// The hand plans as written (no search): data parallel on a 1-D mesh of
// every device, Megatron (and its vocabulary-split head) on (devices/8, 8).
std::vector<Row> hand_rows(const Step& st, int64_t devices, const std::string& suffix, bool detail) {
  std::vector<Row> rows;
  if (kBatch % devices == 0) {
    parallel::SearchOptions o = cluster({devices}, {"dp"});
    o.ties = st.ties;
    const parallel::StartPlan dp = hand_plan(st.g, o.mesh, "data parallel", batch_over_dp, all_replicated);
    rows.push_back(run(st.g, o, "data parallel" + suffix, detail, &dp));
  } else {
    std::printf("  %-22s n/a: global batch %lld < %lld devices\n", ("data parallel" + suffix).c_str(),
                static_cast<long long>(kBatch), static_cast<long long>(devices));
  }
  parallel::SearchOptions o = cluster({devices / 8, 8}, {"dp", "mp"});
  o.ties = st.ties;
  for (LayoutFn fn : {megatron, megatron_vocab}) {
    const parallel::StartPlan hp = hand_plan(st.g, o.mesh, fn == megatron ? "megatron" : "megatron vocab-split",
                                             batch_over_dp, fn);
    rows.push_back(run(st.g, o, (fn == megatron ? "megatron tp8 x dp" : "megatron, vocab-split") + suffix, detail, &hp));
  }
  return rows;
}

void bench(const GptConfig& c, int64_t devices, bool detail) {
  const auto t0 = std::chrono::steady_clock::now();
  const Step st = gpt2_step(c), rc = gpt2_step(c, true);
  const double build = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("GPT-2 %s (%.0fM params, %zu nodes; %zu with every block recomputed; both built in %.2f s) on %lld "
              "devices\n",
              c.name, st.params / 1e6, st.g.nodes().size(), rc.g.nodes().size(), build, static_cast<long long>(devices));
  // The planner's choices: each mesh, with and without recomputation; the
  // best fitting plan wins (then the faster; if none fits, the smallest).
  const Row plain = searched(st, devices, 80e9, "searched", detail);
  const Row rec = searched(rc, devices, 80e9, "searched+recompute", detail);
  const bool take_rec = rec.fits != plain.fits ? rec.fits : (rec.fits ? rec.step < plain.step : rec.memory < plain.memory);
  Row best = take_rec ? rec : plain;
  best.plan = take_rec ? "recompute" : "no recompute";
  best.secs = plain.secs + rec.secs;
  // No limit: the fastest plan any of the searches found (a search under a
  // limit may land on a faster plan than the unconstrained one: local minima).
  Row free = searched(st, devices, 1e30, "searched (no limit)", detail);
  for (const Row* r : {&plain, &rec})
    if (r->step < free.step) free.step = r->step;
  std::vector<Row> hands = hand_rows(st, devices, "", detail);
  for (const Row& r : hand_rows(rc, devices, " +rc", detail)) hands.push_back(r);
  double best_hand = 1e300, best_fit = 1e300;
  std::string fit_name = "none";
  for (const Row& r : hands) {
    best_hand = std::min(best_hand, r.step);
    if (r.fits && r.step < best_fit) {
      best_fit = r.step;
      fit_name = r.plan;
    }
  }
  std::printf(" RESULT %s %lld: searched [%s, %s, from %s] %.3f s %.1f GB %s (no limit %.3f s) | best hand %.3f s, "
              "best fitting hand %s%s | search %.2f + %.2f s\n\n",
              c.name, static_cast<long long>(devices), best.plan.c_str(), plain.fits || rec.fits ? "fits" : "over",
              best.origin.c_str(), best.step, best.memory / 1e9, best.fits ? "fits" : "over", free.step, best_hand,
              best_fit < 1e300 ? (fit_name + " ").c_str() : "none",
              best_fit < 1e300 ? (std::to_string(best_fit) + " s").c_str() : "", best.secs, free.secs);
}

}  // namespace

int main(int argc, char** argv) {
  bool detail = false;
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--detail")
      detail = true;
    else
      args.push_back(argv[i]);
  }
  std::vector<int64_t> counts = {8, 64, 1024};
  if (args.size() >= 2) counts = {std::atoll(args[1].c_str())};
  try {
    for (const GptConfig& c : kModels) {
      if (!args.empty() && args[0] != c.name) continue;
      for (int64_t n : counts) {
        if (n < 8 || n % 8 != 0) {
          std::fprintf(stderr, "device count must be a multiple of 8, got %lld\n", static_cast<long long>(n));
          return 2;
        }
        bench(c, n, detail);
      }
    }
  } catch (const spora::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
