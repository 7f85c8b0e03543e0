// Process-wide options (runtime/options.h): matmul_precision reaches the
// kernels of the matmul family, and only those, as the attribute
// "matmul_precision", and keys the kernel cache; cpu and sim accept it.
#include <gtest/gtest.h>

#include "device_test_util.h"
#include "runtime/options.h"
#include "support/error.h"

namespace spora {
namespace {

// Back to the default whatever a test does.
struct PrecisionGuard {
  ~PrecisionGuard() { set_option("matmul_precision", "highest"); }
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
