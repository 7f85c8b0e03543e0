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
// Pipelined plans (issue 16 line 4; docs/parallel.md "Pipelined plans"):
// p stages of devices/p devices, each stage's graphs cut by
// parallel::pipeline_stage and searched on its own mesh, priced as a 1F1B
// step of M micro-batches; the planner keeps the best fitting plan of all.
//
//   build/bin/bench_gpt2_plan                     every model on 8, 64, 1024 devices
//   build/bin/bench_gpt2_plan small 8             one model, one device count
//   build/bin/bench_gpt2_plan --detail xl 1024    also print the searched plan's ops
//   build/bin/bench_gpt2_plan --all small 64      pipelined plans also with recomputation when they fit without
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
#include "parallel/pipeline_split.h"
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

// The forward graph of one (micro-)batch of `batch` sequences, output 0 the
// scalar loss: embedding (wte, wpe) + N pre-LN blocks + final LN + LM head +
// mean cross-entropy. `recompute`: each block is one recomputed region
// (Cell.recompute() on every block, passes/recompute.h). `untied`: the LM
// head reads its own copy `lm_head` of wte (what a pipeline needs when the
// embedding and the head run in different stages: Megatron-LM keeps such a
// copy in the last stage and sums the two gradients once per step).
struct Forward {
  ir::Graph f;
  std::vector<int32_t> params;                     // weight node ids, in creation order
  std::vector<std::pair<int64_t, int64_t>> blocks; // each block's op node ids [first, end)
};

Forward gpt2_forward(const GptConfig& c, int64_t batch, bool recompute, bool untied) {
  const int64_t b = batch, s = kSeq, d = c.d_model, h = c.heads, dh = d / h, v = kVocab;
  Forward out;
  ir::Graph& f = out.f;
  const ir::Value ids = f.add_input("ids", SPORA_DTYPE_I32, shp({b, s}));
  const ir::Value targets = f.add_input("targets", SPORA_DTYPE_I32, shp({b * s}));
  const ir::Value mask = f.add_input("causal_mask", kDt, shp({s, s}));  // 0 / -inf, fed whole
  const ir::Value scale = f.add_input("attn_scale", kDt, shp({}));
  std::vector<int32_t>& params = out.params;
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
    const auto end = static_cast<int32_t>(f.nodes().size());
    if (recompute) passes::mark_recompute(f, first, end, 2 + l);
    out.blocks.push_back({first, end});
  }
  Attrs tb;
  tb.set("transpose_b", AttrValue::of_bool(true));
  const ir::Value head = untied ? weight("lm_head", shp({v, d})) : wte;
  const ir::Value logits = f.add_op("matmul", {ln(x, "lnf"), head}, tb)[0];
  // The mean over tokens as sum x 1/(b*s): cross_entropy's rule keeps a
  // batch split only for reduction "sum" (a partial sum) or "none"; "mean"
  // would gather the (b*s, vocab) logits on every device.
  Attrs sum;
  sum.set("reduction", AttrValue::of_string("sum"));
  const ir::Value inv_tokens = f.add_input("inv_tokens", kDt, shp({}));
  f.set_outputs({op("mul", {f.add_op("cross_entropy", {logits, targets}, sum)[0], inv_tokens})});
  return out;
}

