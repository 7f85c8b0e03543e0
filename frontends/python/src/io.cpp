// spora._C checkpoint and model-file functions (spora_checkpoint_*,
// spora_model_*): what spora.serialization and nn.GraphCell call.
// Kept in their own file so the tensor/graph binding stays untouched.

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>

#include "common.h"

namespace spora_py {
namespace {

// The concrete handle of a Tensor argument; symbolic tensors (inside jit)
// have none and cannot be saved.
spora_tensor_t* concrete(nb::handle h, const char* what) {
  if (!is_tensor(h))
    raise_type_error(std::string("[") + what + "] expected a Tensor, got " + nb::cast<std::string>(nb::str(h.type())));
  PyTensor* t = as_tensor(h);
  if (t->meta()) raise_meta(*t, what);
  if (!t->t) raise_value_error(std::string("[") + what + "] cannot use a symbolic tensor (inside spora.jit)");
  return t->t.get();
}

struct CheckpointBox {
  spora_checkpoint_t* c = nullptr;
  CheckpointBox() = default;
  CheckpointBox(const CheckpointBox&) = delete;
  CheckpointBox& operator=(const CheckpointBox&) = delete;
  ~CheckpointBox() { spora_checkpoint_close(c); }
};

struct PyModel {
  spora_model_t* m = nullptr;
  spora_device_t* device = nullptr;
  PyModel() = default;
  PyModel(const PyModel&) = delete;
  PyModel& operator=(const PyModel&) = delete;
  ~PyModel() { spora_model_free(m); }
};

nb::tuple shape_tuple(const int64_t* dims, int32_t ndim) {
  nb::list l;
  for (int32_t i = 0; i < ndim; ++i) l.append(dims[i]);
  return nb::tuple(l);
}

}  // namespace

void bind_io(nb::module_& m) {
  m.def(
      "checkpoint_save",
      [](const std::string& path, const std::vector<std::string>& names, const std::vector<nb::handle>& tensors,
         std::optional<std::string> metadata) {
        if (names.size() != tensors.size()) raise_value_error("[save_checkpoint] names and tensors differ in count");
        std::vector<const char*> cnames;
        std::vector<spora_tensor_t*> handles;
        for (size_t i = 0; i < names.size(); ++i) {
          cnames.push_back(names[i].c_str());
          handles.push_back(concrete(tensors[i], "save_checkpoint"));
        }
        spora_status_t s;
        {
          nb::gil_scoped_release unlocked;  // writing and fsync take a while
          s = spora_checkpoint_save(path.c_str(), cnames.data(), handles.data(), handles.size(),
                                    metadata ? metadata->c_str() : nullptr);
        }
        check(s, false);
      },
      nb::arg("path"), nb::arg("names"), nb::arg("tensors"), nb::arg("metadata").none(),
      "Saves named tensors atomically (spora_checkpoint_save).");

  m.def(
      "checkpoint_load",
      [](const std::string& path) {
        // Every tensor is read (and its CRC checked) before anything is
        // returned, so a damaged file never yields a partial dict.
        CheckpointBox box;
        check(spora_checkpoint_open(path.c_str(), &box.c), false);
        size_t n = 0;
        check(spora_checkpoint_count(box.c, &n), false);
        nb::list entries;
        for (size_t i = 0; i < n; ++i) {
          const char* name = nullptr;
          check(spora_checkpoint_entry(box.c, i, &name, nullptr, nullptr, 0, nullptr), false);
          spora_tensor_t* t = nullptr;
          check(spora_checkpoint_read(box.c, name, default_device(), &t), false);
          entries.append(nb::make_tuple(std::string(name), wrap_handle(t)));
        }
        const char* meta = "{}";
        check(spora_checkpoint_metadata(box.c, &meta), false);
        return nb::make_tuple(entries, std::string(meta));
      },
      nb::arg("path"), "[(name, Tensor)] and the metadata JSON of a checkpoint, every tensor CRC-checked.");

  m.def(
      "checkpoint_metadata",
      [](const std::string& path) {
        CheckpointBox box;
        check(spora_checkpoint_open(path.c_str(), &box.c), false);
        const char* meta = "{}";
        check(spora_checkpoint_metadata(box.c, &meta), false);
        return std::string(meta);
      },
      nb::arg("path"));

  m.def(
      "model_save",
      [](const std::string& path, const std::string& graph_json, const std::vector<nb::handle>& weights) {
        spora_graph_t* g = nullptr;
        check(spora_graph_from_json(graph_json.data(), graph_json.size(), &g), false);
        GraphBox box(g);
        std::vector<spora_tensor_t*> handles;
        for (auto w : weights) handles.push_back(concrete(w, "export"));
        check(spora_model_save(path.c_str(), g, handles.data(), handles.size()), false);
      },
      nb::arg("path"), nb::arg("graph_json"), nb::arg("weights"),
      "Saves a graph (as JSON) with its weights in creation order (spora_model_save).");

  m.def(
      "model_export_onnx",
      [](const std::string& path, const std::string& graph_json, const std::vector<nb::handle>& weights,
         bool dynamic_batch) {
        spora_graph_t* g = nullptr;
        check(spora_graph_from_json(graph_json.data(), graph_json.size(), &g), false);
        GraphBox box(g);
        std::vector<spora_tensor_t*> handles;
        for (auto w : weights) handles.push_back(concrete(w, "export"));
        check(spora_model_export_onnx(path.c_str(), g, handles.data(), handles.size(),
                                      dynamic_batch ? SPORA_ONNX_DYNAMIC_BATCH : 0u),
              false);
      },
      nb::arg("path"), nb::arg("graph_json"), nb::arg("weights"), nb::arg("dynamic_batch") = false,
      "Writes a graph (as JSON) with its weights as an ONNX file (spora_model_export_onnx).");

  nb::class_<PyModel>(m, "Model", "A model file loaded through spora_model_load.")
      .def(
          "__init__",
          [](PyModel* self, const std::string& path, std::optional<std::string> device) {
            new (self) PyModel();
            self->device = device ? find_device(*device) : default_device();
            check(spora_model_load(path.c_str(), self->device, &self->m), false);
          },
          nb::arg("path"), nb::arg("device").none() = nb::none())
      .def("inputs",
           [](PyModel& self) {
             size_t n = 0;
             check(spora_model_num_inputs(self.m, &n), false);
             nb::list out;
             for (size_t i = 0; i < n; ++i) {
               spora_dtype_t dt = SPORA_DTYPE_INVALID;
               int64_t dims[SPORA_MAX_NDIM] = {};
               int32_t nd = 0;
               const char* name = nullptr;
               check(spora_model_input_type(self.m, i, &dt, dims, SPORA_MAX_NDIM, &nd), false);
               check(spora_model_input_name(self.m, i, &name), false);
               out.append(nb::make_tuple(std::string(name), dtype_object(dt), shape_tuple(dims, nd)));
             }
             return out;
           })
      .def("num_outputs",
           [](PyModel& self) {
             size_t n = 0;
             check(spora_model_num_outputs(self.m, &n), false);
             return n;
           })
      .def("run", [](PyModel& self, const std::vector<nb::handle>& inputs) {
        std::vector<spora_tensor_t*> in;
        for (auto h : inputs) in.push_back(concrete(h, "GraphCell"));
        size_t n = 0;
        check(spora_model_num_outputs(self.m, &n), false);
        std::vector<spora_tensor_t*> out(n, nullptr);
        spora_status_t s;
        {
          nb::gil_scoped_release unlocked;
          s = spora_model_run(self.m, in.data(), in.size(), out.data(), n);
        }
        check(s);
        nb::list res;
        for (auto* t : out) res.append(wrap_handle(t));
        return res;
      });
}

}  // namespace spora_py
