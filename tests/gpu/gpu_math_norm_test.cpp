// layer_norm, group_norm, batch_norm and their gradients: the host
// emulation of the GPU kernels (math/group_norm_math.h, the device's thread
// strides, trees and parameter partials) against the reference kernels of
// plugins/common/kernels/norm.cpp, for every float dtype.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "math/group_norm_math.h"

namespace {

using namespace gputest;

struct NormCase {
  std::string op;            // "layer_norm", "group_norm", "batch_norm"
  std::vector<int64_t> x;    // flattened as the reference takes it
  int64_t groups = 1;        // group_norm
  bool training = false;     // batch_norm
};

int32_t stats_dtype(int32_t dt) { return dt == SPORA_DTYPE_F16 || dt == SPORA_DTYPE_BF16 ? SPORA_DTYPE_F32 : dt; }

std::vector<AttrSpec> attrs_of(const NormCase& c) {
  std::vector<AttrSpec> a = {float_attr("eps", 1e-5)};
  if (c.op == "group_norm") a.push_back(int_attr("groups", c.groups));
  if (c.op == "batch_norm") {
    a.push_back(float_attr("momentum", 0.1));
    a.push_back(bool_attr("training", c.training));
  }
  return a;
}

// gamma/beta: one per channel, or per position of the normalised row.
std::vector<int64_t> params_of(const NormCase& c) { return {c.x[1]}; }
std::vector<int64_t> stats_of(const NormCase& c) {
  if (c.op == "layer_norm") return {c.x[0]};
  if (c.op == "group_norm") return {c.x[0], c.groups};
  return {c.x[1]};
}

std::vector<const void*> ptrs(const std::vector<const Tensor*>& ts) {
  std::vector<const void*> p;
  for (const Tensor* t : ts) p.push_back(t->bytes.data());
  return p;
}
std::vector<void*> ptrs(const std::vector<Tensor*>& ts) {
  std::vector<void*> p;
  for (Tensor* t : ts) p.push_back(t->bytes.data());
  return p;
}

// Fraction of elements that are bit-identical (NaN matching NaN).
double exact_fraction(const Tensor& got, const Tensor& want) {
  if (want.numel() == 0) return 1;
  int64_t same = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double g = value_at(got, i), w = value_at(want, i);
    if ((std::isnan(g) && std::isnan(w)) || (g == w && std::signbit(g) == std::signbit(w))) ++same;
  }
  return static_cast<double>(same) / static_cast<double>(want.numel());
}

struct Result {
  int checked = 0;
};