// Appends one adam_update (decoupled AdamW) per parameter to g: params[i]
// (weight nodes of g) updated by grads[i], m and v new weights; the graph's
// outputs become `keep` followed by every updated tensor, each tied to its
// weight in `ties`. (An op takes at most SPORA_MAX_OP_INPUTS inputs;
// per-parameter updates also let each take its own layout.)
void append_adamw(ir::Graph& g, const std::vector<int32_t>& params, const std::vector<ir::Value>& grads,
                  std::vector<ir::Value> keep, std::map<size_t, std::string>& ties) {
  const ir::Value lr = g.add_input("lr", SPORA_DTYPE_F32, shp({}));
  const ir::Value step = g.add_input("step", SPORA_DTYPE_F32, shp({}));
  const ir::Value gscale = g.add_input("grad_scale", SPORA_DTYPE_F32, shp({}));
  Attrs adamw;
  adamw.set("decoupled", AttrValue::of_bool(true));
  adamw.set("weight_decay", AttrValue::of_float(0.1));
  std::vector<ir::Value> outs = std::move(keep);
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string name = g.node(params[i]).name;
    const Shape sh = g.node(params[i]).outputs[0].shape;
    const ir::Value m = g.add_weight("m." + name, kDt, sh), v = g.add_weight("v." + name, kDt, sh);
    const std::vector<ir::Value> upd =
        g.add_op("adam_update", {lr, step, gscale, ir::Value{params[i], 0}, grads[i], m, v}, adamw);
    const std::string tied[3] = {name, "m." + name, "v." + name};
    for (int k = 0; k < 3; ++k) {
      ties[outs.size()] = tied[k];
      outs.push_back(upd[static_cast<size_t>(k)]);
    }
  }
  g.set_outputs(outs);
}

