// Mixed precision: the matrix products of an f32 graph run in bf16,
// everything else stays f32. It changes the graph's numerics, so it is in no
// opt level: it runs when asked for by name (spora_graph_run_pass; spora.amp
// asks for it at amp_level O1/O2 in graph mode).
//
// Converted: matmul, linear, the convolutions (conv2d, conv2d_bias,
// conv2d_transpose and the gradient ops conv2d_grad_input and
// conv2d_grad_weight) and their epilogue-fused forms (linear_act,
// linear_add_act, conv2d_act, conv2d_add_act, and conv2d_act_pool, whose
// max pooling is exact in bf16), when all their inputs and outputs are
// f32 and they are compute-bound (kMinFlopsPerByte, from the registry's
// cost estimates). Their inputs are cast to bf16 and the outputs are cast back to f32, so
// every other op -- reductions, softmax and losses, norms, the optimizer's
// update -- sees f32 as before, and weights stay f32 (the "master" copy).
// These ops accumulate in f32 inside (oneDNN), so the error is the bf16
// rounding of the operands and of the result: ~3 significant digits.
//
// conv2d_act_pool_grad (the fused backward of a convolution, relu and max
// pooling) is first turned back into its parts, which are then treated as
// above.
//
// Casts are few:
//   - one cast per value: a weight read by the forward linear and by the
//     backward matmul is cast once;
//   - no chains: an input that is itself a cast of a bf16 value to f32 (the
//     output of another converted op, or the user's own cast) is replaced by
//     that bf16 value, since bf16 -> f32 -> bf16 is the identity. Chained
//     layers (linear_act -> linear_act) pass bf16 straight through, and the
//     f32 copy is only made if something else reads it;
//   - constants are converted here, not cast at run time.
// Casts left without readers are removed at the end. A large f32 copy read
// again much later (by the backward pass) is cast again there instead of
// kept (cast_remat.h; exact).
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "ir/rewrite.h"
#include "passes/cast_remat.h"
#include "passes/pass.h"

namespace spora::passes {
namespace {

using ir::Graph;
using ir::Node;
using ir::NodeKind;
using ir::Value;

constexpr DType F32 = SPORA_DTYPE_F32, BF16 = SPORA_DTYPE_BF16;

// Products doing fewer flops per byte of their f32 operands than this (the
// registry's cost estimate) stay f32. They are memory-bound: bf16 arithmetic
// buys nothing, and the casts add traffic. Measured on the bench_train_step
// models (Zen4, oneDNN 2.6.3): LeNet's first conv (1 -> 6 channels, ~10
// flops/byte) is slower in bf16 in every direction (its bf16 weight
// gradient takes oneDNN's gemm path, 1.8 ms vs 0.38 ms in f32), and
// converting it made the whole step slower than f32; the classifier
// layers with 10 outputs (~5 flops/byte) gain nothing either. The MLP's
// 784/512-wide products (42-51 flops/byte) and LeNet's second conv (~42)
// run 1.5-3x faster in bf16.
constexpr double kMinFlopsPerByte = 16;

bool converted_op(const std::string& op) {
  static const char* const kOps[] = {"matmul",          "linear",         "conv2d",         "conv2d_bias",
                                     "conv2d_transpose", "conv2d_grad_input", "conv2d_grad_weight",
                                     "linear_act",      "linear_add_act", "conv2d_act",     "conv2d_add_act",
                                     "conv2d_act_pool"};
  for (const char* o : kOps)
    if (op == o) return true;
  return false;
}

bool candidate(const Graph& g, const Node& n) {
  if (n.kind != NodeKind::kApply || !converted_op(n.op->name)) return false;
  for (const TensorMeta& m : n.outputs)
    if (m.dtype != F32) return false;
  for (const Value& v : n.inputs)
    if (g.meta(v).dtype != F32) return false;
  // Memory-bound products stay f32 (see kMinFlopsPerByte).
  TensorMeta metas[kMaxOpInputs];
  for (size_t i = 0; i < n.inputs.size(); ++i) metas[i] = g.meta(n.inputs[i]);
  OpCall call;
  infer_call(*n.op, metas, static_cast<int>(n.inputs.size()), n.attrs, call);
  const Cost c = n.op->estimate(call);
  return c.flops >= kMinFlopsPerByte * c.bytes;
}

// f32 -> bf16, round to nearest even; NaN stays a (quiet) NaN.
uint16_t to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

Attrs cast_to(DType t) {
  Attrs a;
  a.set("dtype", AttrValue::of_string(dtype_name(t)));
  return a;
}

class Converter {
 public:
  explicit Converter(Graph& out) : out_(out) {}