// Runs the case's forward and gradient on the reference and the emulation
// and compares every output. `affine`: random gamma/beta, else 1 and 0.
void check_case(const NormCase& c, int32_t dt, bool affine, bool specials, Result* res) {
  const std::string what = c.op + (c.training ? "(training)" : "") + " " + sp::dtype_name(dt) + " x[" +
                           std::to_string(c.x[0]) + "," + std::to_string(c.x[1]) +
                           (c.x.size() > 2 ? "," + std::to_string(c.x[2]) : "") + "] groups " +
                           std::to_string(c.groups) + (affine ? "" : " identity affine");
  SCOPED_TRACE(what);
  const int32_t st = stats_dtype(dt);
  const bool bn = c.op == "batch_norm";
  Tensor x = make(dt, c.x), gamma = make(dt, params_of(c)), beta = make(dt, params_of(c));
  fill(x, -3, 5, specials);
  if (affine) {
    fill(gamma, -2, 2, false);
    fill(beta, -1, 1, false);
  } else {
    sg::visit_storage(dt, [&](auto tag) {
      using T = decltype(tag);
      for (int64_t i = 0; i < gamma.numel(); ++i) {
        gamma.as<T>()[i] = sg::elem<T>::store(1.0f);
        beta.as<T>()[i] = sg::elem<T>::store(0.0f);
      }
    });
  }
  Tensor rm = make(dt, {c.x[1]}), rv = make(dt, {c.x[1]});
  fill(rm, -1, 1, false);
  fill(rv, 0.1, 3, false);
  std::vector<const Tensor*> in = {&x, &gamma, &beta};
  if (bn) in.insert(in.end(), {&rm, &rv});
  auto outs = [&](std::vector<Tensor>& o) {
    o = {make(dt, c.x), make(st, stats_of(c)), make(st, stats_of(c))};
    if (bn) o.insert(o.end(), {make(dt, {c.x[1]}), make(dt, {c.x[1]})});
    std::vector<Tensor*> p;
    for (Tensor& t : o) p.push_back(&t);
    return p;
  };
  std::vector<Tensor> want, got;
  const std::vector<Tensor*> wp = outs(want), gp = outs(got);
  sp::KernelPlan plan;
  std::string why;
  ASSERT_TRUE(ref_plan(c.op, in, wp, attrs_of(c), &plan, &why)) << why;
  ref_run(plan, in, wp);
  const sg::GnIndex ix = sg::gn_index_of(c.op, shape_of(x), plan.attrs);
  ASSERT_EQ(sg::gn_workspace(ix), 0u);
  {
    const auto ip = ptrs(in);
    const auto op = ptrs(gp);
    sg::visit_storage(dt, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (sg::is_float_c<sg::compute_of<T>>) sg::gn_forward_emulate<T>(ix, ip.data(), op.data());
    });
  }
  // Statistics are rounded from doubles summed in another order: usually
  // identical, at most an ulp of the stats dtype apart.
  const char* names[] = {"y", "mean", "invstd", "running_mean", "running_var"};
  for (size_t i = 0; i < want.size(); ++i) {
    const int32_t odt = want[i].dtype;
    // y: x - mean cancels near the mean, so an absolute floor of the
    // input's magnitude (up to 5) times the dtype's precision.
    const double abs_tol = i == 0 ? 8 * ulp_rel(odt) * (affine ? 4 : 1) : 0;
    EXPECT_EQ(compare(got[i], want[i], 2 * ulp_rel(odt), abs_tol, what + " " + names[i]), 0);
    if (!specials && odt != SPORA_DTYPE_F64) {
      EXPECT_GE(exact_fraction(got[i], want[i]), 0.97) << names[i];
    }
    ++res->checked;
  }

  // The gradient at the reference forward's statistics.
  Tensor dy = make(dt, c.x);
  fill(dy, -1, 1, specials);
  const std::vector<const Tensor*> gin = {&x, &dy, &gamma, &want[1], &want[2]};
  std::vector<Tensor> gwant = {make(dt, c.x), make(dt, params_of(c)), make(dt, params_of(c))};
  std::vector<Tensor> ggot = gwant;
  const std::vector<Tensor*> gwp = {&gwant[0], &gwant[1], &gwant[2]}, ggp = {&ggot[0], &ggot[1], &ggot[2]};
  const std::string gop = c.op + "_grad";
  sp::KernelPlan gplan;
  ASSERT_TRUE(ref_plan(gop, gin, gwp, attrs_of(c), &gplan, &why)) << why;
  ref_run(gplan, gin, gwp);
  const sg::GnIndex gix = sg::gn_index_of(gop, shape_of(x), gplan.attrs);
  ASSERT_TRUE(gix.backward);
  std::vector<double> ws(sg::gn_workspace(gix) / sizeof(double) + 1, std::nan(""));
  {
    const auto ip = ptrs(gin);
    const auto op = ptrs(ggp);
    sg::visit_storage(dt, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (sg::is_float_c<sg::compute_of<T>>) sg::gn_backward_emulate<T>(gix, ip.data(), op.data(), ws.data());
    });
  }
  const char* gnames[] = {"dx", "dgamma", "dbeta"};
  for (size_t i = 0; i < 3; ++i) {
    // dx = inv * (a - mean(a) - xhat * mean(a * xhat)) cancels; the sums
    // of dgamma/dbeta have mixed signs: absolute floors at the dtype's
    // precision times the terms' size.
    const double scale = i == 0 ? 8 : std::sqrt(static_cast<double>(x.numel() + 1)) * 4;
    EXPECT_EQ(compare(ggot[i], gwant[i], 4 * ulp_rel(dt), scale * ulp_rel(dt), what + " " + gnames[i]), 0);
    if (!specials && dt != SPORA_DTYPE_F64) {
      EXPECT_GE(exact_fraction(ggot[i], gwant[i]), 0.9) << gnames[i];
    }
    ++res->checked;
  }
}

