// The own convolution kernels' arithmetic (plugins/cuda/math/conv_math.h)
// against the reference kernels (plugins/common/kernels/conv.cpp and
// epilogue.cpp): forward with bias and fused epilogues, input gradient,
// transposed convolution with output padding, weight gradient; groups,
// depthwise, strides, dilations, asymmetric padding, odd sizes; every float
// dtype.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "math/conv_math.h"

namespace {

using namespace gputest;

struct ConvCase {
  int64_t n, c, h, w, o, groups, kh, kw;
  int64_t sh, sw, dh, dw;
  int64_t pt, pb, pl, pr;
  int64_t oph = 0, opw = 0;  // conv2d_transpose's output padding (dx larger than the forward's x)
};

const std::vector<ConvCase> kCases = {
    {2, 3, 7, 9, 4, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},           // same padding
    {1, 4, 8, 8, 6, 2, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1},     // groups, stride 2
    {2, 6, 9, 7, 6, 6, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2},           // depthwise, dilation 2
    {1, 3, 11, 10, 5, 1, 5, 4, 2, 3, 1, 2, 2, 0, 1, 3, 1, 2},   // asymmetric everything
    {3, 2, 5, 5, 2, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},           // 1x1
    {1, 1, 4, 6, 3, 1, 4, 6, 1, 1, 1, 1, 0, 0, 0, 0},           // kernel covers the input
    {2, 4, 6, 6, 8, 4, 2, 3, 3, 2, 2, 1, 3, 2, 0, 1, 2, 1},     // padding wider than the taps reach
    {1, 2, 13, 12, 2, 1, 5, 5, 2, 2, 3, 3, 4, 1, 3, 0, 1, 1},  // taps every 2 kernel rows (stride 2, dilation 3)
    {1, 4, 5, 6, 16, 2, 3, 3, 2, 1, 1, 2, 1, 0, 2, 1},        // 8 outputs per group: two 4-channel blocks each
};

int64_t out_size(int64_t in, int64_t p0, int64_t p1, int64_t d, int64_t k, int64_t s) {
  return (in + p0 + p1 - d * (k - 1) - 1) / s + 1;
}

std::vector<AttrSpec> conv_attrs(const ConvCase& k) {
  return {ints_attr("stride", {k.sh, k.sw}), ints_attr("dilation", {k.dh, k.dw}),
          ints_attr("padding", {k.pt, k.pb, k.pl, k.pr}), int_attr("groups", k.groups)};
}

std::string name_of(const std::string& op, const ConvCase& k, int32_t dt) {
  return op + " case c" + std::to_string(k.c) + "h" + std::to_string(k.h) + "w" + std::to_string(k.w) + "o" +
         std::to_string(k.o) + "g" + std::to_string(k.groups) + " " + sp::dtype_name(dt);
}

sg::ConvIndex index_of(const sp::KernelPlan& plan) {
  sg::ConvIndex ix;
  std::string why;
  EXPECT_TRUE(sg::conv_index_of(plan, &ix, &why)) << why;
  return ix;
}

TEST(GpuMathConv, ForwardAndEpiloguesMatchReference) {
  struct Op {
    const char* op;
    const char* act;
  };
  const std::vector<Op> ops = {{"conv2d", nullptr},         {"conv2d_bias", nullptr},  {"conv2d_act", "relu"},
                               {"conv2d_act", "gelu_tanh"}, {"conv2d_act", "gelu"},    {"conv2d_add_act", "tanh"},
                               {"conv2d_add_act", "sigmoid"}, {"conv2d_add_act", "none"}};
  int checked = 0, blocked = 0;
  for (const ConvCase& k : kCases) {
    const int64_t oh = out_size(k.h, k.pt, k.pb, k.dh, k.kh, k.sh), ow = out_size(k.w, k.pl, k.pr, k.dw, k.kw, k.sw);
    for (const Op& op : ops) {
      for (int32_t dt : kFloatDtypes) {
        const std::string what = name_of(op.op, k, dt) + (op.act ? std::string(" ") + op.act : "");
        Tensor x = make(dt, {k.n, k.c, k.h, k.w}), w = make(dt, {k.o, k.c / k.groups, k.kh, k.kw}), b = make(dt, {k.o}),
               r = make(dt, {k.n, k.o, oh, ow});
        fill(x);  // NaN, inf and large values included: the order is the reference's, so they match too
        fill(w, -1, 1);
        fill(b, -1, 1, false);
        fill(r, -1, 1, false);
        std::vector<const Tensor*> in = {&x, &w};
        const std::string opn = op.op;
        if (opn != "conv2d") in.push_back(&b);
        if (opn == "conv2d_add_act") in.push_back(&r);
        std::vector<AttrSpec> attrs = conv_attrs(k);
        if (op.act) attrs.push_back(string_attr("activation", op.act));
        Tensor want = make(dt, {k.n, k.o, oh, ow}), got = want;
        sp::KernelPlan plan;
        std::string why;
        ASSERT_TRUE(ref_plan(opn, in, {&want}, attrs, &plan, &why)) << what << ": " << why;
        ref_run(plan, in, {&want});
        const sg::ConvIndex ix = index_of(plan);
        ASSERT_EQ(sg::conv_work(ix) * ix.ob, want.numel()) << what;
        ASSERT_EQ(k.o / k.groups % ix.ob, 0) << what;
        blocked += ix.ob > 1;
        // got starts as NaN everywhere: every element must be written.
        std::fill(got.bytes.begin(), got.bytes.end(), uint8_t{0xff});
        sg::visit_storage(dt, [&](auto tag) {
          using T = decltype(tag);
          if constexpr (sg::is_float_c<sg::compute_of<T>>) {
            for (int64_t e = 0; e < sg::conv_work(ix); ++e)
              sg::conv_fwd_thread<T>(ix, x.as<T>(), w.as<T>(), ix.has_bias ? b.as<T>() : nullptr,
                                     ix.has_ep && ix.ep.has_add ? r.as<T>() : nullptr, got.as<T>(), e);
          }
        });
        // Bias, channels, rows, columns in the reference's order; each
        // epilogue step rounded like the unfused ops: bit-exact.
        EXPECT_EQ(compare(got, want, 0, 0, what), 0);
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, static_cast<int>(kCases.size() * ops.size() * 4));
  EXPECT_GT(blocked, 0);  // some cases run several output channels per thread
}

TEST(GpuMathConv, InputGradientAndTransposeMatchReference) {
  int checked = 0;
  for (const ConvCase& k : kCases) {
    const int64_t oh = out_size(k.h, k.pt, k.pb, k.dh, k.kh, k.sh), ow = out_size(k.w, k.pl, k.pr, k.dw, k.kw, k.sw);
    for (const char* op : {"conv2d_grad_input", "conv2d_transpose"}) {
      const bool tr = std::string(op) == "conv2d_transpose";
      // The transpose's output padding extends dx beyond the forward's x:
      // those rows and columns are reached only by some taps (or none).
      const int64_t h = k.h + (tr ? k.oph : 0), wd = k.w + (tr ? k.opw : 0);
      for (int32_t dt : kFloatDtypes) {
        const std::string what = name_of(op, k, dt);
        Tensor dy = make(dt, {k.n, k.o, oh, ow}), w = make(dt, {k.o, k.c / k.groups, k.kh, k.kw});
        fill(dy);
        fill(w, -1, 1);
        std::vector<AttrSpec> attrs = conv_attrs(k);
        if (tr) attrs.push_back(ints_attr("output_padding", {k.oph, k.opw}));
        Tensor want = make(dt, {k.n, k.c, h, wd}), got = want;
        sp::KernelPlan plan;
        std::string why;
        ASSERT_TRUE(ref_plan(op, {&dy, &w}, {&want}, attrs, &plan, &why)) << what << ": " << why;
        ref_run(plan, {&dy, &w}, {&want});
        const sg::ConvIndex ix = index_of(plan);
        ASSERT_EQ(ix.kind, sg::ConvKind::kData);
        ASSERT_EQ(sg::conv_work(ix), want.numel()) << what;
        sg::visit_storage(dt, [&](auto tag) {
          using T = decltype(tag);
          if constexpr (sg::is_float_c<sg::compute_of<T>>) {
            for (int64_t e = 0; e < got.numel(); ++e) got.as<T>()[e] = sg::conv_data_elem<T>(ix, dy.as<T>(), w.as<T>(), e);
          }
        });
        // Gathered in the reference's (output channel, row, column) order: bit-exact.
        EXPECT_EQ(compare(got, want, 0, 0, what), 0);
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, static_cast<int>(kCases.size() * 2 * 4));
}

TEST(GpuMathConv, WeightGradientMatchesReference) {
  std::vector<ConvCase> cases = kCases;
  // Enough output positions per weight element (2 * 40 * 40 = 3200) for
  // every thread of the block to hold several terms.
  cases.push_back({2, 2, 40, 40, 3, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1});
  int checked = 0;
  for (const ConvCase& k : cases) {
    const int64_t oh = out_size(k.h, k.pt, k.pb, k.dh, k.kh, k.sh), ow = out_size(k.w, k.pl, k.pr, k.dw, k.kw, k.sw);
    for (int32_t dt : kFloatDtypes) {
      for (bool specials : {false, true}) {
        const std::string what = name_of("conv2d_grad_weight", k, dt) + (specials ? " specials" : "");
        Tensor x = make(dt, {k.n, k.c, k.h, k.w}), dy = make(dt, {k.n, k.o, oh, ow});
        fill(x, -3, 3, specials);
        fill(dy, -1, 1, false);
        Tensor want = make(dt, {k.o, k.c / k.groups, k.kh, k.kw}), got = want;
        sp::KernelPlan plan;
        std::string why;
        ASSERT_TRUE(ref_plan("conv2d_grad_weight", {&x, &dy}, {&want}, conv_attrs(k), &plan, &why)) << what << ": " << why;
        ref_run(plan, {&x, &dy}, {&want});
        const sg::ConvIndex ix = index_of(plan);
        ASSERT_EQ(ix.kind, sg::ConvKind::kWeight);
        ASSERT_EQ(sg::conv_work(ix), want.numel()) << what;
        sg::visit_storage(dt, [&](auto tag) {
          using T = decltype(tag);
          if constexpr (sg::is_float_c<sg::compute_of<T>>) {
            for (int64_t e = 0; e < got.numel(); ++e) got.as<T>()[e] = sg::conv_weight_emulate<T>(ix, x.as<T>(), dy.as<T>(), e);
          }
        });
        // Both sum in double (the tree's order differs from the
        // reference's): the rounding to the output dtype decides, within one
        // unit; f64 within double rounding of the sum's terms (up to 1e5 * 1).
        const double rel = dt == SPORA_DTYPE_F64 ? 1e-12 : ulp_rel(dt);
        EXPECT_EQ(compare(got, want, rel, dt == SPORA_DTYPE_F64 ? 1e-9 : 1e-12, what), 0);
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, static_cast<int>(cases.size() * 4 * 2));
}

TEST(GpuMathConv, IndexRefusesUnknownOpsAndActivations) {
  sp::KernelPlan p;
  p.op = "conv3d";
  sg::ConvIndex ix;
  std::string why;
  EXPECT_FALSE(sg::conv_index_of(p, &ix, &why));
  EXPECT_NE(why.find("not a convolution"), std::string::npos);
}

}  // namespace
