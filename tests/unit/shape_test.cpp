// Internal shape utilities and op inference (linked against the core's
// static objects).
#include <gtest/gtest.h>

#include "ir/shape.h"
#include "ir_test_util.h"
#include "ir/op.h"
#include "support/error.h"

namespace spora {
namespace {

TEST(Shape, BroadcastsLikeNumpy) {
  EXPECT_EQ(broadcast_shapes(S({2, 3}), S({3}), "add"), S({2, 3}));
  EXPECT_EQ(broadcast_shapes(S({4, 1, 5}), S({3, 1}), "add"), S({4, 3, 5}));
  EXPECT_EQ(broadcast_shapes(S({}), S({2, 2}), "add"), S({2, 2}));
  EXPECT_EQ(broadcast_shapes(S({0, 3}), S({1, 3}), "add"), S({0, 3}));
}

TEST(Shape, BroadcastFailureNamesOpAndShapes) {
  try {
    broadcast_shapes(S({2, 3}), S({4, 3}), "add");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kInvalidArgument);
    EXPECT_STREQ(e.what(), "[add] shapes (2,3) and (4,3) do not broadcast");
  }
}

TEST(Shape, RejectsNegativeAndOverflowingDims) {
  const int64_t neg[] = {2, -1};
  EXPECT_THROW(Shape::from(neg, 2, "t"), Error);
  const int64_t big[] = {int64_t(1) << 40, int64_t(1) << 40};
  EXPECT_THROW(Shape::from(big, 2, "t"), Error);
  EXPECT_THROW(Shape::from(neg, 9, "t"), Error);
}

TEST(Shape, NormalizeAxis) {
  EXPECT_EQ(normalize_axis(-1, 3, "t"), 2);
  EXPECT_EQ(normalize_axis(0, 3, "t"), 0);
  EXPECT_THROW(normalize_axis(3, 3, "t"), Error);
  EXPECT_THROW(normalize_axis(-4, 3, "t"), Error);
}

OpCall infer(const char* op, std::vector<TensorMeta> in, const Attrs& attrs = {}) {
  const OpDef* def = OpRegistry::get().find(op);
  EXPECT_NE(def, nullptr) << op;
  OpCall call;
  infer_call(*def, in.data(), static_cast<int>(in.size()), attrs, call);
  return call;
}

TEST(Inference, MatmulNumpySemantics) {
  const auto f = SPORA_DTYPE_F32;
  EXPECT_EQ(infer("matmul", {{f, S({2, 3})}, {f, S({3, 4})}}).result[0], S({2, 4}));
  EXPECT_EQ(infer("matmul", {{f, S({3})}, {f, S({3, 4})}}).result[0], S({4}));
  EXPECT_EQ(infer("matmul", {{f, S({2, 3})}, {f, S({3})}}).result[0], S({2}));
  EXPECT_EQ(infer("matmul", {{f, S({5, 1, 2, 3})}, {f, S({4, 3, 6})}}).result[0], S({5, 4, 2, 6}));
  Attrs t;
  t.set("transpose_b", AttrValue::of_bool(true));
  EXPECT_EQ(infer("matmul", {{f, S({2, 3})}, {f, S({4, 3})}}, t).result[0], S({2, 4}));
  try {
    infer("matmul", {{f, S({2, 3})}, {f, S({4, 5})}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[matmul] shapes (2,3) and (4,5) do not contract (3 vs 4)");
  }
}

TEST(Inference, ReduceAxesAndKeepdims) {
  const auto f = SPORA_DTYPE_F64;
  Attrs a;
  a.set("axes", AttrValue::of_ints({-1, 0}));
  OpCall c = infer("sum", {{f, S({2, 3, 4})}}, a);
  EXPECT_EQ(c.result[0], S({3}));
  EXPECT_EQ(c.out[0].shape, S({1, 3, 1}));
  EXPECT_EQ(c.attrs.get_ints("axes"), (std::vector<int64_t>{0, 2}));
  a.set("keepdims", AttrValue::of_bool(true));
  EXPECT_EQ(infer("mean", {{f, S({2, 3, 4})}}, a).result[0], S({1, 3, 1}));
  Attrs dup;
  dup.set("axes", AttrValue::of_ints({1, -2}));
  EXPECT_THROW(infer("sum", {{f, S({2, 3, 4})}}, dup), Error);
}

TEST(Inference, AttributeErrorsNameTheOp) {
  const auto f = SPORA_DTYPE_F32;
  Attrs bad;
  bad.set("axis", AttrValue::of_string("last"));
  try {
    infer("softmax", {{f, S({2, 3})}}, bad);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[softmax] attribute 'axis' must be int"), std::string::npos) << e.what();
  }
  Attrs unknown;
  unknown.set("dim", AttrValue::of_int(1));
  EXPECT_THROW(infer("softmax", {{f, S({2, 3})}}, unknown), Error);
  EXPECT_THROW(infer("reshape", {{f, S({2, 3})}}), Error);  // shape is required
  EXPECT_THROW(infer("add", {{f, S({2})}, {SPORA_DTYPE_F64, S({2})}}), Error);
  EXPECT_THROW(infer("exp", {{SPORA_DTYPE_I32, S({2})}}), Error);  // float-only op
}

TEST(Inference, ReshapeInfersOneDim) {
  const auto f = SPORA_DTYPE_F32;
  Attrs a;
  a.set("shape", AttrValue::of_ints({-1, 4}));
  OpCall c = infer("reshape", {{f, S({2, 3, 4})}}, a);
  EXPECT_TRUE(c.view);
  EXPECT_EQ(c.result[0], S({6, 4}));
  a.set("shape", AttrValue::of_ints({5, -1}));
  EXPECT_THROW(infer("reshape", {{f, S({2, 3, 4})}}, a), Error);
}

}  // namespace
}  // namespace spora

namespace spora {
namespace {

// OpDefs are initialised by position: a field added before `cost` once
// turned every cost function into in_place = true. Only elementwise-style
// ops may compute in place, and ops that declared costs keep them.
TEST(Registry, OnlyElementwiseOpsComputeInPlace) {
  for (const char* op : {"matmul", "linear", "conv2d", "conv2d_bias", "max_pool2d", "softmax", "sum", "cross_entropy"}) {
    const OpDef* d = OpRegistry::get().find(op);
    ASSERT_NE(d, nullptr) << op;
    EXPECT_FALSE(d->in_place) << op;
    EXPECT_NE(d->cost, nullptr) << op;
  }
  EXPECT_TRUE(OpRegistry::get().find("add")->in_place);
  EXPECT_TRUE(OpRegistry::get().find("relu")->in_place);
  EXPECT_FALSE(OpRegistry::get().find("cast")->in_place);
}

}  // namespace
}  // namespace spora