std::vector<NormCase> layer_cases() {
  // Layer norm over the last 1..3 dims, flattened to [rows, d].
  return {{"layer_norm", {1, 1}},     {"layer_norm", {3, 1}},    {"layer_norm", {4, 7}},
          {"layer_norm", {5, 300}},   {"layer_norm", {2, 1000}}, {"layer_norm", {6, 4 * 5}},
          {"layer_norm", {2, 3 * 4 * 5}}, {"layer_norm", {600, 24}}, {"layer_norm", {257, 33}}};
}

std::vector<NormCase> group_cases() {
  return {{"group_norm", {2, 6, 10}, 3}, {"group_norm", {2, 6, 10}, 1}, {"group_norm", {2, 6, 10}, 6},
          {"group_norm", {3, 8, 1}, 4},  {"group_norm", {1, 4, 300}, 2}, {"group_norm", {4, 32, 49}, 8},
          {"group_norm", {5, 3, 1}, 1}};
}

std::vector<NormCase> batch_cases() {
  std::vector<NormCase> cs;
  for (bool training : {true, false}) {
    cs.push_back({"batch_norm", {8, 5, 1}, 1, training});    // NC
    cs.push_back({"batch_norm", {1, 3, 1}, 1, training});    // one element per channel
    cs.push_back({"batch_norm", {4, 3, 25}, 1, training});   // NCHW
    cs.push_back({"batch_norm", {2, 16, 300}, 1, training});
  }
  cs.push_back({"batch_norm", {64, 2, 28 * 28}, 1, true});   // groups of 50176
  return cs;
}

void run_family(const std::vector<NormCase>& cases, int expected_per_case) {
  Result r;
  int runs = 0;
  for (int32_t dt : kFloatDtypes)
    for (const NormCase& c : cases)
      for (bool affine : {true, false}) {
        // The large batch norm case once per dtype.
        if (!affine && c.x[0] * c.x[1] * (c.x.size() > 2 ? c.x[2] : 1) > 20000) continue;
        check_case(c, dt, affine, false, &r);
        ++runs;
      }
  EXPECT_EQ(r.checked, runs * expected_per_case);
}

TEST(GpuMathNorm, LayerNormAndGradMatchReference) { run_family(layer_cases(), 6); }
TEST(GpuMathNorm, GroupNormAndGradMatchReference) { run_family(group_cases(), 6); }
TEST(GpuMathNorm, BatchNormAndGradMatchReference) { run_family(batch_cases(), 8); }

// NaN and infinities in the inputs propagate as the reference's do.
TEST(GpuMathNorm, SpecialValuesPropagateAsReference) {
  Result r;
  for (int32_t dt : kFloatDtypes) {
    check_case({"layer_norm", {6, 40}}, dt, true, true, &r);
    check_case({"group_norm", {3, 4, 40}, 2}, dt, true, true, &r);
    check_case({"batch_norm", {4, 3, 30}, 1, true}, dt, true, true, &r);
  }
  EXPECT_EQ(r.checked, 4 * (6 + 6 + 8));
}

// Empty groups (NaN statistics, running stats kept) and empty tensors.
TEST(GpuMathNorm, EmptyShapesMatchReference) {
  Result r;
  for (int32_t dt : kFloatDtypes) {
    check_case({"layer_norm", {0, 5}}, dt, true, false, &r);
    check_case({"layer_norm", {3, 0}}, dt, true, false, &r);
    check_case({"group_norm", {0, 4, 3}, 2}, dt, true, false, &r);
    check_case({"group_norm", {2, 4, 0}, 2}, dt, true, false, &r);
    check_case({"batch_norm", {0, 3, 4}, 1, true}, dt, true, false, &r);
    check_case({"batch_norm", {2, 3, 0}, 1, false}, dt, true, false, &r);
  }
  EXPECT_EQ(r.checked, 4 * (6 + 6 + 6 + 6 + 8 + 8));
}

