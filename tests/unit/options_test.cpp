// Process-wide options (runtime/options.h): matmul_precision reaches the
// kernels of the matmul family, and only those, as the attribute
// "matmul_precision", and conv_precision the convolutions' as
// "conv_precision"; each keys the kernel cache; cpu and sim accept them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "device_test_util.h"
#include "runtime/options.h"
#include "support/error.h"

namespace spora {
namespace {

// Back to the default whatever a test does.
struct PrecisionGuard {
  ~PrecisionGuard() {
    set_option("matmul_precision", "highest");
    set_option("conv_precision", "highest");
  }
};

OpCall call_of(const char* op, std::vector<TensorMeta> in, const Attrs& attrs = {}) {
  OpCall call;
  infer_call(*OpRegistry::get().find(op), in.data(), static_cast<int>(in.size()), attrs, call);
  return call;
}

TEST(Options, MatmulPrecisionReachesMatmulFamilyKernels) {
  PrecisionGuard guard;
  EXPECT_STREQ(get_option("matmul_precision"), "highest");
  const OpDef& mm = *OpRegistry::get().find("matmul");
  const OpDef& lin = *OpRegistry::get().find("linear");
  const OpDef& add = *OpRegistry::get().find("add");
  const OpCall mm_call = call_of("matmul", {{SPORA_DTYPE_F32, S({2, 3})}, {SPORA_DTYPE_F32, S({3, 4})}});
  const OpCall lin_call =
      call_of("linear", {{SPORA_DTYPE_F32, S({2, 3})}, {SPORA_DTYPE_F32, S({4, 3})}, {SPORA_DTYPE_F32, S({4})}});
  const OpCall add_call = call_of("add", {{SPORA_DTYPE_F32, S({2, 3})}, {SPORA_DTYPE_F32, S({2, 3})}});
  for (const char* name : {"cpu", "sim"}) {
    Device* d = device(name);
    const KernelRef plain = d->kernel(mm, mm_call), plain_lin = d->kernel(lin, lin_call);
    EXPECT_EQ(plain->attrs.find("matmul_precision"), nullptr) << name << ": the default adds nothing";
    EXPECT_EQ(plain_lin->attrs.find("matmul_precision"), nullptr) << name;
    for (const char* p : {"high", "medium"}) {
      set_option("matmul_precision", p);
      EXPECT_STREQ(get_option("matmul_precision"), p);
      struct Case {
        const OpDef* op;
        const OpCall* call;
        const KernelEntry* plain;
      };
      for (const Case& c : {Case{&mm, &mm_call, plain.get()}, Case{&lin, &lin_call, plain_lin.get()}}) {
        const KernelRef k = d->kernel(*c.op, *c.call);  // the plugin accepted the descriptor
        const AttrValue* v = k->attrs.find("matmul_precision");
        ASSERT_NE(v, nullptr) << name << " " << c.op->name << " " << p;
        EXPECT_EQ(v->s, p);
        EXPECT_NE(k.get(), c.plain) << name << " " << c.op->name << ": keyed apart from the default kernel";
      }
      EXPECT_EQ(d->kernel(add, add_call)->attrs.find("matmul_precision"), nullptr) << name << ": add is untouched";
    }
    set_option("matmul_precision", "highest");
    EXPECT_EQ(d->kernel(mm, mm_call).get(), plain.get()) << name << ": the default kernel again, from the cache";
  }
}

TEST(Options, ConvPrecisionReachesConvolutionKernels) {
  PrecisionGuard guard;
  EXPECT_STREQ(get_option("conv_precision"), "highest");
  const TensorMeta x{SPORA_DTYPE_F32, S({1, 2, 5, 5})}, w{SPORA_DTYPE_F32, S({3, 2, 3, 3})},
      y{SPORA_DTYPE_F32, S({1, 3, 3, 3})}, b{SPORA_DTYPE_F32, S({3})};
  Attrs act;
  act.set("activation", AttrValue::of_string("relu"));
  Attrs gin, gw;
  gin.set("input_shape", AttrValue::of_ints({1, 2, 5, 5}));
  gw.set("weight_shape", AttrValue::of_ints({3, 2, 3, 3}));
  struct Conv {
    const char* op;
    OpCall call;
  };
  const std::vector<Conv> convs = {{"conv2d", call_of("conv2d", {x, w})},
                                   {"conv2d_bias", call_of("conv2d_bias", {x, w, b})},
                                   {"conv2d_act", call_of("conv2d_act", {x, w, b}, act)},
                                   {"conv2d_add_act", call_of("conv2d_add_act", {x, w, b, y}, act)},
                                   {"conv2d_grad_input", call_of("conv2d_grad_input", {y, w}, gin)},
                                   {"conv2d_grad_weight", call_of("conv2d_grad_weight", {x, y}, gw)},
                                   {"conv2d_transpose", call_of("conv2d_transpose", {y, w})}};
  const OpDef& mm = *OpRegistry::get().find("matmul");
  const OpCall mm_call = call_of("matmul", {{SPORA_DTYPE_F32, S({2, 3})}, {SPORA_DTYPE_F32, S({3, 4})}});
  for (const char* name : {"cpu", "sim"}) {
    Device* d = device(name);
    // This binary disables conv2d on sim (placement_test.cpp's environment).
    const char* off = std::getenv("SPORA_SIM_DISABLE_OPS");
    const auto skip = [&](const char* op) {
      return std::string(name) == "sim" && off && ("," + std::string(off) + ",").find("," + std::string(op) + ",") !=
                                                       std::string::npos;
    };
    std::vector<KernelRef> plain;
    for (const Conv& c : convs) {
      if (skip(c.op)) {
        plain.emplace_back();
        continue;
      }
      plain.push_back(d->kernel(*OpRegistry::get().find(c.op), c.call));
      EXPECT_EQ(plain.back()->attrs.find("conv_precision"), nullptr) << name << " " << c.op << ": the default adds nothing";
    }
    set_option("conv_precision", "high");
    EXPECT_STREQ(get_option("conv_precision"), "high");
    for (size_t i = 0; i < convs.size(); ++i) {
      if (skip(convs[i].op)) continue;
      const KernelRef k = d->kernel(*OpRegistry::get().find(convs[i].op), convs[i].call);  // accepted
      const AttrValue* v = k->attrs.find("conv_precision");
      ASSERT_NE(v, nullptr) << name << " " << convs[i].op;
      EXPECT_EQ(v->s, "high");
      EXPECT_EQ(k->attrs.find("matmul_precision"), nullptr) << name << " " << convs[i].op;
      EXPECT_NE(k.get(), plain[i].get()) << name << " " << convs[i].op << ": keyed apart from the default kernel";
    }
    const KernelRef m = d->kernel(mm, mm_call);
    EXPECT_EQ(m->attrs.find("conv_precision"), nullptr) << name << ": matmul is untouched";
    EXPECT_EQ(m->attrs.find("matmul_precision"), nullptr) << name;
    // Both options at once: each op family carries its own.
    set_option("matmul_precision", "medium");
    EXPECT_EQ(d->kernel(mm, mm_call)->attrs.find("conv_precision"), nullptr) << name;
    const KernelRef both = d->kernel(*OpRegistry::get().find("conv2d_bias"), convs[1].call);
    EXPECT_EQ(both->attrs.find("matmul_precision"), nullptr) << name;
    ASSERT_NE(both->attrs.find("conv_precision"), nullptr) << name;
    set_option("matmul_precision", "highest");
    set_option("conv_precision", "highest");
    for (size_t i = 0; i < convs.size(); ++i)
      if (!skip(convs[i].op))
        EXPECT_EQ(d->kernel(*OpRegistry::get().find(convs[i].op), convs[i].call).get(), plain[i].get())
          << name << " " << convs[i].op << ": the default kernel again, from the cache";
  }
}

TEST(Options, BadConvPrecisionIsRefused) {
  PrecisionGuard guard;
  set_option("conv_precision", "high");
  for (const char* bad : {"medium", "fast", "", "HIGH"}) {
    try {
      set_option("conv_precision", bad);
      ADD_FAILURE() << "accepted conv_precision=" << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("conv_precision must be \"highest\" or \"high\""), std::string::npos)
          << e.what();
    }
  }
  EXPECT_STREQ(get_option("conv_precision"), "high") << "a refused value changes nothing";
  EXPECT_STREQ(get_option("matmul_precision"), "highest") << "the other option is untouched";
  try {
    set_option("conv_precission", "high");
    ADD_FAILURE() << "accepted an unknown key";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("known: matmul_precision, conv_precision"), std::string::npos) << e.what();
  }
}

TEST(Options, UnknownKeysAndValuesAreRefused) {
  PrecisionGuard guard;
  set_option("matmul_precision", "high");
  for (const char* bad : {"fast", "", "HIGH"}) {
    try {
      set_option("matmul_precision", bad);
      ADD_FAILURE() << "accepted matmul_precision=" << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("\"highest\", \"high\" or \"medium\""), std::string::npos) << e.what();
    }
  }
  EXPECT_STREQ(get_option("matmul_precision"), "high") << "a refused value changes nothing";
  EXPECT_THROW(set_option("matmul_precission", "high"), Error);
  EXPECT_THROW(get_option("tf32"), Error);
}

}  // namespace
}  // namespace spora