  // The bf16 version of f32 value `v` of the output graph.
  Value bf16(Value v) {
    auto it = cache_.find(key(v));
    if (it != cache_.end()) return it->second;
    Value r;
    const Node& n = out_.node(v.node);
    if (n.kind == NodeKind::kApply && n.op->name == "cast" && out_.meta(n.inputs[0]).dtype == BF16) {
      r = n.inputs[0];  // cast(cast(x, f32), bf16) == x
    } else if (Value through = exact_through_layout(v); through.valid()) {
      r = through;
    } else if (n.kind == NodeKind::kConstant && n.data) {
      const int64_t count = n.outputs[0].shape.numel();
      std::vector<uint8_t> bytes(static_cast<size_t>(count) * 2);
      for (int64_t i = 0; i < count; ++i) {
        float f;
        std::memcpy(&f, n.data->data() + 4 * i, 4);
        const uint16_t h = to_bf16(f);
        std::memcpy(bytes.data() + 2 * i, &h, 2);
      }
      r = out_.add_constant(BF16, n.outputs[0].shape, std::move(bytes), n.loc);
    } else {
      r = out_.add_op("cast", {v}, cast_to(BF16), n.loc)[0];
      out_.mutable_node(r.node).device = n.device;
    }
    cache_.emplace(key(v), r);
    return r;
  }

 private:
  static int64_t key(Value v) { return (static_cast<int64_t>(v.node) << 16) | v.index; }