// One AdamW training step of the whole batch: the forward graph above (LM
// head tied to wte), gradients by autodiff, the updates.
Step gpt2_step(const GptConfig& c, bool recompute = false) {
  const Forward fw = gpt2_forward(c, kBatch, recompute, false);
  Step st;
  st.g = autodiff::value_and_grad(fw.f, fw.params, 0);
  if (recompute) passes::recompute(st.g);  // before the updates: output 0 is the loss
  const std::vector<ir::Value> grads(st.g.outputs().begin() + 1, st.g.outputs().end());
  append_adamw(st.g, fw.params, grads, {st.g.outputs()[0]}, st.ties);
  for (int32_t w : fw.params) st.params += static_cast<double>(st.g.node(w).outputs[0].shape.numel());
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
  // Axis 0 is dp in both hand meshes (of size 1 on a (1, 8) mesh: nothing to
  // split). A pipeline stage's received activations and cotangents are
  // (tokens, d): split by tokens like the batch.
  const bool batch = name == "ids" || name == "targets" || name.rfind("pipe_recv", 0) == 0 ||
                     name.rfind("pipe_grad", 0) == 0;
  if (batch && s.rank >= 1 && m.shape[0] > 1 && s.dims[0] % m.shape[0] == 0) l.dims[0] = 0;
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
TensorLayout megatron_vocab(const std::string& name0, const Shape& s, const parallel::Mesh& m) {
  TensorLayout l = megatron(name0, s, m);
  const bool state = name0.rfind("m.", 0) == 0 || name0.rfind("v.", 0) == 0;
  const std::string name = state ? name0.substr(2) : name0;
  if (name == "wte" || name == "lm_head") l.dims[0] = 1;
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

// ---- pipelined plans (issue 16 line 4; docs/parallel.md "Pipelined plans") ----
//
// The runtime's pipeline (frontends/python/spora/_pipeline.py): each stage
// runs, per micro-batch, its forward graph, then its backward graph, which
// recomputes the stage's forward from the stage's inputs and returns the
// gradients of what it received and of its weights; the gradients are
// accumulated over the M micro-batches and the optimizer runs once. Each
// stage here is one graph: the stage's backward graph (parallel::pipeline_stage)
// followed by its AdamW updates, searched on the stage's own mesh of
// devices/p devices. From that one plan:
//   forward step  = the ops of the backward graph's forward prefix (node ids
//                   are kept by autodiff, so the prefix is the forward graph)
//   backward step = every op but the updates
//   once per step = the updates (compute and the moves into them) and every
//                   move of a value on its way to them only (a weight's
//                   gradient: the data-parallel reduction of the accumulated
//                   gradient, wherever the plan puts it)

struct StagePlan {
  std::string mesh, origin;
  double t_fwd = 0, t_bwd = 0, t_once = 0;  // seconds: per micro-batch, per micro-batch, per step
  double send = 0, send_grad = 0;  // seconds per micro-batch: activation to the next stage, gradient to the previous
  double embed_bytes = 0;          // per device: wte's (stage 0) or lm_head's (last stage) gradient
  double weights = 0, accum = 0, activations = 0, inflight = 0, memory = 0;  // bytes per device
  bool fits = false;
  double secs = 0;
  int searches = 0;
  double order(int64_t slots) const { return static_cast<double>(slots) * (t_fwd + t_bwd + send + send_grad) + t_once; }
};

// The layout `v` (an input of g) is first read in, in plan r (replicated when
// no op reads it).
TensorLayout first_use(const ir::Graph& g, const parallel::SearchResult& r, int32_t v) {
  for (const parallel::NodeChoice& n : r.nodes) {
    const ir::Node& node = g.node(n.node);
    for (size_t i = 0; i < node.inputs.size(); ++i)
      if (node.inputs[i].node == v && i < n.in.size()) return n.in[i];
  }
  return TensorLayout::replicated(g.node(v).outputs[0].shape.rank);
}

// Seconds to send value v (as plan r leaves it) to the neighbouring stage:
// each device sends its own part to its counterpart over its inter-node
// link (stages are on different nodes: a stage has >= 8 devices); a partial
// sum is reduced within the stage first.
double send_time(const ir::Graph& g, const parallel::SearchResult& r, const std::map<int32_t, size_t>& at,
                 ir::Value v, const parallel::CostModel& cm, const parallel::Link& link) {
  const auto it = at.find(v.node);
  if (it == at.end()) fail(Code::kInternal, "[bench_gpt2_plan] no plan for node {}", v.node);
  const TensorLayout& l = r.nodes[it->second].out[static_cast<size_t>(v.index)];
  TensorLayout whole_sum = l;
  whole_sum.partial = 0;
  const TensorMeta& m = g.meta(v);
  const double reduce = l.partial ? cm.redistribute(m, l, whole_sum) : 0;
  return reduce + link.latency + cm.local_bytes(m, whole_sum) / link.bandwidth;
}

// Stage k of p of forward graph fw (one micro-batch), planned on `devices`
// devices, with `in_flight` micro-batches' inputs kept (1F1B: p - k); of its
// two meshes the fitting one, then the faster over `slots` (M + p - 1)
// micro-batch slots and the updates.
StagePlan plan_stage(const Forward& fw, const std::vector<parallel::StageMark>& marks, int32_t p, int32_t k,
                     bool rc, int64_t devices, int64_t in_flight, int64_t slots, bool detail) {
  const parallel::PipelineStage ps = parallel::pipeline_stage(fw.f, p, k, marks);
  const bool last = k == p - 1;
  if (ps.send.size() > 1 || ps.recv.size() > 1)
    fail(Code::kInternal, "[bench_gpt2_plan] stage {} sends {} and receives {} values; cuts between blocks pass one",
         k, ps.send.size(), ps.recv.size());
  ir::Graph g = ps.backward;
  // The backward graph's inputs are the forward's plus one cotangent per
  // sent value (after the received values, before the weights), so the
  // forward's op ids are shifted by that count.
  const auto ncot = static_cast<int32_t>(ps.send.size());
  const auto fwd_nodes = static_cast<int32_t>(ps.forward.nodes().size()) + ncot;
  ir::Value sent;
  if (!last) {
    const ir::Value fo = ps.forward.outputs()[0];
    sent = {fo.node + ncot, fo.index};
    const ir::Node &a = ps.forward.node(fo.node), &b = g.node(sent.node);
    if (a.kind != b.kind || a.op != b.op || a.outputs[0].shape != b.outputs[0].shape)
      fail(Code::kInternal, "[bench_gpt2_plan] stage {}: the sent value is not node {} of the backward graph", k,
           sent.node);
  }
  if (rc) {
    // The blocks' recompute marks came along with the ops. The forward pass
    // ends at the loss (last stage) or at the sent value: make it output 0
    // for the pass, then drop it again.
    if (last) {
      passes::recompute(g);
    } else {
      std::vector<ir::Value> outs = g.outputs();
      outs.insert(outs.begin(), sent);
      g.set_outputs(outs);
      passes::recompute(g);
      outs = g.outputs();
      sent = outs[0];
      outs.erase(outs.begin());
      g.set_outputs(outs);
    }
  }
  // Outputs: (last: the loss,) the received value's gradient (k > 0), the
  // weights' gradients in ps.weights order.
  const size_t lead = (last ? 1 : 0) + (k > 0 ? 1 : 0);
  if (g.outputs().size() != lead + ps.weights.size())
    fail(Code::kInternal, "[bench_gpt2_plan] stage {}: {} backward outputs for {} weights", k, g.outputs().size(),
         ps.weights.size());
  const ir::Value recv_grad = k > 0 ? g.outputs()[last ? 1 : 0] : ir::Value{};
  std::vector<int32_t> params;
  for (const std::string& w : ps.weights)
    for (int32_t id : g.weights())
      if (g.node(id).name == w) params.push_back(id);
  const std::vector<ir::Value> grads(g.outputs().begin() + static_cast<std::ptrdiff_t>(lead), g.outputs().end());
  std::map<size_t, std::string> ties;
  append_adamw(g, params, grads, {}, ties);

  // Ops of the backward pass whose results reach nothing but the updates
  // (a weight's gradient and what is made of it on the way).
  std::vector<std::vector<int32_t>> readers(g.nodes().size());
  for (size_t id = 0; id < g.nodes().size(); ++id)
    for (ir::Value v : g.node(static_cast<int32_t>(id)).inputs)
      readers[static_cast<size_t>(v.node)].push_back(static_cast<int32_t>(id));
  std::vector<bool> is_output(g.nodes().size(), false), grad_only(g.nodes().size(), false);
  for (ir::Value v : g.outputs()) is_output[static_cast<size_t>(v.node)] = true;
  for (size_t id = g.nodes().size(); id-- > static_cast<size_t>(fwd_nodes);) {
    const ir::Node& nd = g.node(static_cast<int32_t>(id));
    if (nd.kind != ir::NodeKind::kApply) continue;
    if (nd.op->name == "adam_update") {
      grad_only[id] = true;
      continue;
    }
    bool only = !readers[id].empty() && !is_output[id];
    for (int32_t r : readers[id]) only = only && grad_only[static_cast<size_t>(r)];
    grad_only[id] = only;
  }

  // What stays across micro-batches: their inputs (ids, targets, the
  // received activation), whole before the search, as each is read after it.
  std::vector<int32_t> kept_inputs;
  double kept_whole = 0;
  for (int32_t id : g.inputs()) {
    const std::string& n = g.node(id).name;
    if (n == "ids" || n == "targets" || n.rfind("pipe_recv", 0) == 0) {
      kept_inputs.push_back(id);
      kept_whole += static_cast<double>(g.node(id).outputs[0].shape.numel()) * dtype_size(g.node(id).outputs[0].dtype);
    }
  }
  StagePlan best;
  bool have = false;
  for (int mi = 0; mi < 2; ++mi) {
    parallel::SearchOptions o = mi == 0 ? cluster({devices / 8, 8}, {"dp", "mp"}) : cluster({devices}, {"all"});
    o.ties = ties;
    if (mi == 0)
      o.starts = {hand_plan(g, o.mesh, "data parallel over dp", batch_over_dp, all_replicated),
                  hand_plan(g, o.mesh, "megatron", batch_over_dp, megatron),
                  hand_plan(g, o.mesh, "megatron vocab-split", batch_over_dp, megatron_vocab)};
    else
      o.starts = {hand_plan(g, o.mesh, "data parallel", batch_over_dp, all_replicated)};
    const parallel::CostModel cm(o.mesh.shape, o.device, o.topology);
    // The search's limit leaves room for the other in-flight inputs; if the
    // gradient accumulators then overflow, search again with that much less.
    double limit = 80e9 - static_cast<double>(in_flight - 1) * kept_whole / static_cast<double>(devices);
    StagePlan sp;
    for (int pass = 0; pass < 2; ++pass) {
      o.memory_limit = limit;
      const auto t0 = std::chrono::steady_clock::now();
      const parallel::SearchResult r = parallel::search(g, o);
      sp = StagePlan{};
      sp.secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      sp.searches = pass + 1;
      sp.mesh = mi == 0 ? "(dp, mp)" : "1-D";
      sp.origin = r.origin;
      std::map<int32_t, size_t> at;
      for (size_t i = 0; i < r.nodes.size(); ++i) at[r.nodes[i].node] = i;
      for (const parallel::NodeChoice& n : r.nodes) {
        if (n.node < fwd_nodes) sp.t_fwd += n.compute + n.comm;
        if (n.op == "adam_update") {
          sp.t_once += n.compute + n.comm;
          continue;
        }
        // Moves of a gradient on its way to the update (a partial sum
        // reduced, reduce-scattered, ...): once per step, on the
        // accumulated gradient.
        const ir::Node& u = g.node(n.node);
        for (size_t i = 0; i < u.inputs.size() && i < n.in.size(); ++i) {
          const ir::Value v = u.inputs[i];
          const auto it = at.find(v.node);
          if (!grad_only[static_cast<size_t>(v.node)] || it == at.end()) continue;
          sp.t_once += cm.redistribute(g.meta(v), r.nodes[it->second].out[static_cast<size_t>(v.index)], n.in[i]);
        }
      }
      sp.t_bwd = r.step_time - sp.t_once;
      if (!last) sp.send = send_time(g, r, at, sent, cm, o.topology.inter);
      if (k > 0) sp.send_grad = send_time(g, r, at, recv_grad, cm, o.topology.inter);
      for (int32_t id : params) {
        const std::string& n = g.node(id).name;
        const double b = cm.local_bytes(g.node(id).outputs[0], r.weights.at(n));
        sp.accum += b;  // the gradient accumulated over the micro-batches, laid out as its weight
        if (n == "wte" || n == "lm_head") sp.embed_bytes = b;
      }
      for (int32_t id : kept_inputs)
        sp.inflight += static_cast<double>(in_flight - 1) * cm.local_bytes(g.node(id).outputs[0], first_use(g, r, id));
      sp.weights = r.weight_bytes;
      sp.activations = r.activation_bytes;
      sp.memory = sp.weights + sp.accum + sp.activations + sp.inflight;
      sp.fits = sp.memory <= 80e9;
      if (sp.fits || !r.fits) break;
      limit -= (sp.memory - 80e9) * 1.02;
      if (limit <= 0) break;
    }
    if (detail)
      std::printf("    stage %d/%d %s %lld dev (from %s): fwd %.4f bwd %.4f s/micro-batch, once %.4f s, send %.4f + "
                  "%.4f s; memory %.1f GB = weights+Adam %.1f + grad accum %.1f + activations %.1f + in flight %.1f "
                  "(%.2f s)\n",
                  k, p, sp.mesh.c_str(), static_cast<long long>(devices), sp.origin.c_str(), sp.t_fwd, sp.t_bwd,
                  sp.t_once, sp.send, sp.send_grad, sp.memory / 1e9, sp.weights / 1e9, sp.accum / 1e9,
                  sp.activations / 1e9, sp.inflight / 1e9, sp.secs);
    const double secs = best.secs + sp.secs;
    const int searches = best.searches + sp.searches;
    const bool better = !have || (sp.fits != best.fits ? sp.fits
                                                       : (sp.fits ? sp.order(slots) < best.order(slots)
                                                                  : sp.memory < best.memory));
    if (better) best = sp;
    best.secs = secs;
    best.searches = searches;
    have = true;
  }
  return best;
}

struct PipeRow {
  int32_t p = 1;
  int64_t m = 1;
  bool rc = false;
  double step = 0, slot = 0, p2p = 0, once = 0, sync = 0, bubble = 0, memory = 0, secs = 0;
  bool fits = false;
  std::string meshes;
};

// The pipelined plan with p stages of devices/p devices and M micro-batches
// under 1F1B:
//   step   = (M + p - 1) x (slowest stage's forward + backward per micro-batch
//            + the slowest boundary's activation and gradient transfers)
//            + the slowest stage's once-per-step updates (with the gradient
//            reduction) + the wte / lm_head gradient sum between stage 0
//            and the last stage (an all_reduce of 2 over the inter-node link)
//   bubble = (p - 1) / (M + p - 1)
//   memory = max over stages of weights + Adam state + gradient
//            accumulators + the peak of one micro-batch's backward graph
//            + the inputs of the other min(p - k, M) - 1 micro-batches in flight.
// Stages 1..p-2 are the same graph up to names: stage 1 stands for them
// (it keeps the most micro-batches in flight).
PipeRow pipelined(const GptConfig& c, int64_t devices, int32_t p, int64_t m, bool rc, bool detail) {
  PipeRow row;
  row.p = p;
  row.m = m;
  row.rc = rc;
  const Forward fw = gpt2_forward(c, kBatch / m, rc, true);
  const int per = c.layers / p;
  const auto n = static_cast<int64_t>(fw.f.nodes().size());
  std::vector<parallel::StageMark> marks;
  for (int32_t j = 0; j < p; ++j)
    marks.push_back({j == 0 ? 0 : fw.blocks[static_cast<size_t>(j * per)].first,
                     j == p - 1 ? n : fw.blocks[static_cast<size_t>((j + 1) * per)].first, j});
  std::vector<int32_t> ks = {0};
  if (p > 2) ks.push_back(1);
  ks.push_back(p - 1);
  const int64_t stage_devices = devices / p;
  double send = 0, send_grad = 0, embed = 0;
  for (int32_t k : ks) {
    const StagePlan sp = plan_stage(fw, marks, p, k, rc, stage_devices, std::min<int64_t>(p - k, m), m + p - 1, detail);
    row.slot = std::max(row.slot, sp.t_fwd + sp.t_bwd);
    row.once = std::max(row.once, sp.t_once);
    send = std::max(send, sp.send);
    send_grad = std::max(send_grad, sp.send_grad);
    embed = std::max(embed, sp.embed_bytes);
    row.memory = std::max(row.memory, sp.memory);
    row.secs += sp.secs;
    row.meshes += (row.meshes.empty() ? "" : ", ") + sp.mesh;
  }
  const parallel::Link inter = cluster({1}, {"x"}).topology.inter;
  row.p2p = send + send_grad;
  row.sync = 2 * inter.latency + embed / inter.bandwidth;
  row.bubble = static_cast<double>(p - 1) / static_cast<double>(m + p - 1);
  row.step = static_cast<double>(m + p - 1) * (row.slot + row.p2p) + row.once + row.sync;
  row.fits = row.memory <= 80e9;
  std::printf("  %-22s step %9.3f s  per micro-batch %.4f + p2p %.4f s, once %.4f + wte sync %.4f s, bubble %.3f  "
              "memory %7.1f GB (%s)  %6.2f s, stage meshes %s\n",
              ("pipeline p" + std::to_string(p) + " M" + std::to_string(m) + (rc ? " +rc" : "")).c_str(), row.step,
              row.slot, row.p2p, row.once, row.sync, row.bubble, row.memory / 1e9, row.fits ? "fits" : "over",
              row.secs, row.meshes.c_str());
  std::fflush(stdout);
  return row;
}

// The pipeline degrees p in {2, 4, 8} dividing the layers and the devices
// with >= 8 devices per stage, each with M = 4p micro-batches (halved while
// a micro-batch does not divide over the stage's dp axis), without
// recomputation and -- only when that does not fit -- with it (it adds
// compute, so it cannot be faster when the plan fits without it; `all`:
// with it too).
std::vector<PipeRow> pipelined_rows(const GptConfig& c, int64_t devices, bool detail, bool all) {
  std::vector<PipeRow> rows;
  for (int32_t p : {2, 4, 8}) {
    if (c.layers % p != 0 || devices % p != 0 || devices / p < 8) continue;
    const int64_t dp = devices / p / 8;
    int64_t m = 4 * p;
    while (m > p && (kBatch % m != 0 || (kBatch / m) % dp != 0)) m /= 2;
    const PipeRow plain = pipelined(c, devices, p, m, false, detail);
    if (plain.fits && !all) {
      rows.push_back(plain);
      continue;
    }
    const PipeRow rec = pipelined(c, devices, p, m, true, detail);
    const bool take_rec = rec.fits != plain.fits ? rec.fits : (rec.fits ? rec.step < plain.step : rec.memory < plain.memory);
    rows.push_back(take_rec ? rec : plain);
  }
  return rows;
}

void bench(const GptConfig& c, int64_t devices, bool detail, bool all) {
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
  // Pipelined plans: options beside the whole-step plans; the planner keeps
  // the best fitting of them all.
  const std::vector<PipeRow> pipes = pipelined_rows(c, devices, detail, all);
  const PipeRow* best_pipe = nullptr;
  for (const PipeRow& r : pipes)
    if (!best_pipe || (r.fits != best_pipe->fits ? r.fits : (r.fits ? r.step < best_pipe->step : r.memory < best_pipe->memory)))
      best_pipe = &r;
  const bool take_pipe = best_pipe && (best_pipe->fits != best.fits ? best_pipe->fits
                                                                     : (best.fits ? best_pipe->step < best.step
                                                                                  : best_pipe->memory < best.memory));
  double pipe_secs = 0;
  for (const PipeRow& r : pipes) pipe_secs += r.secs;
  if (best_pipe)
    std::printf(" PIPELINE %s %lld: best p%d M%lld%s %.3f s %.1f GB %s bubble %.3f (%zu degrees, search %.2f s) | "
                "planner: %s %.3f s %.1f GB\n",
                c.name, static_cast<long long>(devices), best_pipe->p, static_cast<long long>(best_pipe->m),
                best_pipe->rc ? " +rc" : "", best_pipe->step, best_pipe->memory / 1e9, best_pipe->fits ? "fits" : "over",
                best_pipe->bubble, pipes.size(), pipe_secs, take_pipe ? "pipelined" : "whole step",
                take_pipe ? best_pipe->step : best.step, (take_pipe ? best_pipe->memory : best.memory) / 1e9);
  else
    std::printf(" PIPELINE %s %lld: none (needs >= 8 devices per stage and p | layers)\n", c.name,
                static_cast<long long>(devices));
  std::printf(" RESULT %s %lld: searched [%s, %s, from %s] %.3f s %.1f GB %s (no limit %.3f s) | best hand %.3f s, "
              "best fitting hand %s%s | search %.2f + %.2f s\n\n",
              c.name, static_cast<long long>(devices), best.plan.c_str(), plain.fits || rec.fits ? "fits" : "over",
              best.origin.c_str(), best.step, best.memory / 1e9, best.fits ? "fits" : "over", free.step, best_hand,
              best_fit < 1e300 ? (fit_name + " ").c_str() : "none",
              best_fit < 1e300 ? (std::to_string(best_fit) + " s").c_str() : "", best.secs, free.secs);
}

}  // namespace

int main(int argc, char** argv) {
  bool detail = false, all = false;
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--detail")
      detail = true;
    else if (std::string(argv[i]) == "--all")
      all = true;
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
        bench(c, n, detail, all);
      }
    }
  } catch (const spora::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
