// Reverse mode through control flow (called by value_and_grad).
//
// A branch or loop body B is differentiated through its vector-Jacobian
// product graph: vjp(B) takes (B's inputs..., dy...) and returns the adjoints
// of B's inputs. It is value_and_grad of a graph computing
// sum_j sum(B_out_j * dy_j), so it is built from the ordinary rules, nests
// (control flow inside B is handled by this file again) and can itself be
// differentiated (higher order).
//
// if:    the gradient is an `if` on the same condition whose branches are
//        vjp(then) and vjp(else) over (the if's inputs, the adjoints of its
//        outputs).
// while: the backward pass needs the loop-carried values of every
//        iteration. Shapes are static, so they are recomputed rather than
//        stacked: a counting copy of the loop finds the iteration count N,
//        then a backward loop runs k = N-1 .. 0, rebuilding s_k from the
//        initial values with an inner loop of k body steps and applying
//        vjp(body) at s_k to the running adjoints. That is O(N^2) body
//        evaluations and O(1) extra memory: exact, but meant for loops of
//        modest trip count.
#include <set>

#include "autodiff/bprop.h"
#include "autodiff/grad.h"
#include "ops/rule_helpers.h"
#include "support/error.h"

namespace spora::autodiff::detail {

using rules::add;
using rules::add_opt;
using rules::cast;
using rules::dt;
using rules::mul;
using rules::sub;
using rules::zeros;

namespace {

std::string fresh_name(const ir::Graph& g, const std::string& base) {
  std::set<std::string> used;
  for (const ir::Node& n : g.nodes())
    if (n.kind == ir::NodeKind::kInput || n.kind == ir::NodeKind::kWeight) used.insert(n.name);
  std::string name = base;
  while (used.count(name)) name += "_";
  return name;
}

// vjp(B): inputs (B's inputs..., dy_j for j in `outs`), outputs the adjoints
// of B's inputs `wrt` (positions among B's inputs).
ir::Graph vjp_graph(const ir::Graph& b, const std::vector<size_t>& wrt, const std::vector<size_t>& outs,
                    const ir::SourceLoc& loc) {
  ir::Graph f(b.name() + "_vjp");
  for (const ir::Node& n : b.nodes()) f.append(n);
  GradBuilder gb(f, loc);
  std::vector<Value> dys;
  for (size_t j : outs) {
    const TensorMeta& m = b.meta(b.outputs()[j]);
    dys.push_back(f.add_input(fresh_name(f, "dy" + std::to_string(j)), m.dtype, m.shape));
  }
  Value loss;
  for (size_t r = 0; r < outs.size(); ++r) {
    Value term = gb.op("sum", {mul(gb, b.outputs()[outs[r]], dys[r])});
    if (loss.valid()) term = cast(gb, term, dt(gb, loss));
    loss = add_opt(gb, loss, term);
  }
  f.set_outputs({loss});
  const std::vector<int32_t> ins = b.inputs();
  std::vector<int32_t> wrt_nodes;
  for (size_t i : wrt) wrt_nodes.push_back(ins[i]);
  ir::Graph g = value_and_grad(f, wrt_nodes, 0);
  std::vector<Value> grads(g.outputs().begin() + 1, g.outputs().end());
  g.set_outputs(grads);
  return g;
}

// A graph with inputs of `types` (named after `names`).
std::vector<Value> add_inputs(ir::Graph& g, const std::vector<TensorMeta>& types, const std::string& prefix) {
  std::vector<Value> v;
  for (size_t i = 0; i < types.size(); ++i)
    v.push_back(g.add_input(prefix + std::to_string(i), types[i].dtype, types[i].shape));
  return v;
}

Value i64_scalar(GradBuilder& b, double v) { return b.scalar(v, SPORA_DTYPE_I64); }

}  // namespace

std::vector<Value> bprop_if(ir::Graph& out, const ir::Node& node, const std::vector<Value>& dy,
                            const std::vector<bool>& need) {
  std::vector<Value> dx(node.inputs.size());
  std::vector<size_t> wrt, outs;
  for (size_t i = 1; i < node.inputs.size(); ++i)
    if (need[i]) wrt.push_back(i - 1);
  for (size_t j = 0; j < dy.size(); ++j)
    if (dy[j].valid() && dtype_is_float(node.outputs[j].dtype)) outs.push_back(j);
  if (wrt.empty() || outs.empty()) return dx;
  const ir::Graph then_vjp = vjp_graph(*node.subgraphs[0], wrt, outs, node.loc);
  const ir::Graph else_vjp = vjp_graph(*node.subgraphs[1], wrt, outs, node.loc);
  std::vector<Value> args(node.inputs.begin() + 1, node.inputs.end());
  for (size_t j : outs) args.push_back(dy[j]);
  const std::vector<Value> g = out.add_if(node.inputs[0], then_vjp, else_vjp, args, node.loc);
  for (size_t r = 0; r < wrt.size(); ++r) dx[wrt[r] + 1] = g[r];
  return dx;
}

std::vector<Value> bprop_while(ir::Graph& out, const ir::Node& node, const std::vector<Value>& dy,
                               const std::vector<bool>& need) {
  const size_t n = node.inputs.size();
  std::vector<Value> dx(n);
  bool any = false;
  for (size_t i = 0; i < n; ++i) any = any || need[i];
  if (!any) return dx;
  const ir::Graph& cond = *node.subgraphs[0];
  const ir::Graph& body = *node.subgraphs[1];
  const std::vector<TensorMeta> types = node.outputs;
  // Adjoints run through every float loop-carried value.
  std::vector<size_t> fl;
  std::vector<TensorMeta> fl_types;
  for (size_t i = 0; i < n; ++i)
    if (dtype_is_float(types[i].dtype)) {
      fl.push_back(i);
      fl_types.push_back(types[i]);
    }
  if (fl.empty()) return dx;
  const TensorMeta counter{SPORA_DTYPE_I64, Shape()};
  GradBuilder ob(out, node.loc);

  // 1. The trip count N: the loop again, counting.
  Value trips;
  {
    ir::Graph c("while_count_cond");
    std::vector<Value> s = add_inputs(c, types, "s");
    c.add_input("count", counter.dtype, counter.shape);
    c.set_outputs(ir::inline_graph(c, cond, s));
    ir::Graph bd("while_count_body");
    s = add_inputs(bd, types, "s");
    const Value cnt = bd.add_input("count", counter.dtype, counter.shape);
    std::vector<Value> next = ir::inline_graph(bd, body, s);
    GradBuilder bb(bd, node.loc);
    next.push_back(add(bb, cnt, i64_scalar(bb, 1)));
    bd.set_outputs(next);
    std::vector<Value> init = node.inputs;
    init.push_back(i64_scalar(ob, 0));
    trips = out.add_while(c, bd, init, node.loc).back();
  }

  // 2. s_k from s_0: (j, k, s...) -> while j < k: (j + 1, k, body(s)).
  ir::Graph rc("while_replay_cond"), rb("while_replay_body");
  {
    const Value j = rc.add_input("j", counter.dtype, counter.shape);
    const Value k = rc.add_input("k", counter.dtype, counter.shape);
    add_inputs(rc, types, "s");
    GradBuilder cb(rc, node.loc);
    rc.set_outputs({cb.op("less", {j, k})});
    const Value bj = rb.add_input("j", counter.dtype, counter.shape);
    const Value bk = rb.add_input("k", counter.dtype, counter.shape);
    const std::vector<Value> s = add_inputs(rb, types, "s");
    GradBuilder bb(rb, node.loc);
    std::vector<Value> next = {add(bb, bj, i64_scalar(bb, 1)), bk};
    for (const Value& v : ir::inline_graph(rb, body, s)) next.push_back(v);
    rb.set_outputs(next);
  }

  // 3. vjp(body) over the float loop-carried values.
  const ir::Graph vjp = vjp_graph(body, fl, fl, node.loc);

  // 4. Backward: (k, s0..., ds...) -> while k > 0: k -= 1; ds = vjp(s_k, ds).
  ir::Graph bc("while_grad_cond"), bbody("while_grad_body");
  {
    const Value k = bc.add_input("k", counter.dtype, counter.shape);
    add_inputs(bc, types, "s0_");
    add_inputs(bc, fl_types, "ds");
    GradBuilder cb(bc, node.loc);
    bc.set_outputs({cb.op("greater", {k, i64_scalar(cb, 0)})});

    const Value bk = bbody.add_input("k", counter.dtype, counter.shape);
    const std::vector<Value> s0 = add_inputs(bbody, types, "s0_");
    const std::vector<Value> ds = add_inputs(bbody, fl_types, "ds");
    GradBuilder bb(bbody, node.loc);
    const Value k1 = sub(bb, bk, i64_scalar(bb, 1));
    std::vector<Value> replay_init = {i64_scalar(bb, 0), k1};
    replay_init.insert(replay_init.end(), s0.begin(), s0.end());
    const std::vector<Value> replayed = bbody.add_while(rc, rb, replay_init, node.loc);
    std::vector<Value> args(replayed.begin() + 2, replayed.end());
    args.insert(args.end(), ds.begin(), ds.end());
    const std::vector<Value> g = ir::inline_graph(bbody, vjp, args);
    std::vector<Value> next = {k1};
    next.insert(next.end(), s0.begin(), s0.end());
    next.insert(next.end(), g.begin(), g.end());
    bbody.set_outputs(next);
  }
  std::vector<Value> init = {trips};
  init.insert(init.end(), node.inputs.begin(), node.inputs.end());
  for (size_t i : fl) init.push_back(dy[i].valid() ? dy[i] : zeros(ob, types[i].dtype, types[i].shape));
  const std::vector<Value> res = out.add_while(bc, bbody, init, node.loc);
  for (size_t r = 0; r < fl.size(); ++r)
    if (need[fl[r]]) dx[fl[r]] = res[1 + n + r];
  return dx;
}

}  // namespace spora::autodiff::detail
