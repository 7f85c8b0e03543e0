// Graphs, traces and executables (spora._C.Graph / Trace / Executable):
// what spora.jit and spora.grad build on.
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>

#include "common.h"

namespace spora_py {

void push_trace(TraceRef t);
void pop_trace(const Trace* t);

namespace {

struct PyGraph {
  std::shared_ptr<GraphBox> box;
  spora_graph_t* g() const { return box->g; }
};

struct PyExecutable {
  spora_executable_t* e = nullptr;
  size_t num_outputs = 0;
  ~PyExecutable() { spora_executable_free(e); }
};

std::vector<int64_t> dims_of(nb::handle shape) {
  std::vector<int64_t> d;
  for (nb::handle x : nb::iter(shape)) d.push_back(nb::cast<int64_t>(x));
  return d;
}

std::vector<spora_tensor_t*> handles_of(const std::vector<nb::handle>& ts) {
  std::vector<spora_tensor_t*> hs;
  for (nb::handle h : ts) {
    if (!is_tensor(h)) raise_type_error("[graph] expected Tensor arguments");
    PyTensor* p = as_tensor(h);
    if (!p->t) raise_untraceable(*p, "running a graph");
    hs.push_back(p->t.get());
  }
  return hs;
}

nb::list wrap_all(std::vector<spora_tensor_t*>& outs) {
  nb::list res;
  for (auto*& t : outs) {
    res.append(wrap_handle(t));
    t = nullptr;
  }
  return res;
}

void free_all(std::vector<spora_tensor_t*>& outs) {
  for (auto* t : outs) spora_tensor_free(t);
}

size_t graph_num_outputs(spora_graph_t* g) {
  size_t n = 0;
  check(spora_graph_outputs(g, nullptr, 0, &n), false);
  return n;
}

// A symbolic tensor for value `v` of trace `tr`.
nb::object make_symbolic(const TraceRef& tr, spora_value_t v) {
  PyTensor t;
  t.trace = tr;
  t.value = v;
  int64_t dims[SPORA_MAX_NDIM];
  check(spora_graph_value_type(tr->graph->g, v, &t.dtype, dims, SPORA_MAX_NDIM, &t.ndim), false);
  std::memcpy(t.shape, dims, sizeof(int64_t) * static_cast<size_t>(t.ndim));
  return wrap(std::move(t));
}

}  // namespace

void bind_graph(nb::module_& m) {
  nb::class_<PyGraph>(m, "Graph", "A graph (spora_graph_t).")
      .def("__init__",
           [](PyGraph* self, const std::string& name) {
             spora_graph_t* g = nullptr;
             check(spora_graph_create(name.c_str(), &g), false);
             new (self) PyGraph{std::make_shared<GraphBox>(g)};
           },
           nb::arg("name") = "main")
      .def("add_input",
           [](PyGraph& g, const std::string& name, nb::handle dtype, nb::handle shape) {
             auto d = dims_of(shape);
             spora_value_t v;
             check(spora_graph_add_input(g.g(), name.c_str(), dtype_from(dtype), d.data(),
                                         static_cast<int32_t>(d.size()), &v));
             return v;
           })
      .def("add_weight",
           [](PyGraph& g, const std::string& name, nb::handle dtype, nb::handle shape) {
             auto d = dims_of(shape);
             spora_value_t v;
             check(spora_graph_add_weight(g.g(), name.c_str(), dtype_from(dtype), d.data(),
                                          static_cast<int32_t>(d.size()), &v));
             return v;
           })
      .def("add_constant",
           [](PyGraph& g, nb::handle t) {
             PyTensor* p = as_tensor(t);
             if (!p->t) raise_untraceable(*p, "a constant");
             spora_value_t v;
             check(spora_graph_add_constant(g.g(), p->t.get(), &v));
             return v;
           })
      .def("set_outputs",
           [](PyGraph& g, const std::vector<spora_value_t>& vs) {
             check(spora_graph_set_outputs(g.g(), vs.data(), vs.size()), false);
           })
      .def("outputs",
           [](PyGraph& g) {
             size_t n = graph_num_outputs(g.g());
             std::vector<spora_value_t> v(n);
             check(spora_graph_outputs(g.g(), v.data(), n, &n), false);
             return v;
           })
      .def("value_type",
           [](PyGraph& g, spora_value_t v) {
             spora_dtype_t d;
             int64_t dims[SPORA_MAX_NDIM];
             int32_t nd = 0;
             check(spora_graph_value_type(g.g(), v, &d, dims, SPORA_MAX_NDIM, &nd), false);
             return nb::make_tuple(dtype_object(d), std::vector<int64_t>(dims, dims + nd));
           })
      .def("grad",
           [](PyGraph& g, const std::vector<spora_value_t>& wrt, size_t output) {
             spora_graph_t* out = nullptr;
             check(spora_graph_grad(g.g(), wrt.data(), wrt.size(), output, &out));
             return PyGraph{std::make_shared<GraphBox>(out)};
           },
           nb::arg("wrt"), nb::arg("output") = 0)
      .def("inline",
           [](PyGraph& g, const PyGraph& sub, const std::vector<spora_value_t>& args) {
             std::vector<spora_value_t> out(graph_num_outputs(sub.g()) + 1);
             size_t n = 0;
             check(spora_graph_inline(g.g(), sub.g(), args.data(), args.size(), out.data(), out.size(), &n));
             out.resize(n);
             return out;
           })
      .def("optimize", [](PyGraph& g, int level) { check(spora_graph_optimize(g.g(), level), false); })
      .def("run_pass", [](PyGraph& g, const std::string& name) { check(spora_graph_run_pass(g.g(), name.c_str()), false); })
      .def("num_nodes",
           [](PyGraph& g) {
             int64_t n = 0;
             check(spora_graph_num_nodes(g.g(), &n), false);
             return n;
           })
      .def(
          "mark_recompute",
          [](PyGraph& g, int64_t first, int64_t end, int64_t mark) {
            int64_t marked = 0;
            check(spora_graph_mark_recompute(g.g(), first, end, mark, &marked), false);
            return marked;
          },
          nb::arg("first"), nb::arg("end"), nb::arg("mark"),
          "Marks the op nodes in [first, end) without a recompute mark yet (spora_graph_mark_recompute).")
      .def("partition",
           [](PyGraph& g, const std::string& options) {
             const char* report = nullptr;
             check(spora_graph_partition(g.g(), options.c_str(), &report), false);
             return std::string(report);
           })
      .def(
          "pipeline_stage",
          [](PyGraph& g, int32_t stages, int32_t stage, const std::vector<int64_t>& marks) {
            if (marks.size() % 3 != 0) raise_type_error("[graph] pipeline_stage: marks are (first, end, stage) triples");
            spora_graph_t *f = nullptr, *b = nullptr;
            const char* report = nullptr;
            check(spora_graph_pipeline_stage(g.g(), stages, stage, marks.data(), marks.size() / 3, &f, &b, &report),
                  false);
            PyGraph fg{std::make_shared<GraphBox>(f)}, bg{std::make_shared<GraphBox>(b)};
            return nb::make_tuple(fg, bg, std::string(report));
          },
          nb::arg("stages"), nb::arg("stage"), nb::arg("marks"),
          "(forward, backward, report JSON) of one pipeline stage (spora_graph_pipeline_stage); marks: flat "
          "(first, end, stage) triples.")
      .def("text",
           [](PyGraph& g) {
             const char* s = nullptr;
             check(spora_graph_to_text(g.g(), &s), false);
             return std::string(s);
           })
      .def("json",
           [](PyGraph& g) {
             const char* s = nullptr;
             check(spora_graph_to_json(g.g(), &s), false);
             return std::string(s);
           })
      .def_static("from_json",
                  [](const std::string& text) {
                    spora_graph_t* g = nullptr;
                    check(spora_graph_from_json(text.data(), text.size(), &g), false);
                    return PyGraph{std::make_shared<GraphBox>(g)};
                  })
      .def("copy",
           [](PyGraph& g) {
             // Through JSON: the C API has no clone, and JSON is lossless.
             const char* s = nullptr;
             check(spora_graph_to_json(g.g(), &s), false);
             spora_graph_t* c = nullptr;
             check(spora_graph_from_json(s, std::strlen(s), &c), false);
             return PyGraph{std::make_shared<GraphBox>(c)};
           })
      .def("compile",
           [](PyGraph& g, const std::string& device) {
             spora_device_t* d = find_device(device);
             auto* e = new PyExecutable();
             e->num_outputs = graph_num_outputs(g.g());
             const spora_status_t s = spora_graph_compile(g.g(), d, &e->e);
             if (s != SPORA_OK) {
               delete e;
               raise_status(s, false);
             }
             return e;
           },
           nb::rv_policy::take_ownership)
      .def("run_eager", [](PyGraph& g, const std::string& device, const std::vector<nb::handle>& params) {
        spora_device_t* d = find_device(device);
        auto hs = handles_of(params);
        std::vector<spora_tensor_t*> outs(graph_num_outputs(g.g()), nullptr);
        spora_status_t s;
        {
          nb::gil_scoped_release nogil;
          s = spora_graph_run_eager(g.g(), d, hs.data(), hs.size(), outs.data(), outs.size());
        }
        if (s != SPORA_OK) raise_status(s, false);
        return wrap_all(outs);
      });

  nb::class_<PyExecutable>(m, "Executable", "A compiled graph (spora_executable_t).")
      .def_ro("num_outputs", &PyExecutable::num_outputs)
      .def(
          "run",
          [](PyExecutable& e, const std::vector<nb::handle>& params, const std::vector<int64_t>& donate) {
            auto hs = handles_of(params);
            if (!donate.empty() && donate.size() != e.num_outputs)
              raise_value_error("[Executable.run] donate has " + std::to_string(donate.size()) +
                                " entries, the graph has " + std::to_string(e.num_outputs) + " outputs");
            // A handle shared with another Python tensor (a detached copy,
            // a DLPack export) must keep its value: not donated.
            std::vector<int64_t> d = donate;
            for (int64_t& j : d) {
              const size_t k = static_cast<size_t>(j);
              if (j >= 0 && k < params.size() && as_tensor(params[k])->t.use_count() != 1) j = -1;
            }
            std::vector<spora_tensor_t*> outs(e.num_outputs, nullptr);
            spora_status_t s;
            {
              nb::gil_scoped_release nogil;
              s = spora_executable_run_donating(e.e, hs.data(), hs.size(), d.empty() ? nullptr : d.data(), outs.data(),
                                                 outs.size());
            }
            if (s != SPORA_OK) {
              free_all(outs);
              raise_status(s, true);
            }
            return wrap_all(outs);
          },
          nb::arg("params"), nb::arg("donate") = std::vector<int64_t>(),
          "Runs the plan; donate (per output, a params position or -1) lets updated state overwrite its old value.")
      .def("memory", [](PyExecutable& e) {
        uint64_t p = 0, n = 0;
        check(spora_executable_memory(e.e, &p, &n), false);
        return nb::make_tuple(p, n);
      })
      .def("collectives", [](PyExecutable& e) {
        int32_t total = 0, overlapped = 0;
        check(spora_executable_collectives(e.e, &total, &overlapped), false);
        return nb::make_tuple(total, overlapped);
      }, "(collective steps, those overlapping the kernels after them)");

  nb::class_<Trace>(m, "Trace", "A graph being recorded by running Python code.")
      .def("__init__",
           [](Trace* self, PyGraph& g, const std::string& device, nb::object lift, nb::object state) {
             new (self) Trace();
             self->graph = g.box;
             self->device = find_device(device);
             self->lift = std::move(lift);
             self->state = std::move(state);
           })
      .def_prop_ro("graph", [](Trace& t) { return PyGraph{t.graph}; })
      .def_ro("closed", &Trace::closed)
      .def_ro("untraceable", &Trace::untraceable)
      .def_prop_ro("state", [](Trace& t) { return t.state.is_valid() ? t.state : nb::none(); })
      .def_prop_ro("device", [](Trace& t) { return std::string(device_name(t.device)); })
      .def("close", [](Trace& t) {
        t.closed = true;
        // Breaks the trace -> state -> (lifter, memo tensors) -> trace cycle,
        // which runs through C++ and so is invisible to Python's collector.
        t.lift = nb::object();
        t.state = nb::object();
      });

  m.def("push_trace", [](std::shared_ptr<Trace> t) { push_trace(std::move(t)); });
  m.def("pop_trace", [](std::shared_ptr<Trace> t) { pop_trace(t.get()); });
  m.def("current_trace", []() -> nb::object {
    Trace* t = current_trace();
    if (!t) return nb::none();
    return nb::cast(t, nb::rv_policy::reference);
  });
  m.def("symbolic",
        [](std::shared_ptr<Trace> t, spora_value_t v) { return make_symbolic(t, v); }, nb::arg("trace"),
        nb::arg("value"),
        "A tensor standing for value `value` of the trace.");
  m.def("value_of",
        [](nb::handle t, std::shared_ptr<Trace> tr) -> nb::object {
          // The tensor's value id in `tr` if it was recorded there, else None.
          PyTensor* p = as_tensor(t);
          if (p->trace && p->trace.get() == tr.get()) return nb::cast(p->value);
          return nb::none();
        });
  m.def("trace_of", [](nb::handle t) -> nb::object {
    PyTensor* p = as_tensor(t);
    if (!p->live_symbolic()) return nb::none();
    return nb::cast(p->trace);
  });
}

}  // namespace spora_py
