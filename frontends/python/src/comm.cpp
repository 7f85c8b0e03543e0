// spora._C.Comm: a communicator (spora_comm_*) for spora.communication.
// Calls release the GIL: they wait for the other ranks, and a thread of
// this process may need to abort them meanwhile.
#include <optional>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "common.h"

namespace spora_py {

namespace {

struct PyComm {
  spora_communicator_t* c = nullptr;
  std::string backend;
  ~PyComm() { spora_comm_free(c); }
};

spora_tensor_t* concrete(nb::handle h, const char* what) {
  if (!is_tensor(h)) raise_type_error(std::string("[communication] ") + what + " must be a Tensor");
  PyTensor* p = as_tensor(h);
  if (!p->t) raise_untraceable(*p, "a collective outside a jit graph");
  return p->t.get();
}

spora_reduce_op_t op_from(const std::string& op) {
  if (op == "sum") return SPORA_REDUCE_SUM;
  if (op == "prod") return SPORA_REDUCE_PROD;
  if (op == "max") return SPORA_REDUCE_MAX;
  if (op == "min") return SPORA_REDUCE_MIN;
  if (op == "mean" || op == "avg") return SPORA_REDUCE_AVG;
  raise_value_error("[communication] unknown reduce op '" + op + "'; expected sum, prod, max, min or mean");
}

PyComm& live(PyComm& c) {
  if (!c.c) raise_value_error("[communication] the communicator was released; call spora.communication.init()");
  return c;
}

template <class F>
void call(F&& f) {
  spora_status_t s;
  {
    nb::gil_scoped_release nogil;
    s = f();
  }
  check(s);
}

}  // namespace

void bind_comm(nb::module_& m) {
  m.def(
      "comm_overlap_stats",
      [](bool reset) {
        int64_t busy = 0, exposed = 0;
        check(spora_comm_overlap_stats(&busy, &exposed, reset ? 1 : 0));
        return nb::make_tuple(busy, exposed);
      },
      nb::arg("reset") = false);
  nb::class_<PyComm>(m, "Comm", "A communicator over a collective backend (spora_communicator_t).")
      .def(
          "__init__",
          [](PyComm* self, const std::string& backend, int32_t rank, int32_t size, std::optional<std::string> device) {
            new (self) PyComm();
            self->backend = backend;
            spora_context_t* ctx = context();
            spora_device_t* dev = device ? find_device(*device) : nullptr;
            call([&] { return spora_comm_create_on_device(ctx, backend.c_str(), dev, rank, size, &self->c); });
          },
          nb::arg("backend"), nb::arg("rank") = -1, nb::arg("size") = -1, nb::arg("device") = nb::none())
      .def_prop_ro("device", [](PyComm& c) -> std::optional<std::string> {
        spora_device_t* d = nullptr;
        check(spora_comm_device(live(c).c, &d));
        if (!d) return std::nullopt;
        return std::string(device_name(d));
      })
      .def_prop_ro("rank", [](PyComm& c) {
        int32_t r = 0;
        check(spora_comm_rank(live(c).c, &r, nullptr));
        return r;
      })
      .def_prop_ro("size", [](PyComm& c) {
        int32_t s = 0;
        check(spora_comm_rank(live(c).c, nullptr, &s));
        return s;
      })
      .def_prop_ro("id", [](PyComm& c) {
        int64_t i = 0;
        check(spora_comm_id(live(c).c, &i));
        return i;
      })
      .def_ro("backend", &PyComm::backend)
      .def(
          "split",
          [](PyComm& c, int32_t color, int32_t key) {
            // Collective: the ranks of one color form a communicator, ordered by key.
            auto* out = new PyComm();
            out->backend = c.backend;
            spora_communicator_t* parent = live(c).c;
            try {
              call([&] { return spora_comm_split(parent, color, key, &out->c); });
            } catch (...) {
              delete out;
              throw;
            }
            return out;
          },
          nb::arg("color"), nb::arg("key"), nb::rv_policy::take_ownership)
      .def("set_timeout", [](PyComm& c, int64_t ms) { check(spora_comm_set_timeout(live(c).c, ms)); })
      .def("abort", [](PyComm& c) { check(spora_comm_abort(live(c).c)); })
      .def("release", [](PyComm& c) {
        spora_comm_free(c.c);
        c.c = nullptr;
      })
      .def("all_reduce",
           [](PyComm& c, nb::handle x, nb::handle out, const std::string& op) {
             spora_tensor_t *i = concrete(x, "input"), *o = concrete(out, "output");
             const spora_reduce_op_t r = op_from(op);
             call([&] { return spora_comm_all_reduce(live(c).c, i, o, r); });
           })
      .def("all_gather",
           [](PyComm& c, nb::handle x, nb::handle out) {
             spora_tensor_t *i = concrete(x, "input"), *o = concrete(out, "output");
             call([&] { return spora_comm_all_gather(live(c).c, i, o); });
           })
      .def("reduce_scatter",
           [](PyComm& c, nb::handle x, nb::handle out, const std::string& op) {
             spora_tensor_t *i = concrete(x, "input"), *o = concrete(out, "output");
             const spora_reduce_op_t r = op_from(op);
             call([&] { return spora_comm_reduce_scatter(live(c).c, i, o, r); });
           })
      .def("broadcast",
           [](PyComm& c, nb::handle x, int32_t root) {
             spora_tensor_t* t = concrete(x, "tensor");
             call([&] { return spora_comm_broadcast(live(c).c, t, root); });
           })
      .def("send",
           [](PyComm& c, nb::handle x, int32_t peer) {
             spora_tensor_t* t = concrete(x, "tensor");
             call([&] { return spora_comm_send(live(c).c, t, peer); });
           })
      .def("recv",
           [](PyComm& c, nb::handle out, int32_t peer) {
             spora_tensor_t* t = concrete(out, "output");
             call([&] { return spora_comm_recv(live(c).c, t, peer); });
           })
      .def("barrier", [](PyComm& c) { call([&] { return spora_comm_barrier(live(c).c); }); });
}

}  // namespace spora_py
