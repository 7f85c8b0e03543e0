// spora._C.Tape: the eager tape (spora_tape_*), which spora.grad uses in
// PyNative mode. Eager ops record themselves on every started tape inside
// the core, so the per-op path of the binding does not change.
#include <nanobind/stl/vector.h>

#include "common.h"

namespace spora_py {

namespace {

struct PyTape {
  spora_tape_t* t = nullptr;
  PyTape() { check(spora_tape_create(&t), false); }
  ~PyTape() { spora_tape_free(t); }
  PyTape(const PyTape&) = delete;
  PyTape& operator=(const PyTape&) = delete;
};

spora_tensor_t* handle_of(nb::handle h, const char* what) {
  if (!is_tensor(h)) raise_type_error(std::string("[grad] ") + what + " must be a Tensor");
  PyTensor* p = as_tensor(h);
  if (!p->t) raise_untraceable(*p, "the eager tape");
  return p->t.get();
}

}  // namespace

void bind_tape(nb::module_& m) {
  nb::class_<PyTape>(m, "Tape", "The eager tape (spora_tape_t): records eager ops for their gradients.")
      .def(nb::init<>())
      .def("start", [](PyTape& t) { check(spora_tape_start(t.t), false); })
      .def("stop", [](PyTape& t) { check(spora_tape_stop(t.t), false); })
      .def("watch", [](PyTape& t, nb::handle x) { check(spora_tape_watch(t.t, handle_of(x, "a source"))); })
      .def(
          "gradient",
          [](PyTape& t, nb::handle target, const std::vector<nb::handle>& sources, nb::handle sens) {
            std::vector<const spora_tensor_t*> src;
            for (nb::handle s : sources) src.push_back(handle_of(s, "a source"));
            std::vector<spora_tensor_t*> grads(src.size(), nullptr);
            const spora_tensor_t* sn = sens.is_none() ? nullptr : handle_of(sens, "sens");
            const spora_tensor_t* tg = handle_of(target, "the target");
            spora_status_t s;
            {
              nb::gil_scoped_release nogil;
              s = spora_tape_gradient(t.t, tg, sn, src.data(), src.size(), grads.data());
            }
            if (s != SPORA_OK) raise_status(s, true);
            nb::list out;
            for (auto* g : grads) out.append(wrap_handle(g));
            return out;
          },
          nb::arg("target"), nb::arg("sources"), nb::arg("sens").none() = nb::none(),
          "d target / d sources (the gradient of sum(target) without sens), from the recorded ops.");
}

}  // namespace spora_py
