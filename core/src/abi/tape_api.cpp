// C API: the eager tape (runtime/tape.h).
#include "abi/abi.h"
#include "runtime/tape.h"

struct spora_tape {
  // Shared with the thread stacks it is recording on, so that freeing a tape
  // that another thread still has started cannot leave a dangling entry.
  std::shared_ptr<spora::Tape> tape;
};

using spora::Code;
using spora::fail;
using spora::abi::guard;
using spora::abi::need;

namespace {

// The tensors of a handle array, each checked for null (named by position).
std::vector<const spora::Tensor*> tensors_of(const spora_tensor_t* const* handles, size_t n, const char* fn,
                                             const char* what) {
  if (n) need(handles, fn, what);
  std::vector<const spora::Tensor*> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (!handles[i]) fail(Code::kInvalidArgument, "[{}] {}[{}] is null", fn, what, i);
    out.push_back(&handles[i]->t);
  }
  return out;
}

}  // namespace

extern "C" {

spora_status_t spora_tape_create(spora_tape_t** out) {
  return guard([&] {
    need(out, "spora_tape_create", "out");
    *out = new spora_tape{std::make_shared<spora::Tape>()};
  });
}

spora_status_t spora_tape_free(spora_tape_t* tape) {
  return guard([&] {
    if (!tape) return;
    tape->tape->release();
    delete tape;
  });
}

spora_status_t spora_tape_start(spora_tape_t* tape) {
  return guard([&] { spora::Tape::start(need(tape, "spora_tape_start", "tape")->tape); });
}

spora_status_t spora_tape_stop(spora_tape_t* tape) {
  return guard([&] { spora::Tape::stop(need(tape, "spora_tape_stop", "tape")->tape.get()); });
}

spora_status_t spora_tape_watch(spora_tape_t* tape, const spora_tensor_t* tensor) {
  return guard([&] {
    need(tape, "spora_tape_watch", "tape");
    tape->tape->watch(need(tensor, "spora_tape_watch", "tensor")->t);
  });
}

spora_status_t spora_tape_gradient(spora_tape_t* tape, const spora_tensor_t* target, const spora_tensor_t* sens,
                                   const spora_tensor_t* const* sources, size_t num_sources, spora_tensor_t** grads) {
  return guard([&] {
    const char* fn = "spora_tape_gradient";
    need(tape, fn, "tape");
    need(target, fn, "target");
    const std::vector<const spora::Tensor*> src = tensors_of(sources, num_sources, fn, "sources");
    if (num_sources) need(grads, fn, "grads");
    std::vector<spora::Tensor> g = tape->tape->gradient(target->t, sens ? &sens->t : nullptr, src);
    spora::abi::publish(g, grads);
  });
}

spora_status_t spora_tape_graph(spora_tape_t* tape, const spora_tensor_t* const* outputs, size_t num_outputs,
                                spora_graph_t** out) {
  return guard([&] {
    const char* fn = "spora_tape_graph";
    need(tape, fn, "tape");
    need(out, fn, "out");
    const std::vector<const spora::Tensor*> outs = tensors_of(outputs, num_outputs, fn, "outputs");
    *out = new spora_graph{tape->tape->graph(outs), {}};
  });
}

}  // extern "C"
