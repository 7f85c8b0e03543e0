// Shared by `spora run`, `spora bench` and `spora ir`: opening a model file
// on a device, and moving tensors between .npy arrays and Spora.
#pragma once
#include <string>
#include <vector>

#include <spora/spora.hpp>

#include "npy.h"

namespace spora::cli {

struct InputType {
  std::string name;
  spora_dtype_t dtype;
  std::vector<int64_t> shape;
};

std::vector<InputType> input_types(const Model& m);
// "f32 [2, 3]"
std::string type_str(spora_dtype_t dtype, const std::vector<int64_t>& shape);
Tensor to_tensor(const Device& device, const NpyArray& a);
NpyArray from_tensor(const Tensor& t);
// Runs the model once; outputs in graph order.
std::vector<Tensor> run_model(Model& m, const std::vector<Tensor>& inputs);

}  // namespace spora::cli
