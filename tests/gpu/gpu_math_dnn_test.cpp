// cuDNN argument plumbing (plugins/cuda/math/dnn_args.h) without a GPU:
// which call and which operand is x / w / y, the NCHW descriptors, the
// geometry, the types, the algorithm policy and the workspace. The
// semantics check runs a textbook emulation of what cuDNN computes from
// exactly these arguments (cross-correlation with symmetric padding,
// groups; pooling over the padded window) against the reference kernels,
// so a wrong operand role, pad or refusal rule fails here.
#include <algorithm>
#include <array>
#include <cmath>
#include <dlfcn.h>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "gpu_test_util.h"
#include "math/dnn_args.h"
#include "math/gemm_math.h"

namespace {

using namespace gputest;
namespace dnn = spora::gpu::dnn;

struct ConvCase {
  int64_t n, c, h, w, o, kh, kw;
  int64_t stride[2], dil[2], pad[4], groups;
};

std::vector<AttrSpec> conv_attrs(const ConvCase& k) {
  return {ints_attr("stride", {k.stride[0], k.stride[1]}), ints_attr("dilation", {k.dil[0], k.dil[1]}),
          ints_attr("padding", {k.pad[0], k.pad[1], k.pad[2], k.pad[3]}), int_attr("groups", k.groups)};
}

int64_t ref_out(int64_t in, int64_t p0, int64_t p1, int64_t k, int64_t d, int64_t s) {
  return (in + p0 + p1 - d * (k - 1) - 1) / s + 1;
}

// Calls f(x index, w index, y index) for every product the cuDNN
// convolution described by `a` sums (packed NCHW, symmetric padding).
template <class F>
void for_each_product(const dnn::ConvArgs& a, F&& f) {
  const int64_t cg = a.w.c, og = a.w.n / a.groups;
  for (int64_t n = 0; n < a.x.n; ++n)
    for (int64_t o = 0; o < a.w.n; ++o)
      for (int64_t c = 0; c < cg; ++c) {
        const int64_t xc = o / og * cg + c;
        for (int64_t r = 0; r < a.y.h; ++r)
          for (int64_t q = 0; q < a.y.w; ++q)
            for (int64_t i = 0; i < a.w.h; ++i)
              for (int64_t j = 0; j < a.w.w; ++j) {
                const int64_t ih = r * a.stride[0] - a.pad[0] + i * a.dil[0];
                const int64_t iw = q * a.stride[1] - a.pad[1] + j * a.dil[1];
                if (ih < 0 || ih >= a.x.h || iw < 0 || iw >= a.x.w) continue;
                f(((n * a.x.c + xc) * a.x.h + ih) * a.x.w + iw, ((o * cg + c) * a.w.h + i) * a.w.w + j,
                  ((n * a.y.c + o) * a.y.h + r) * a.y.w + q);
              }
      }
}

// What cuDNN's call computes from the op's operands (f64), by the roles
// conv_args_of gave them.
std::vector<double> emulate_conv(const dnn::ConvArgs& a, const std::vector<const Tensor*>& in, const Tensor& out) {
  std::vector<double> res(static_cast<size_t>(out.numel()), 0.0);
  const auto data = [&](const dnn::Slot& s) -> const double* {
    return s.output ? nullptr : in[static_cast<size_t>(s.index)]->as<double>();
  };
  const double *x = data(a.xs), *w = data(a.ws), *y = data(a.ys);
  if (a.bias_input >= 0) {
    const double* b = in[static_cast<size_t>(a.bias_input)]->as<double>();
    for (int64_t k = 0; k < out.numel(); ++k) res[static_cast<size_t>(k)] = b[k / (a.y.h * a.y.w) % a.y.c];
  }
  for_each_product(a, [&](int64_t xi, int64_t wi, int64_t yi) {
    switch (a.call) {
      case dnn::ConvCall::kForward: res[static_cast<size_t>(yi)] += x[xi] * w[wi]; break;
      case dnn::ConvCall::kBackwardData: res[static_cast<size_t>(xi)] += y[yi] * w[wi]; break;
      case dnn::ConvCall::kBackwardFilter: res[static_cast<size_t>(wi)] += y[yi] * x[xi]; break;
    }
  });
  return res;
}

void expect_close(const std::vector<double>& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(static_cast<int64_t>(got.size()), want.numel()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double w = want.as<double>()[i];
    if (std::fabs(got[i] - w) > 1e-11 * (1 + std::fabs(w)) && ++bad <= 5)
      ADD_FAILURE() << what << ": element " << i << " got " << got[i] << " want " << w;
  }
}

std::string describe(const ConvCase& k) {
  return "x[" + std::to_string(k.n) + "," + std::to_string(k.c) + "," + std::to_string(k.h) + "," +
         std::to_string(k.w) + "] w[" + std::to_string(k.o) + ",.," + std::to_string(k.kh) + "," +
         std::to_string(k.kw) + "] s" + std::to_string(k.stride[0]) + std::to_string(k.stride[1]) + " d" +
         std::to_string(k.dil[0]) + std::to_string(k.dil[1]) + " p" + std::to_string(k.pad[0]) +
         std::to_string(k.pad[1]) + std::to_string(k.pad[2]) + std::to_string(k.pad[3]) + " g" +
         std::to_string(k.groups);
}

const ConvCase kConvCases[] = {
    {2, 3, 7, 6, 4, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1},
    {1, 4, 9, 8, 6, 3, 2, {2, 1}, {1, 2}, {0, 0, 1, 1}, 2},
    {2, 4, 8, 8, 4, 3, 3, {2, 2}, {1, 1}, {1, 1, 1, 1}, 4},   // depthwise, stride 2
    {1, 2, 10, 7, 3, 2, 3, {3, 2}, {2, 1}, {2, 2, 0, 0}, 1},  // dilation, stride 3
    {1, 1, 5, 5, 2, 1, 1, {4, 4}, {1, 1}, {0, 0, 0, 0}, 1},   // stride beyond the kernel
    {1, 2, 8, 8, 2, 3, 3, {2, 2}, {1, 1}, {1, 0, 1, 0}, 1},   // asymmetric, same output count: exact
    {1, 2, 8, 8, 2, 4, 4, {1, 1}, {1, 1}, {1, 2, 2, 1}, 2},   // asymmetric, output count differs: refused
    {3, 6, 5, 4, 9, 2, 2, {1, 1}, {2, 2}, {1, 1, 0, 0}, 3},
};

bool exact_case(const ConvCase& k) {
  return dnn::conv_out_size(k.h, k.pad[0], k.kh, k.dil[0], k.stride[0]) ==
             ref_out(k.h, k.pad[0], k.pad[1], k.kh, k.dil[0], k.stride[0]) &&
         dnn::conv_out_size(k.w, k.pad[2], k.kw, k.dil[1], k.stride[1]) ==
             ref_out(k.w, k.pad[2], k.pad[3], k.kw, k.dil[1], k.stride[1]);
}

TEST(GpuMathDnn, TypeChoicePerDtype) {
  dnn::TypeChoice t;
  ASSERT_TRUE(dnn::type_choice(SPORA_DTYPE_F32, &t));
  EXPECT_EQ(t.data, dnn::DataType::kFloat);
  EXPECT_EQ(t.compute, dnn::DataType::kFloat);
  EXPECT_EQ(t.math, dnn::MathType::kFma);  // no TF32: compared with cpu's f32
  EXPECT_TRUE(t.fma_only);
  EXPECT_EQ(t.elem_size, 4u);
  ASSERT_TRUE(dnn::type_choice(SPORA_DTYPE_F64, &t));
  EXPECT_EQ(t.data, dnn::DataType::kDouble);
  EXPECT_EQ(t.compute, dnn::DataType::kDouble);
  EXPECT_EQ(t.bn_param, dnn::DataType::kDouble);
  EXPECT_EQ(t.elem_size, 8u);
  for (int32_t dt : {SPORA_DTYPE_F16, SPORA_DTYPE_BF16}) {
    ASSERT_TRUE(dnn::type_choice(dt, &t));
    EXPECT_EQ(t.data, dt == SPORA_DTYPE_F16 ? dnn::DataType::kHalf : dnn::DataType::kBfloat16);
    EXPECT_EQ(t.compute, dnn::DataType::kFloat);
    EXPECT_EQ(t.bn_param, dnn::DataType::kFloat);
    EXPECT_EQ(t.math, dnn::MathType::kTensorOp);
    EXPECT_FALSE(t.fma_only);
    EXPECT_EQ(t.elem_size, 2u);
    EXPECT_EQ(t.bn_param_size, 4u);
  }
  for (int32_t dt : {SPORA_DTYPE_I32, SPORA_DTYPE_I64, SPORA_DTYPE_U8, SPORA_DTYPE_BOOL})
    EXPECT_FALSE(dnn::type_choice(dt, &t));
}

// conv_precision: only (f32, "high") changes the types, to DEFAULT_MATH
// (cuDNN's TF32-permitting math type) without the FMA-only filter; every
// other dtype and "highest" keep type_choice's exactly.
TEST(GpuMathDnn, ConvPrecisionTypeChoice) {
  dnn::ConvPrecision p = dnn::ConvPrecision::kHigh;
  ASSERT_TRUE(dnn::conv_precision_of("highest", &p));
  EXPECT_EQ(p, dnn::ConvPrecision::kHighest);
  ASSERT_TRUE(dnn::conv_precision_of("high", &p));
  EXPECT_EQ(p, dnn::ConvPrecision::kHigh);
  for (const char* bad : {"medium", "", "HIGH", "tf32"}) EXPECT_FALSE(dnn::conv_precision_of(bad, &p)) << bad;
  const auto same = [](const dnn::TypeChoice& a, const dnn::TypeChoice& b) {
    return a.data == b.data && a.compute == b.compute && a.bn_param == b.bn_param && a.math == b.math &&
           a.fma_only == b.fma_only && a.elem_size == b.elem_size && a.bn_param_size == b.bn_param_size &&
           a.tf32 == b.tf32;
  };
  for (int32_t dt : {SPORA_DTYPE_F32, SPORA_DTYPE_F64, SPORA_DTYPE_F16, SPORA_DTYPE_BF16}) {
    dnn::TypeChoice base;
    ASSERT_TRUE(dnn::type_choice(dt, &base));
    EXPECT_FALSE(base.tf32) << dt;
    EXPECT_TRUE(same(dnn::conv_type_choice(base, dt, dnn::ConvPrecision::kHighest), base)) << dt;
    const dnn::TypeChoice high = dnn::conv_type_choice(base, dt, dnn::ConvPrecision::kHigh);
    if (dt != SPORA_DTYPE_F32) {
      EXPECT_TRUE(same(high, base)) << dt << ": only f32 may use TF32";
      continue;
    }
    EXPECT_EQ(high.math, dnn::MathType::kDefault);
    EXPECT_FALSE(high.fma_only);
    EXPECT_TRUE(high.tf32);
    EXPECT_EQ(high.data, dnn::DataType::kFloat);
    EXPECT_EQ(high.compute, dnn::DataType::kFloat);
    EXPECT_EQ(high.elem_size, 4u);
  }
}

TEST(GpuMathDnn, PackedStridesAndIntLimits) {
  const dnn::Dims4 d{2, 3, 5, 7};
  const dnn::Strides4 s = dnn::packed_strides(d);
  EXPECT_EQ(s.n, 105);
  EXPECT_EQ(s.c, 35);
  EXPECT_EQ(s.h, 7);
  EXPECT_EQ(s.w, 1);
  sp::Shape big;
  big.rank = 4;
  for (int i = 0; i < 4; ++i) big.dims[i] = 256;  // 2^32 elements: beyond cuDNN's int indexing
  dnn::Dims4 out;
  EXPECT_FALSE(dnn::dims4_of(big, &out));
  big.dims[0] = 0;
  EXPECT_FALSE(dnn::dims4_of(big, &out));  // empty
  big.dims[0] = 1;
  big.dims[1] = 1;
  EXPECT_TRUE(dnn::dims4_of(big, &out));
  EXPECT_EQ(out.numel(), 65536);
}

// conv2d / conv2d_bias: cuDNN forward with x = in0, w = in1, y = out0.
TEST(GpuMathDnn, ConvForwardMatchesReference) {
  for (const ConvCase& k : kConvCases) {
    for (bool bias : {false, true}) {
      const int64_t oh = ref_out(k.h, k.pad[0], k.pad[1], k.kh, k.dil[0], k.stride[0]);
      const int64_t ow = ref_out(k.w, k.pad[2], k.pad[3], k.kw, k.dil[1], k.stride[1]);
      Tensor x = make(SPORA_DTYPE_F64, {k.n, k.c, k.h, k.w}), w = make(SPORA_DTYPE_F64, {k.o, k.c / k.groups, k.kh, k.kw});
      Tensor b = make(SPORA_DTYPE_F64, {k.o}), y = make(SPORA_DTYPE_F64, {k.n, k.o, oh, ow});
      fill(x, -2, 2, false);
      fill(w, -1, 1, false);
      fill(b, -1, 1, false);
      std::vector<const Tensor*> in = {&x, &w};
      if (bias) in.push_back(&b);
      const std::string op = bias ? "conv2d_bias" : "conv2d";
      sp::KernelPlan p;
      std::string why;
      ASSERT_TRUE(ref_plan(op, in, {&y}, conv_attrs(k), &p, &why)) << describe(k) << ": " << why;
      dnn::ConvArgs a;
      why = dnn::conv_args_of(p, &a);
      ASSERT_EQ(why.empty(), exact_case(k)) << describe(k) << ": " << why;
      if (!why.empty()) continue;
      EXPECT_EQ(a.call, dnn::ConvCall::kForward);
      EXPECT_FALSE(a.xs.output);
      EXPECT_EQ(a.xs.index, 0);
      EXPECT_EQ(a.ws.index, 1);
      EXPECT_TRUE(a.ys.output);
      EXPECT_EQ(a.bias_input, bias ? 2 : -1);
      EXPECT_FALSE(a.epilogue());
      EXPECT_EQ(a.x.n, k.n);
      EXPECT_EQ(a.x.c, k.c);
      EXPECT_EQ(a.w.n, k.o);
      EXPECT_EQ(a.w.c, k.c / k.groups);
      EXPECT_EQ(a.y.h, oh);
      EXPECT_EQ(a.y.w, ow);
      EXPECT_EQ(a.groups, k.groups);
      EXPECT_EQ(a.pad[0], k.pad[0]);
      EXPECT_EQ(a.pad[1], k.pad[2]);
      EXPECT_EQ(a.stride[1], k.stride[1]);
      EXPECT_EQ(a.dil[0], k.dil[0]);
      ref_run(p, in, {&y});
      expect_close(emulate_conv(a, in, y), y, op + " " + describe(k));
    }
  }
}

// conv2d_grad_input and conv2d_transpose: cuDNN backward data with dy =
// in0 (y), w = in1, dx = out0 (x).
TEST(GpuMathDnn, ConvBackwardDataMatchesReference) {
  for (const ConvCase& k : kConvCases) {
    for (int64_t extra : {0, 1}) {  // conv2d_transpose's output_padding makes dx larger
      const int64_t oh = ref_out(k.h, k.pad[0], k.pad[1], k.kh, k.dil[0], k.stride[0]);
      const int64_t ow = ref_out(k.w, k.pad[2], k.pad[3], k.kw, k.dil[1], k.stride[1]);
      const int64_t h = k.h + extra, wd = k.w + extra;
      Tensor dy = make(SPORA_DTYPE_F64, {k.n, k.o, oh, ow}), w = make(SPORA_DTYPE_F64, {k.o, k.c / k.groups, k.kh, k.kw});
      Tensor dx = make(SPORA_DTYPE_F64, {k.n, k.c, h, wd});
      fill(dy, -2, 2, false);
      fill(w, -1, 1, false);
      for (const char* op : {"conv2d_grad_input", "conv2d_transpose"}) {
        sp::KernelPlan p;
        std::string why;
        ASSERT_TRUE(ref_plan(op, {&dy, &w}, {&dx}, conv_attrs(k), &p, &why)) << describe(k) << ": " << why;
        dnn::ConvArgs a;
        why = dnn::conv_args_of(p, &a);
        const bool exact = dnn::conv_out_size(h, k.pad[0], k.kh, k.dil[0], k.stride[0]) == oh &&
                           dnn::conv_out_size(wd, k.pad[2], k.kw, k.dil[1], k.stride[1]) == ow;
        ASSERT_EQ(why.empty(), exact) << op << " " << describe(k) << " +" << extra << ": " << why;
        if (!why.empty()) continue;
        EXPECT_EQ(a.call, dnn::ConvCall::kBackwardData);
        EXPECT_FALSE(a.ys.output);
        EXPECT_EQ(a.ys.index, 0);
        EXPECT_EQ(a.ws.index, 1);
        EXPECT_TRUE(a.xs.output);
        EXPECT_EQ(a.x.h, h);
        EXPECT_EQ(a.y.c, k.o);
        ref_run(p, {&dy, &w}, {&dx});
        expect_close(emulate_conv(a, {&dy, &w}, dx), dx, std::string(op) + " " + describe(k));
      }
    }
  }
}

// conv2d_grad_weight: cuDNN backward filter with x = in0, dy = in1 (y),
// dw = out0 (w).
TEST(GpuMathDnn, ConvBackwardFilterMatchesReference) {
  for (const ConvCase& k : kConvCases) {
    const int64_t oh = ref_out(k.h, k.pad[0], k.pad[1], k.kh, k.dil[0], k.stride[0]);
    const int64_t ow = ref_out(k.w, k.pad[2], k.pad[3], k.kw, k.dil[1], k.stride[1]);
    Tensor x = make(SPORA_DTYPE_F64, {k.n, k.c, k.h, k.w}), dy = make(SPORA_DTYPE_F64, {k.n, k.o, oh, ow});
    Tensor dw = make(SPORA_DTYPE_F64, {k.o, k.c / k.groups, k.kh, k.kw});
    fill(x, -2, 2, false);
    fill(dy, -1, 1, false);
    sp::KernelPlan p;
    std::string why;
    ASSERT_TRUE(ref_plan("conv2d_grad_weight", {&x, &dy}, {&dw}, conv_attrs(k), &p, &why)) << describe(k) << ": " << why;
    dnn::ConvArgs a;
    why = dnn::conv_args_of(p, &a);
    ASSERT_EQ(why.empty(), exact_case(k)) << describe(k) << ": " << why;
    if (!why.empty()) continue;
    EXPECT_EQ(a.call, dnn::ConvCall::kBackwardFilter);
    EXPECT_EQ(a.xs.index, 0);
    EXPECT_FALSE(a.xs.output);
    EXPECT_EQ(a.ys.index, 1);
    EXPECT_FALSE(a.ys.output);
    EXPECT_TRUE(a.ws.output);
    ref_run(p, {&x, &dy}, {&dw});
    expect_close(emulate_conv(a, {&x, &dy}, dw), dw, "conv2d_grad_weight " + describe(k));
  }
}

// conv2d_act / conv2d_add_act: the forward with the bias, then the GEMM
// epilogue (math/gemm_math.h) on each element, against the reference's
// base op + add + activation, each rounded to T; f32 and f16.
TEST(GpuMathDnn, ConvEpilogueMatchesReference) {
  const ConvCase k{2, 4, 6, 5, 6, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, 2};
  for (int32_t dt : {SPORA_DTYPE_F32, SPORA_DTYPE_F16, SPORA_DTYPE_BF16}) {
    for (const char* act : {"none", "relu", "sigmoid", "tanh", "gelu", "gelu_tanh"}) {
      for (bool residual : {false, true}) {
        Tensor x = make(dt, {k.n, k.c, k.h, k.w}), w = make(dt, {k.o, k.c / k.groups, k.kh, k.kw});
        Tensor b = make(dt, {k.o}), r = make(dt, {k.n, k.o, k.h, k.w}), y = make(dt, {k.n, k.o, k.h, k.w});
        Tensor base = make(dt, {k.n, k.o, k.h, k.w});
        fill(x, -2, 2, false);
        fill(w, -1, 1, false);
        fill(b, -1, 1, false);
        fill(r, -2, 2, false);
        std::vector<const Tensor*> in = {&x, &w, &b};
        if (residual) in.push_back(&r);
        std::vector<AttrSpec> attrs = conv_attrs(k);
        attrs.push_back(string_attr("activation", act));
        const std::string op = residual ? "conv2d_add_act" : "conv2d_act";
        sp::KernelPlan p, pb;
        std::string why;
        ASSERT_TRUE(ref_plan(op, in, {&y}, attrs, &p, &why)) << op << ": " << why;
        dnn::ConvArgs a;
        ASSERT_EQ(dnn::conv_args_of(p, &a), "") << op << " " << act;
        EXPECT_EQ(a.bias_input, 2);
        EXPECT_EQ(a.residual_input, residual ? 3 : -1);
        EXPECT_EQ(a.activation, act);
        EXPECT_EQ(a.epilogue(), residual || std::string(act) != "none");
        ref_run(p, in, {&y});
        // The device's order: conv2d_bias (cuDNN, one rounding), then the epilogue.
        ASSERT_TRUE(ref_plan("conv2d_bias", {&x, &w, &b}, {&base}, conv_attrs(k), &pb, &why)) << why;
        ref_run(pb, {&x, &w, &b}, {&base});
        spora::gpu::GemmEpilogue ep;
        ASSERT_TRUE(spora::gpu::gemm_epilogue_of(a.activation, a.residual_input >= 0, &ep));
        Tensor got = make(dt, {k.n, k.o, k.h, k.w});
        sg::visit_storage(dt, [&](auto tag) {
          using T = decltype(tag);
          for (int64_t i = 0; i < got.numel(); ++i)
            got.as<T>()[i] = sg::gemm_store<T>(a.epilogue() ? &ep : nullptr, sg::elem<T>::load(base.as<T>()[i]),
                                               residual ? r.as<T>() + i : nullptr);
        });
        EXPECT_EQ(compare(got, y, 0, 0, op + " " + act + " " + sp::dtype_name(dt)), 0);
      }
    }
  }
  // An unknown activation is refused rather than guessed.
  Tensor x = make(SPORA_DTYPE_F32, {1, 1, 3, 3}), w = make(SPORA_DTYPE_F32, {1, 1, 1, 1}), b = make(SPORA_DTYPE_F32, {1});
  Tensor y = make(SPORA_DTYPE_F32, {1, 1, 3, 3});
  sp::KernelPlan p;
  ConvCase one{1, 1, 3, 3, 1, 1, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, 1};
  std::vector<AttrSpec> attrs = conv_attrs(one);
  ASSERT_TRUE(ref_plan("conv2d_act", {&x, &w, &b}, {&y}, attrs, &p));
  p.attrs.items.push_back({});
  p.attrs.items.back().name = "activation";
  p.attrs.items.back().type = SPORA_ATTR_STRING;
  p.attrs.items.back().s = "swish";
  dnn::ConvArgs a;
  EXPECT_NE(dnn::conv_args_of(p, &a), "");
}

TEST(GpuMathDnn, ConvSignatureSeparatesEveryArgument) {
  const ConvCase k{2, 4, 8, 8, 4, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1};
  Tensor x = make(SPORA_DTYPE_F32, {2, 4, 8, 8}), w = make(SPORA_DTYPE_F32, {4, 4, 3, 3}), y = make(SPORA_DTYPE_F32, {2, 4, 8, 8});
  sp::KernelPlan p;
  ASSERT_TRUE(ref_plan("conv2d", {&x, &w}, {&y}, conv_attrs(k), &p));
  dnn::ConvArgs a;
  ASSERT_EQ(dnn::conv_args_of(p, &a), "");
  dnn::TypeChoice t32, t16;
  ASSERT_TRUE(dnn::type_choice(SPORA_DTYPE_F32, &t32));
  ASSERT_TRUE(dnn::type_choice(SPORA_DTYPE_F16, &t16));
  std::set<std::vector<int64_t>> keys;
  keys.insert(dnn::conv_signature(a, SPORA_DTYPE_F32, t32));
  keys.insert(dnn::conv_signature(a, SPORA_DTYPE_F16, t16));
  dnn::ConvArgs b = a;
  b.call = dnn::ConvCall::kBackwardData;
  keys.insert(dnn::conv_signature(b, SPORA_DTYPE_F32, t32));
  b = a;
  b.groups = 2;
  keys.insert(dnn::conv_signature(b, SPORA_DTYPE_F32, t32));
  b = a;
  b.dil[1] = 2;
  keys.insert(dnn::conv_signature(b, SPORA_DTYPE_F32, t32));
  b = a;
  b.pad[0] = 0;
  keys.insert(dnn::conv_signature(b, SPORA_DTYPE_F32, t32));
  b = a;
  b.x.n = 3;
  keys.insert(dnn::conv_signature(b, SPORA_DTYPE_F32, t32));
  // TF32 plans are cached apart from exact-FP32 ones; the default key is
  // the 21 values it always was.
  const dnn::TypeChoice tf32 = dnn::conv_type_choice(t32, SPORA_DTYPE_F32, dnn::ConvPrecision::kHigh);
  keys.insert(dnn::conv_signature(a, SPORA_DTYPE_F32, tf32));
  EXPECT_EQ(keys.size(), 8u);
  EXPECT_EQ(dnn::conv_signature(a, SPORA_DTYPE_F32, t32), dnn::conv_signature(a, SPORA_DTYPE_F32, t32));
  EXPECT_EQ(dnn::conv_signature(a, SPORA_DTYPE_F32, t32).size(), 21u);
  EXPECT_EQ(dnn::conv_signature(a, SPORA_DTYPE_F16, dnn::conv_type_choice(t16, SPORA_DTYPE_F16, dnn::ConvPrecision::kHigh)),
            dnn::conv_signature(a, SPORA_DTYPE_F16, t16))
      << "\"high\" leaves f16 keys alone";
}

TEST(GpuMathDnn, AlgorithmChoice) {
  dnn::TypeChoice f32, f16;
  ASSERT_TRUE(dnn::type_choice(SPORA_DTYPE_F32, &f32));
  ASSERT_TRUE(dnn::type_choice(SPORA_DTYPE_F16, &f16));
  const size_t cap = 1000;
  using M = dnn::MathType;
  // Fastest first: a failed one, one over the cap, a tensor-op one, then fits.
  const std::vector<dnn::AlgoPerf> perfs = {
      {6, 3000, 0, M::kFma}, {5, 0, 5000, M::kFma}, {1, 0, 10, M::kTensorOp}, {2, 0, 200, M::kDefault}, {0, 0, 0, M::kFma}};
  dnn::AlgoChoice c;
  ASSERT_TRUE(dnn::choose_algo(perfs, f32, cap, &c));
  EXPECT_EQ(c.algo, 2);  // f32 never takes the tensor-op (TF32) entry
  EXPECT_EQ(c.math, M::kFma);
  EXPECT_EQ(c.workspace, 200u);
  ASSERT_TRUE(dnn::choose_algo(perfs, f16, cap, &c));
  EXPECT_EQ(c.algo, 1);
  EXPECT_EQ(c.math, M::kTensorOp);
  EXPECT_EQ(c.workspace, 10u);
  ASSERT_TRUE(dnn::choose_algo(perfs, f16, 1u << 20, &c));
  EXPECT_EQ(c.algo, 5);  // a larger cap admits the fastest that succeeded
  EXPECT_EQ(c.workspace, 5000u);
  EXPECT_FALSE(dnn::choose_algo({{6, 3000, 0, M::kFma}, {1, 0, 10, M::kTensorOp}}, f32, cap, &c));
  EXPECT_FALSE(dnn::choose_algo({}, f16, cap, &c));
  // f32 with TF32 allowed takes the fastest tensor-op or default entry with
  // the math type cuDNN reported, but never one converting down to f16.
  const dnn::TypeChoice tf32 = dnn::conv_type_choice(f32, SPORA_DTYPE_F32, dnn::ConvPrecision::kHigh);
  ASSERT_TRUE(dnn::choose_algo(perfs, tf32, cap, &c));
  EXPECT_EQ(c.algo, 1);
  EXPECT_EQ(c.math, M::kTensorOp);
  EXPECT_EQ(c.workspace, 10u);
  const std::vector<dnn::AlgoPerf> conv = {{7, 0, 0, M::kTensorOpAllowConversion}, {3, 0, 50, M::kDefault}};
  ASSERT_TRUE(dnn::choose_algo(conv, tf32, cap, &c));
  EXPECT_EQ(c.algo, 3);
  EXPECT_EQ(c.math, M::kDefault);
  ASSERT_TRUE(dnn::choose_algo(conv, f16, cap, &c));
  EXPECT_EQ(c.algo, 7) << "f16 is as before";
  EXPECT_FALSE(dnn::choose_algo({{7, 0, 0, M::kTensorOpAllowConversion}}, tf32, cap, &c));
  EXPECT_GE(dnn::kWorkspaceCap, size_t{64} << 20);
}

// ---- cuDNN's own view of the descriptors, where the library loads ----

// The few descriptor functions this test calls, looked up by name (the
// test does not see cuDNN's headers; the C ABI passes enums as int and
// descriptors as pointers). They run without a GPU.
struct CudnnDescApi {
  using Create = int (*)(void**);
  using Destroy = int (*)(void*);
  Create create_tensor = nullptr, create_filter = nullptr, create_conv = nullptr, create_pool = nullptr;
  Destroy destroy_tensor = nullptr, destroy_filter = nullptr, destroy_conv = nullptr, destroy_pool = nullptr;
  int (*set_tensor)(void*, int, int, int, int, int, int, int, int, int) = nullptr;
  int (*set_filter)(void*, int, int, int, int, int, int) = nullptr;
  int (*set_conv)(void*, int, int, int, int, int, int, int, int) = nullptr;
  int (*set_groups)(void*, int) = nullptr;
  int (*conv_out)(void*, void*, void*, int*, int*, int*, int*) = nullptr;
  int (*set_pool)(void*, int, int, int, int, int, int, int, int) = nullptr;
  int (*pool_out)(void*, void*, int*, int*, int*, int*) = nullptr;
  bool ok = false;
};

const CudnnDescApi& cudnn_desc_api() {
  static const CudnnDescApi api = [] {
    CudnnDescApi a;
    void* h = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (!h) return a;
    const auto sym = [&](auto& f, const char* name) { f = reinterpret_cast<std::decay_t<decltype(f)>>(dlsym(h, name)); };
    sym(a.create_tensor, "cudnnCreateTensorDescriptor");
    sym(a.create_filter, "cudnnCreateFilterDescriptor");
    sym(a.create_conv, "cudnnCreateConvolutionDescriptor");
    sym(a.create_pool, "cudnnCreatePoolingDescriptor");
    sym(a.destroy_tensor, "cudnnDestroyTensorDescriptor");
    sym(a.destroy_filter, "cudnnDestroyFilterDescriptor");
    sym(a.destroy_conv, "cudnnDestroyConvolutionDescriptor");
    sym(a.destroy_pool, "cudnnDestroyPoolingDescriptor");
    sym(a.set_tensor, "cudnnSetTensor4dDescriptorEx");
    sym(a.set_filter, "cudnnSetFilter4dDescriptor");
    sym(a.set_conv, "cudnnSetConvolution2dDescriptor");
    sym(a.set_groups, "cudnnSetConvolutionGroupCount");
    sym(a.conv_out, "cudnnGetConvolution2dForwardOutputDim");
    sym(a.set_pool, "cudnnSetPooling2dDescriptor");
    sym(a.pool_out, "cudnnGetPooling2dForwardOutputDim");
    a.ok = a.create_tensor && a.create_filter && a.create_conv && a.create_pool && a.destroy_tensor &&
           a.destroy_filter && a.destroy_conv && a.destroy_pool && a.set_tensor && a.set_filter && a.set_conv &&
           a.set_groups && a.conv_out && a.set_pool && a.pool_out;
    return a;  // the library stays loaded
  }();
  return api;
}

void* tensor_desc(const CudnnDescApi& api, dnn::DataType t, const dnn::Dims4& d) {
  void* desc = nullptr;
  EXPECT_EQ(api.create_tensor(&desc), 0);
  const dnn::Strides4 s = dnn::packed_strides(d);
  EXPECT_EQ(api.set_tensor(desc, static_cast<int>(t), d.n, d.c, d.h, d.w, s.n, s.c, s.h, s.w), 0);
  return desc;
}

// For every convolution and pooling dnn_args accepts, cuDNN takes the
// descriptors (its own parameter checks) and computes from x and the
// geometry exactly the y the reference planned: the condition its
// forward, backward-data and backward-filter calls check.
TEST(GpuMathDnn, CudnnAgreesOnOutputDims) {
  const CudnnDescApi& api = cudnn_desc_api();
  if (!api.ok) GTEST_SKIP() << "libcudnn.so.9 not loadable here";
  int checked = 0;
  for (const ConvCase& k : kConvCases) {
    for (int32_t dt : kFloatDtypes) {
      const int64_t oh = ref_out(k.h, k.pad[0], k.pad[1], k.kh, k.dil[0], k.stride[0]);
      const int64_t ow = ref_out(k.w, k.pad[2], k.pad[3], k.kw, k.dil[1], k.stride[1]);
      Tensor x = make(dt, {k.n, k.c, k.h, k.w}), w = make(dt, {k.o, k.c / k.groups, k.kh, k.kw});
      Tensor y = make(dt, {k.n, k.o, oh, ow});
      sp::KernelPlan p;
      ASSERT_TRUE(ref_plan("conv2d", {&x, &w}, {&y}, conv_attrs(k), &p));
      dnn::ConvArgs a;
      if (!dnn::conv_args_of(p, &a).empty()) continue;
      dnn::TypeChoice t;
      ASSERT_TRUE(dnn::type_choice(dt, &t));
      void* xd = tensor_desc(api, t.data, a.x);
      void *wd = nullptr, *cd = nullptr;
      ASSERT_EQ(api.create_filter(&wd), 0);
      EXPECT_EQ(api.set_filter(wd, static_cast<int>(t.data), 0 /* NCHW */, a.w.n, a.w.c, a.w.h, a.w.w), 0);
      ASSERT_EQ(api.create_conv(&cd), 0);
      EXPECT_EQ(api.set_conv(cd, a.pad[0], a.pad[1], a.stride[0], a.stride[1], a.dil[0], a.dil[1],
                             1 /* CROSS_CORRELATION */, static_cast<int>(t.compute)),
                0);
      EXPECT_EQ(api.set_groups(cd, a.groups), 0);
      int n = 0, c = 0, h = 0, wo = 0;
      EXPECT_EQ(api.conv_out(cd, xd, wd, &n, &c, &h, &wo), 0) << describe(k);
      EXPECT_EQ(n, a.y.n) << describe(k);
      EXPECT_EQ(c, a.y.c) << describe(k);
      EXPECT_EQ(h, a.y.h) << describe(k);
      EXPECT_EQ(wo, a.y.w) << describe(k);
      api.destroy_conv(cd);
      api.destroy_filter(wd);
      api.destroy_tensor(xd);
      ++checked;
    }
  }
  const int64_t pools[][6] = {{8, 8, 2, 2, 0, 2}, {7, 9, 3, 3, 1, 2}, {6, 5, 3, 2, 1, 1}, {9, 7, 4, 3, 0, 3}};
  for (const auto& q : pools) {
    Tensor x = make(SPORA_DTYPE_F32, {2, 3, q[0], q[1]});
    const int64_t oh = (q[0] + 2 * q[4] - q[2]) / q[5] + 1, ow = (q[1] + 2 * q[4] - q[3]) / q[5] + 1;
    Tensor y = make(SPORA_DTYPE_F32, {2, 3, oh, ow});
    sp::KernelPlan p;
    ASSERT_TRUE(ref_plan("max_pool2d", {&x}, {&y},
                         {ints_attr("kernel_size", {q[2], q[3]}), ints_attr("stride", {q[5], q[5]}),
                          ints_attr("padding", {q[4], q[4], q[4], q[4]})},
                         &p));
    dnn::PoolArgs a;
    ASSERT_EQ(dnn::pool_args_of(p, &a), "");
    void* xd = tensor_desc(api, dnn::DataType::kFloat, a.x);
    void* pd = nullptr;
    ASSERT_EQ(api.create_pool(&pd), 0);
    EXPECT_EQ(api.set_pool(pd, static_cast<int>(a.mode), 1 /* PROPAGATE_NAN */, a.window[0], a.window[1], a.pad[0],
                           a.pad[1], a.stride[0], a.stride[1]),
              0);
    int n = 0, c = 0, h = 0, w = 0;
    EXPECT_EQ(api.pool_out(pd, xd, &n, &c, &h, &w), 0);
    EXPECT_EQ(h, a.y.h);
    EXPECT_EQ(w, a.y.w);
    api.destroy_pool(pd);
    api.destroy_tensor(xd);
    ++checked;
  }
  EXPECT_GT(checked, 20);
}

// ---- pooling ----

struct PoolCase {
  int64_t n, c, h, w, k[2], s[2], pad[4], dil[2];
  int64_t oh, ow;  // 0: the floor-mode size
};

int64_t pool_out(int64_t in, int64_t p0, int64_t p1, int64_t k, int64_t d, int64_t s) {
  return (in + p0 + p1 - d * (k - 1) - 1) / s + 1;
}

// What cuDNN's pooling computes from `a` (f64): max over the taps inside
// the input (NaN wins), average over the window with the full window or
// the taps inside as divisor; backward spreads dy / divisor.
std::vector<double> emulate_pool(const dnn::PoolArgs& a, const double* src, int64_t out_numel) {
  std::vector<double> res(static_cast<size_t>(out_numel), 0.0);
  for (int64_t pl = 0; pl < int64_t{a.x.n} * a.x.c; ++pl)
    for (int64_t r = 0; r < a.y.h; ++r)
      for (int64_t q = 0; q < a.y.w; ++q) {
        std::vector<int64_t> taps;
        for (int64_t i = 0; i < a.window[0]; ++i)
          for (int64_t j = 0; j < a.window[1]; ++j) {
            const int64_t ih = r * a.stride[0] - a.pad[0] + i, iw = q * a.stride[1] - a.pad[1] + j;
            if (ih >= 0 && ih < a.x.h && iw >= 0 && iw < a.x.w) taps.push_back(pl * a.x.h * a.x.w + ih * a.x.w + iw);
          }
        const int64_t yi = (pl * a.y.h + r) * a.y.w + q;
        const double div = a.mode == dnn::PoolMode::kAvgIncludePad ? double(a.window[0]) * a.window[1]
                                                                    : static_cast<double>(taps.size());
        if (a.backward) {
          for (int64_t t : taps) res[static_cast<size_t>(t)] += src[yi] / div;
        } else if (a.mode == dnn::PoolMode::kMax) {
          double m = -INFINITY;
          for (int64_t t : taps) m = std::isnan(src[t]) || std::isnan(m) ? NAN : std::max(m, src[t]);
          res[static_cast<size_t>(yi)] = m;
        } else {
          double s = 0;
          for (int64_t t : taps) s += src[t];
          res[static_cast<size_t>(yi)] = s / div;
        }
      }
  return res;
}

void expect_same(const std::vector<double>& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(static_cast<int64_t>(got.size()), want.numel()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double w = want.as<double>()[i];
    if ((std::isnan(w) && std::isnan(got[i])) || got[i] == w) continue;
    if (!(std::fabs(got[i] - w) <= 1e-12 * (1 + std::fabs(w))) && ++bad <= 5)
      ADD_FAILURE() << what << ": element " << i << " got " << got[i] << " want " << w;
  }
}

TEST(GpuMathDnn, PoolingMatchesReference) {
  const PoolCase cases[] = {
      {2, 3, 8, 8, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 0, 0},
      {1, 2, 7, 9, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 0, 0},
      {1, 2, 6, 5, {3, 2}, {1, 2}, {2, 2, 1, 1}, {1, 1}, 0, 0},
      {2, 1, 9, 7, {4, 3}, {3, 3}, {0, 0, 1, 1}, {1, 1}, 0, 0},
      {1, 2, 7, 7, {3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 4, 4},  // ceil mode: refused
      {1, 2, 8, 8, {3, 3}, {2, 2}, {1, 0, 1, 0}, {1, 1}, 0, 0},  // asymmetric: refused
      {1, 2, 8, 8, {2, 2}, {2, 2}, {2, 2, 0, 0}, {1, 1}, 0, 0},  // pad = window: refused
      {1, 2, 9, 9, {3, 3}, {1, 1}, {0, 0, 0, 0}, {2, 2}, 0, 0},  // dilated: refused for max only
  };
  for (const PoolCase& k : cases) {
    for (const char* op : {"max_pool2d", "avg_pool2d", "avg_pool2d_grad"}) {
      for (bool include : {true, false}) {
        const bool is_max = std::string(op) == "max_pool2d";
        if (is_max && !include) continue;
        const int64_t oh = k.oh ? k.oh : pool_out(k.h, k.pad[0], k.pad[1], k.k[0], is_max ? k.dil[0] : 1, k.s[0]);
        const int64_t ow = k.ow ? k.ow : pool_out(k.w, k.pad[2], k.pad[3], k.k[1], is_max ? k.dil[1] : 1, k.s[1]);
        const bool grad = std::string(op).find("_grad") != std::string::npos;
        Tensor x = make(SPORA_DTYPE_F64, {k.n, k.c, k.h, k.w}), y = make(SPORA_DTYPE_F64, {k.n, k.c, oh, ow});
        fill(grad ? y : x, -3, 3, !grad);  // NaN and infinities in max/avg's input
        std::vector<AttrSpec> attrs = {ints_attr("kernel_size", {k.k[0], k.k[1]}), ints_attr("stride", {k.s[0], k.s[1]}),
                                       ints_attr("padding", {k.pad[0], k.pad[1], k.pad[2], k.pad[3]}),
                                       ints_attr("dilation", {k.dil[0], k.dil[1]}),
                                       bool_attr("count_include_pad", include)};
        sp::KernelPlan p;
        std::string why;
        Tensor& in = grad ? y : x;
        Tensor& out = grad ? x : y;
        ASSERT_TRUE(ref_plan(op, {&in}, {&out}, attrs, &p, &why)) << op << ": " << why;
        dnn::PoolArgs a;
        why = dnn::pool_args_of(p, &a);
        const bool sym = k.pad[0] == k.pad[1] && k.pad[2] == k.pad[3];
        const bool exact = sym && k.oh == 0 && k.pad[0] < k.k[0] && k.pad[2] < k.k[1] &&
                           (!is_max || (k.dil[0] == 1 && k.dil[1] == 1));
        ASSERT_EQ(why.empty(), exact) << op << " case " << k.h << "x" << k.w << ": " << why;
        if (!exact) continue;
        EXPECT_EQ(a.backward, grad);
        EXPECT_EQ(a.mode, is_max ? dnn::PoolMode::kMax
                                 : include ? dnn::PoolMode::kAvgIncludePad : dnn::PoolMode::kAvgExcludePad);
        EXPECT_EQ(a.xs.output, grad);
        EXPECT_EQ(a.ys.output, !grad);
        EXPECT_EQ(a.x.h, k.h);
        EXPECT_EQ(a.y.w, ow);
        ref_run(p, {&in}, {&out});
        expect_same(emulate_pool(a, in.as<double>(), out.numel()), out, std::string(op) + (include ? " incl" : " excl"));
        dnn::TypeChoice t;
        ASSERT_TRUE(dnn::type_choice(SPORA_DTYPE_F16, &t));
        EXPECT_EQ(dnn::pool_workspace(a, t), grad ? static_cast<size_t>(x.numel()) * 2 : 0u);
      }
    }
  }
}

// cuDNN's max from the lowest finite value (NaN propagating), then the
// repair of math/dnn_args.h, against the reference max, every float dtype,
// on data with -inf (windows of -inf only, 1x1 windows), NaN and ties.
TEST(GpuMathDnn, MaxPoolRepairMatchesReference) {
  struct Case {
    int64_t h, w, k[2], s[2], pad;
  };
  const Case cases[] = {{5, 6, {1, 1}, {1, 1}, 0}, {6, 6, {2, 2}, {2, 2}, 0}, {7, 5, {3, 3}, {2, 2}, 1},
                        {4, 8, {1, 3}, {1, 2}, 0}, {6, 7, {2, 3}, {1, 1}, 1}};
  for (int32_t dt : kFloatDtypes) {
    for (const Case& k : cases) {
      const int64_t oh = (k.h + 2 * k.pad - k.k[0]) / k.s[0] + 1, ow = (k.w + 2 * k.pad - k.k[1]) / k.s[1] + 1;
      Tensor x = make(dt, {2, 2, k.h, k.w}), y = make(dt, {2, 2, oh, ow}), got = make(dt, {2, 2, oh, ow});
      fill(x, -3, 3, true);
      sg::visit_storage(dt, [&](auto tag) {
        using T = decltype(tag);
        using C = sg::compute_of<T>;
        if constexpr (sg::is_float_c<C>) {
        T* p = x.as<T>();
        // Plane 1: -inf everywhere but a few values, so whole windows are -inf;
        // plane 2 keeps a lowest-finite value that must survive.
        for (int64_t i = k.h * k.w; i < 2 * k.h * k.w; ++i) p[i] = sg::elem<T>::store(i % 7 == 0 ? C(1) : C(-INFINITY));
        p[2 * k.h * k.w + 1] = sg::elem<T>::store(dnn::lowest_finite<T>());
        p[2 * k.h * k.w + 2] = sg::elem<T>::store(C(-INFINITY));
        }
      });
      sp::KernelPlan p;
      std::string why;
      ASSERT_TRUE(ref_plan("max_pool2d", {&x}, {&y},
                           {ints_attr("kernel_size", {k.k[0], k.k[1]}), ints_attr("stride", {k.s[0], k.s[1]}),
                            ints_attr("padding", {k.pad, k.pad, k.pad, k.pad})},
                           &p, &why))
          << why;
      dnn::PoolArgs a;
      ASSERT_EQ(dnn::pool_args_of(p, &a), "");
      ref_run(p, {&x}, {&y});
      const dnn::PoolFix g = dnn::pool_fix_of(a);
      sg::visit_storage(dt, [&](auto tag) {
        using T = decltype(tag);
        using C = sg::compute_of<T>;
        if constexpr (sg::is_float_c<C>) {
        const T* xp = x.as<T>();
        T* yp = got.as<T>();
        for (int64_t pl = 0; pl < 4; ++pl)
          for (int64_t r = 0; r < oh; ++r)
            for (int64_t q = 0; q < ow; ++q) {
              C m = dnn::lowest_finite<T>();  // cuDNN's start value
              bool nan = false;
              for (int i = 0; i < a.window[0]; ++i)
                for (int j = 0; j < a.window[1]; ++j) {
                  const int64_t ih = r * a.stride[0] - a.pad[0] + i, iw = q * a.stride[1] - a.pad[1] + j;
                  if (ih < 0 || ih >= k.h || iw < 0 || iw >= k.w) continue;
                  const C v = sg::elem<T>::load(xp[pl * k.h * k.w + ih * k.w + iw]);
                  nan = nan || std::isnan(static_cast<double>(v));
                  if (v > m) m = v;
                }
              const T cudnn = sg::elem<T>::store(nan ? C(NAN) : m);
              yp[(pl * oh + r) * ow + q] = dnn::max_pool_fix<T>(g, xp + pl * k.h * k.w, r, q, cudnn);
            }
        }
      });
      EXPECT_EQ(compare(got, y, 0, 0, std::string("max_pool2d repair ") + sp::dtype_name(dt)), 0);
    }
  }
}

TEST(GpuMathDnn, AdaptivePoolingEvenBinsOnly) {
  for (auto [h, w, oh, ow] : std::vector<std::array<int64_t, 4>>{{8, 6, 4, 3}, {5, 5, 1, 1}, {6, 9, 6, 3}, {7, 6, 3, 3}, {6, 6, 4, 2}}) {
    const bool even = h % oh == 0 && w % ow == 0;
    for (const char* op : {"adaptive_avg_pool2d", "adaptive_avg_pool2d_grad"}) {
      const bool grad = std::string(op).find("_grad") != std::string::npos;
      Tensor x = make(SPORA_DTYPE_F64, {2, 3, h, w}), y = make(SPORA_DTYPE_F64, {2, 3, oh, ow});
      Tensor& in = grad ? y : x;
      Tensor& out = grad ? x : y;
      fill(in, -3, 3, false);
      sp::KernelPlan p;
      std::string why;
      ASSERT_TRUE(ref_plan(op, {&in}, {&out}, {ints_attr("output_size", {oh, ow})}, &p, &why)) << why;
      dnn::PoolArgs a;
      why = dnn::pool_args_of(p, &a);
      ASSERT_EQ(why.empty(), even) << op << " " << h << "x" << w << " -> " << oh << "x" << ow << ": " << why;
      if (!even) continue;
      EXPECT_EQ(a.window[0], h / oh);
      EXPECT_EQ(a.stride[1], w / ow);
      EXPECT_EQ(a.pad[0], 0);
      ref_run(p, {&in}, {&out});
      expect_same(emulate_pool(a, in.as<double>(), out.numel()), out, op);
    }
  }
}

TEST(GpuMathDnn, MaxPoolGradGoesToOwnKernel) {
  Tensor x = make(SPORA_DTYPE_F32, {1, 1, 4, 4}), dy = make(SPORA_DTYPE_F32, {1, 1, 2, 2}), dx = make(SPORA_DTYPE_F32, {1, 1, 4, 4});
  sp::KernelPlan p;
  std::string why;
  ASSERT_TRUE(ref_plan("max_pool2d_grad", {&x, &dy}, {&dx},
                       {ints_attr("kernel_size", {2, 2}), ints_attr("stride", {2, 2}), ints_attr("padding", {0, 0, 0, 0})},
                       &p, &why))
      << why;
  dnn::PoolArgs a;
  EXPECT_NE(dnn::pool_args_of(p, &a), "");
}

// ---- batch norm ----

TEST(GpuMathDnn, BatchNormArgsAndWorkspace) {
  for (int32_t dt : kFloatDtypes) {
    const int32_t st = dt == SPORA_DTYPE_F16 || dt == SPORA_DTYPE_BF16 ? SPORA_DTYPE_F32 : dt;
    dnn::TypeChoice t;
    ASSERT_TRUE(dnn::type_choice(dt, &t));
    for (bool training : {false, true}) {
      Tensor x = make(dt, {4, 5, 6}), y = make(dt, {4, 5, 6}), p5 = make(dt, {5}), s5 = make(st, {5});
      sp::KernelPlan p;
      std::string why;
      ASSERT_TRUE(ref_plan("batch_norm", {&x, &p5, &p5, &p5, &p5}, {&y, &s5, &s5, &p5, &p5},
                           {float_attr("eps", 1e-3), float_attr("momentum", 0.25), bool_attr("training", training)}, &p,
                           &why))
          << why;
      dnn::BnArgs a;
      ASSERT_EQ(dnn::bn_args_of(p, t, &a), "");
      EXPECT_FALSE(a.backward);
      EXPECT_EQ(a.training, training);
      EXPECT_EQ(a.x.n, 4);
      EXPECT_EQ(a.x.c, 5);
      EXPECT_EQ(a.x.h, 6);
      EXPECT_EQ(a.x.w, 1);
      EXPECT_DOUBLE_EQ(a.eps, 1e-3);
      EXPECT_DOUBLE_EQ(a.momentum, 0.25);  // cuDNN's exponentialAverageFactor: new = (1-f) old + f batch
      const bool half = dt == SPORA_DTYPE_F16 || dt == SPORA_DTYPE_BF16;
      EXPECT_EQ(a.convert, half);
      if (half) {
        // gamma, beta, running mean and variance as float, each aligned.
        std::vector<int64_t> offs = {a.off_gamma, a.off_beta, a.off_rmean, a.off_rvar};
        for (size_t i = 0; i < offs.size(); ++i) {
          EXPECT_EQ(offs[i] % 256, 0);
          EXPECT_GE(offs[i], 0);
          if (i) {
            EXPECT_GE(offs[i], offs[i - 1] + 5 * 4);
          }
        }
        EXPECT_GE(a.workspace, static_cast<size_t>(offs.back()) + 20);
      } else {
        EXPECT_EQ(a.workspace, 0u);
      }
      Tensor dx = make(dt, {4, 5, 6});
      sp::KernelPlan pg;
      ASSERT_TRUE(ref_plan("batch_norm_grad", {&x, &x, &p5, &s5, &s5}, {&dx, &p5, &p5}, {float_attr("eps", 1e-3)}, &pg,
                           &why))
          << why;
      dnn::BnArgs g;
      ASSERT_EQ(dnn::bn_args_of(pg, t, &g), "");
      EXPECT_TRUE(g.backward);
      if (half) {
        EXPECT_GE(g.off_dgamma, g.off_gamma + 20);
        EXPECT_GE(g.off_dbeta, g.off_dgamma + 20);
        EXPECT_GE(g.workspace, static_cast<size_t>(g.off_dbeta) + 20);
      } else {
        EXPECT_EQ(g.workspace, 0u);
      }
    }
  }
  // Training over a single value per channel: the reference's unbiased
  // variance is 0, cuDNN's would divide by zero; empty inputs too.
  dnn::TypeChoice t;
  ASSERT_TRUE(dnn::type_choice(SPORA_DTYPE_F32, &t));
  for (auto dims : std::vector<std::vector<int64_t>>{{1, 3, 1}, {0, 3, 4}}) {
    for (bool training : {true, false}) {
      Tensor x = make(SPORA_DTYPE_F32, dims), y = make(SPORA_DTYPE_F32, dims), p3 = make(SPORA_DTYPE_F32, {3});
      sp::KernelPlan p;
      std::string why;
      ASSERT_TRUE(ref_plan("batch_norm", {&x, &p3, &p3, &p3, &p3}, {&y, &p3, &p3, &p3, &p3},
                           {bool_attr("training", training)}, &p, &why))
          << why;
      dnn::BnArgs a;
      const bool ok = dnn::bn_args_of(p, t, &a).empty();
      EXPECT_EQ(ok, dims[0] == 1 && !training) << dims[0] << " training " << training;
    }
  }
}

}  // namespace
