#include "model_io.h"

namespace spora::cli {

std::vector<InputType> input_types(const Model& m) {
  std::vector<InputType> out;
  for (size_t i = 0; i < m.num_inputs(); ++i) {
    auto [d, s] = m.input_type(i);
    out.push_back({m.input_name(i), d, s});
  }
  return out;
}

std::string type_str(spora_dtype_t dtype, const std::vector<int64_t>& shape) {
  std::string s = std::string(spora_dtype_name(dtype)) + " [";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Tensor to_tensor(const Device& device, const NpyArray& a) {
  spora_tensor_t* t = nullptr;
  check(spora_tensor_create(device.get(), a.dtype, a.shape.data(), static_cast<int32_t>(a.shape.size()),
                            a.data.data(), a.data.size(), &t));
  return Tensor(t);
}

NpyArray from_tensor(const Tensor& t) {
  NpyArray a;
  check(spora_tensor_dtype(t.get(), &a.dtype));
  int32_t nd = 0;
  check(spora_tensor_ndim(t.get(), &nd));
  a.shape.resize(static_cast<size_t>(nd));
  check(spora_tensor_shape(t.get(), a.shape.data(), nd));
  size_t n = 0;
  check(spora_tensor_nbytes(t.get(), &n));
  a.data.resize(n);
  check(spora_tensor_read(t.get(), a.data.data(), n));
  return a;
}

std::vector<Tensor> run_model(Model& m, const std::vector<Tensor>& inputs) {
  std::vector<spora_tensor_t*> in;
  for (const Tensor& t : inputs) in.push_back(t.get());
  std::vector<spora_tensor_t*> out(m.num_outputs(), nullptr);
  check(spora_model_run(m.get(), in.data(), in.size(), out.data(), out.size()));
  std::vector<Tensor> result;
  for (auto* t : out) result.emplace_back(t);
  return result;
}

}  // namespace spora::cli
