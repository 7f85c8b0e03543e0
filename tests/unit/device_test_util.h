// Helpers shared by the C++ tests that run graphs on devices: the plugins
// of this build, tensors from host vectors and back.
#pragma once
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "ir_test_util.h"
#include "runtime/context.h"
#include "runtime/device.h"
#include "runtime/tensor.h"

namespace spora {

// One context over this build's plugin directory, for the whole process.
inline Context& test_context() {
  static Context* c = [] {
    auto* c = new Context;
    c->add_plugin_path(SPORA_TEST_PLUGIN_DIR);
    return c;
  }();
  return *c;
}
inline Device* device(const char* name) { return test_context().find_device(name); }

inline Tensor f32_tensor(Device* d, const Shape& s, const std::vector<float>& v) {
  return tensor_from_host(d, SPORA_DTYPE_F32, s, v.data(), v.size() * sizeof(float));
}

// Deterministic normal values for a shape.
inline std::vector<float> normal_values(const Shape& s, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> v(static_cast<size_t>(s.numel()));
  for (float& x : v) x = nd(rng);
  return v;
}

template <class T = float>
std::vector<T> read(const Tensor& t) {
  std::vector<T> v(static_cast<size_t>(t.shape.numel()));
  tensor_read(t, v.data(), v.size() * sizeof(T));
  return v;
}

inline std::vector<const Tensor*> ptrs(const std::vector<Tensor>& ts) {
  std::vector<const Tensor*> p;
  for (const Tensor& t : ts) p.push_back(&t);
  return p;
}

}  // namespace spora