  // For v = reshape/transpose(...(cast(x_bf16, f32))): the same layout ops
  // applied to x_bf16 (made here, once), which equals cast(v, bf16) exactly;
  // invalid otherwise. A backward matmul reading a forward product's output
  // through a reshape then reads the bf16 bytes, and the f32 copy is not
  // kept for it.
  Value exact_through_layout(Value v) {
    const Node& n = out_.node(v.node);
    if (n.kind != NodeKind::kApply || n.outputs.size() != 1 || n.inputs.size() != 1) return {};
    const std::string& op = n.op->name;
    if (op == "cast") return out_.meta(n.inputs[0]).dtype == BF16 ? n.inputs[0] : Value{};
    if (op != "reshape" && op != "transpose") return {};
    auto it = cache_.find(key(v));
    if (it != cache_.end()) return it->second;
    const Value src = exact_through_layout(n.inputs[0]);
    if (!src.valid()) return {};
    const ir::SourceLoc loc = n.loc;
    const Attrs attrs = n.attrs;
    const std::string device = n.device;
    const Value r = out_.add_op(op, {src}, attrs, loc)[0];  // `n` may move: copied above
    out_.mutable_node(r.node).device = device;
    cache_.emplace(key(v), r);
    return r;
  }
  Graph& out_;
  std::map<int64_t, Value> cache_;
};

// Drops op and constant nodes nothing reads (the casts this pass made
// unnecessary); inputs and weights stay.
void drop_dead(Graph& g) {
  const auto& nodes = g.nodes();
  std::vector<bool> live(nodes.size(), false);
  for (const Value& v : g.outputs()) live[static_cast<size_t>(v.node)] = true;
  for (size_t id = nodes.size(); id-- > 0;) {
    const Node& n = nodes[id];
    if (n.kind == NodeKind::kInput || n.kind == NodeKind::kWeight) live[id] = true;
    if (!live[id]) continue;
    for (const Value& v : n.inputs) live[static_cast<size_t>(v.node)] = true;
  }
  bool any_dead = false;
  for (bool l : live) any_dead = any_dead || !l;
  if (!any_dead) return;
  ir::Rewriter rw(g);
  for (size_t id = 0; id < nodes.size(); ++id)
    if (live[id]) rw.copy(static_cast<int32_t>(id));
  g = rw.finish();
}

// conv2d_act_pool_grad (conv_pool_grad_fusion's op, f32 only on the cpu)
// back into its parts, so that its convolution gradients are converted
// like any others and its pooling gradient, relu mask and bias sum stay
// f32, as before the fusion.
bool unfuse_conv_pool_grad(Graph& g) {
  const OpDef* op = OpRegistry::get().find("conv2d_act_pool_grad");
  const DecomposeFn fn = op ? op->decompose : nullptr;
  bool any = false;
  for (const Node& n : g.nodes()) any = any || (n.kind == NodeKind::kApply && n.op->name == "conv2d_act_pool_grad");
  if (!any || !fn) return false;
  ir::Rewriter rw(g);
  for (size_t id = 0; id < g.nodes().size(); ++id) {
    const Node& n = g.nodes()[id];
    if (n.kind != NodeKind::kApply || n.op->name != "conv2d_act_pool_grad") {
      rw.copy(static_cast<int32_t>(id));
      continue;
    }
    const size_t first = rw.out().nodes().size();
    ir::Builder b(rw.out(), n.loc);
    std::vector<Value> x;
    for (const Value& v : n.inputs) x.push_back(rw.map(v));
    const std::vector<Value> outs = fn(b, x, n.attrs);
    for (size_t k = first; k < rw.out().nodes().size(); ++k)
      rw.out().mutable_node(static_cast<int32_t>(k)).device = n.device;
    for (size_t o = 0; o < outs.size() && o < n.outputs.size(); ++o)
      rw.set({static_cast<int32_t>(id), static_cast<int32_t>(o)}, outs[o]);
  }
  g = rw.finish();
  return true;
}

// blocked_handoff's hand-overs back to NCHW: the converted ops run in bf16,
// where the kernels take no blocked operands, and the unfused parts of
// conv2d_act_pool_grad read the kept activation as NCHW. All of them, so
// producer and readers agree.
bool drop_blocked_handoffs(Graph& g) {
  bool any = false;
  for (int32_t id = 0; id < static_cast<int32_t>(g.nodes().size()); ++id) {
    const Attrs& a = g.node(id).attrs;
    if (!a.find("blocked_inputs") && !a.find("blocked_outputs")) continue;
    Attrs kept;
    for (const auto& [name, v] : a.items())
      if (name != "blocked_inputs" && name != "blocked_outputs") kept.set(name, v);
    g.mutable_node(id).attrs = kept;
    any = true;
  }
  return any;
}

bool mixed_precision(Graph& g, const PassContext&) {
  const bool unblocked = drop_blocked_handoffs(g);
  const bool unfused = unfuse_conv_pool_grad(g) || unblocked;
  bool any = false;
  for (const Node& n : g.nodes()) any = any || candidate(g, n);
  if (!any) return unfused;
  ir::Rewriter rw(g);
  Converter conv(rw.out());
  for (size_t id = 0; id < g.nodes().size(); ++id) {
    const Node& n = g.nodes()[id];
    if (!candidate(g, n)) {
      rw.copy(static_cast<int32_t>(id));
      continue;
    }
    std::vector<Value> in;
    for (const Value& v : n.inputs) in.push_back(conv.bf16(rw.map(v)));
    const std::vector<Value> ys = rw.out().add_op(n.op->name, in, n.attrs, n.loc);
    rw.out().mutable_node(ys[0].node).device = n.device;
    rw.out().mutable_node(ys[0].node).name = n.name;
    for (size_t o = 0; o < ys.size(); ++o) {
      const Value back = rw.out().add_op("cast", {ys[o]}, cast_to(F32), n.loc)[0];
      rw.out().mutable_node(back.node).device = n.device;
      rw.set({static_cast<int32_t>(id), static_cast<int32_t>(o)}, back);
    }
  }
  g = rw.finish();
  drop_dead(g);
  // The f32 copies the backward pass reads late are made again there
  // (cast_remat.h), so the forward's f32 copies die early.
  if (rematerialize_upcasts(g)) drop_dead(g);
  return true;
}

}  // namespace

SPORA_PASS("mixed_precision", kOnRequest, mixed_precision, {"shape_inference"});

}  // namespace spora::passes
