// Built-in per-sample transforms that map() runs in C++ workers.
//
// Images are HWC (channels last) or HW (one channel), as MindSpore's vision
// ops take them; HWC2CHW is the step that makes them CHW for a conv net.
// Random transforms draw from Philox keyed by (seed, stream, sample index),
// where the stream names the epoch, the map node and the op's position in
// it: a sample's augmentation never depends on which worker ran it.
#pragma once
#include <memory>
#include <string>

#include "data/column.h"
#include "ir/attrs.h"

namespace spora::data {

struct RandomKey {
  uint64_t seed = 0;
  uint64_t stream = 0;
  uint64_t index = 0;
};

class Transform {
 public:
  virtual ~Transform() = default;
  virtual const char* name() const = 0;
  // `in` is one column of one sample. Fails (kInvalidArgument, message
  // naming the transform) on a dtype or shape it cannot take.
  virtual Column apply(const Column& in, const RandomKey& key) const = 0;
};

using TransformPtr = std::shared_ptr<const Transform>;

// Builds a transform from its name and attributes:
//   type_cast       dtype (string: "f32", "i32", ...)
//   rescale         rescale (float), shift (float, default 0): x * rescale + shift, as f32
//   normalize       mean, std (floats, one per channel or one for all), is_hwc (bool, default true)
//   one_hot         num_classes (int): a scalar integer label -> (num_classes,) of its dtype
//   hwc2chw         (none)
//   decode          (none): encoded JPEG/PNG bytes (1-D uint8) -> HWC uint8 RGB
//   random_horizontal_flip   prob (float, default 0.5)
//   random_crop     size (ints: [h, w] or [s]), padding (ints: [] / [p] / [lr, tb] / [l, t, r, b]),
//                   fill_value (int, default 0)
// Unknown names are kNotFound; bad attributes kInvalidArgument.
TransformPtr make_transform(const std::string& name, const Attrs& attrs);

// `in` converted to `dtype` (float -> integer truncates toward zero, as
// numpy's astype does for in-range values). Same-type is a copy.
Column cast_column(const Column& in, DType dtype, const char* who);

// Factories of the two transform families (transforms_basic.cpp,
// transforms_random.cpp); make_transform dispatches to them.
TransformPtr make_basic_transform(const std::string& name, const Attrs& attrs);
TransformPtr make_random_transform(const std::string& name, const Attrs& attrs);

// Attribute helpers shared by both families.
double attr_float(const Attrs& a, const char* op, const char* name, double dflt, bool required);
std::vector<int64_t> attr_ints(const Attrs& a, const char* op, const char* name);
std::vector<double> attr_floats(const Attrs& a, const char* op, const char* name);

}  // namespace spora::data