// The partials of the parameter sums land where the finish reads them:
// group norm writes one per (sample, channel), each slot exactly once.
TEST(GpuMathNorm, GroupNormPartialSlotsCoverEachOnce) {
  for (const NormCase& c : group_cases()) {
    Tensor x = make(SPORA_DTYPE_F32, c.x), p = make(SPORA_DTYPE_F32, params_of(c));
    Tensor s = make(SPORA_DTYPE_F32, stats_of(c));
    Tensor dx = make(SPORA_DTYPE_F32, c.x), dg = make(SPORA_DTYPE_F32, params_of(c)), db = dg;
    sp::KernelPlan plan;
    std::string why;
    ASSERT_TRUE(ref_plan("group_norm_grad", {&x, &x, &p, &s, &s}, {&dx, &dg, &db}, attrs_of(c), &plan, &why)) << why;
    const sg::GnIndex ix = sg::gn_index_of("group_norm_grad", shape_of(x), plan.attrs);
    ASSERT_EQ(ix.partials, c.x[0]);
    ASSERT_EQ(sg::gn_workspace(ix), static_cast<size_t>(c.x[0] * c.x[1]) * 2 * sizeof(double));
    std::vector<int> hits(static_cast<size_t>(ix.partials * ix.params), 0);
    for (int64_t r = 0; r < ix.groups * ix.blocks; ++r) {
      const int64_t slot = sg::gn_run_slot(ix, r);
      ASSERT_GE(slot, 0);
      ASSERT_LT(slot, ix.partials * ix.params);
      ++hits[static_cast<size_t>(slot)];
    }
    for (size_t i = 0; i < hits.size(); ++i) EXPECT_EQ(hits[i], 1) << "slot " << i;
  }
}

// The cursor's additions visit the reference Layout's elements: offset
// q * qstride + (j / len) * stride + j % len and its parameter, for every
// thread's positions (len below, at and above the thread count, len 1).
TEST(GpuMathNorm, CursorVisitsTheReferenceLayout) {
  std::vector<NormCase> cases = layer_cases();
  for (const auto& more : {group_cases(), batch_cases()}) cases.insert(cases.end(), more.begin(), more.end());
  cases.push_back({"batch_norm", {300, 2, 1}, 1, true});
  cases.push_back({"group_norm", {2, 12, 256}, 3});
  cases.push_back({"group_norm", {2, 12, 257}, 4});
  int64_t visited = 0;
  for (const NormCase& c : cases) {
    Tensor x = make(SPORA_DTYPE_F32, c.x);
    sp::KernelPlan plan;
    std::string why;
    std::vector<Tensor> o = {make(SPORA_DTYPE_F32, c.x), make(SPORA_DTYPE_F32, stats_of(c)), make(SPORA_DTYPE_F32, stats_of(c))};
    Tensor p = make(SPORA_DTYPE_F32, params_of(c));
    std::vector<const Tensor*> in = {&x, &p, &p};
    std::vector<Tensor*> out = {&o[0], &o[1], &o[2]};
    if (c.op == "batch_norm") {
      in.insert(in.end(), {&p, &p});
      out.push_back(&p), out.push_back(&p);
    }
    ASSERT_TRUE(ref_plan(c.op, in, out, attrs_of(c), &plan, &why)) << why;
    const sg::GnIndex ix = sg::gn_index_of(c.op, shape_of(x), plan.attrs);
    std::vector<int> hits(static_cast<size_t>(x.numel()), 0);
    for (int64_t q = 0; q < ix.groups; ++q)
      for (int t = 0; t < sg::kGnThreads; ++t) {
        sg::GnCursor cur = sg::gn_cursor(ix, q, t);
        for (int64_t j = t; j < sg::gn_size(ix); j += sg::kGnThreads, sg::gn_next(ix, cur)) {
          const int64_t b = j / ix.len, e = j % ix.len;
          ASSERT_EQ(cur.k, q * ix.qstride + b * ix.stride + e) << c.op << " q " << q << " j " << j;
          ASSERT_EQ(cur.p, ix.per_element ? e : q % ix.pmod * ix.pmul + b * ix.pstep) << c.op << " q " << q << " j " << j;
          ++hits[static_cast<size_t>(cur.k)];
          ++visited;
        }
      }
    for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i], 1) << c.op << " element " << i;
  }
  EXPECT_GT(visited, 100000);
}

}  // namespace
