// The eager tape: eager op calls recorded as the same IR graph mode builds,
// so that eager gradients come from the same autodiff transform
// (value_and_grad) and equal graph-mode gradients.
//
// Recording. Each thread has a stack of recording tapes (Tape::start pushes,
// Tape::stop pops). Every successful eager op on that thread -- an op call
// through the C API, or an op of a graph run eagerly (which includes the
// backward pass of Tape::gradient) -- is appended to every tape on the stack
// as an apply node: op, attributes (validated, defaults filled, exactly as
// Graph::add_op leaves them), input values, output types and the source
// location when the caller gave one. Tensors are keyed by Tensor::id. A
// tensor the tape has not seen before becomes an input node ("x0", "x1",
// ... in first-use order). The tape keeps a reference to every tensor it
// recorded (they share storage with the user's handles), so gradients reuse
// the forward values instead of recomputing them; release() drops them.
//
// How it hears of ops: a thread's stack of tapes is an op observer
// (runtime/observer.h), registered on the thread while the stack is not
// empty. Eager dispatch and the interpreter know only the observer
// interface; cost when nothing records is observing()'s one relaxed load.
//
// Layering: the tape holds Tensors and runs the backward graph through the
// interpreter, so it is runtime, above autodiff (whose value_and_grad it
// uses); nothing in runtime or sched includes it but the C API's tape calls.
//
// Threads. A tape records on the one thread that started it; its methods
// may be called from any thread (each tape has a mutex).
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/graph.h"
#include "runtime/observer.h"
#include "runtime/tensor.h"

namespace spora {

namespace tape_detail {
struct ThreadTapes;
}

class Tape {
 public:
  Tape() = default;
  Tape(const Tape&) = delete;
  Tape& operator=(const Tape&) = delete;

  // Pushes `tape` on the calling thread's stack of recording tapes. Fails if
  // it is already recording (on any thread) or has been released.
  static void start(const std::shared_ptr<Tape>& tape);
  // Pops it; fails unless it is the innermost recording tape of this thread.
  static void stop(const Tape* tape);

  // Marks `t` as a differentiation source. It becomes an input node when an
  // op first uses it (watching does not add a node).
  void watch(const Tensor& t);

  // d target / d sources[i] for each source, as new tensors: the
  // vector-Jacobian product with `sens` (same type as the target), or with
  // ones when `sens` is null. Builds value_and_grad over the recorded
  // graph (with respect to values, so a source may be an intermediate: its
  // gradient is its adjoint) and runs only the backward nodes the gradients
  // need, eagerly, with the recorded forward values bound. A source
  // the target does not depend on gets zeros. Sources and the target must
  // be watched, or produced or used by a recorded op (every tensor a
  // recorded op used is an input of the recorded graph). Errors: a source
  // the tape does not know (named by position), non-float types, a target
  // the tape never saw. The backward ops are recorded on the other
  // tapes recording on this thread (grad of grad), never on this one.
  std::vector<Tensor> gradient(const Tensor& target, const Tensor* sens, const std::vector<const Tensor*>& sources);

  // The recorded graph with `outputs` (tensors produced or used on the tape,
  // or watched) as its outputs.
  ir::Graph graph(const std::vector<const Tensor*>& outputs) const;

  // Drops the graph and every tensor reference, stops recording on the
  // calling thread (a tape left recording on another thread is skipped and
  // dropped there at its next op), and refuses further use.
  void release();

  // Called by the thread's tape stack (an op observer) for each recording tape.
  void add_op(const OpDef& op, const Tensor* const* inputs, int num_inputs, const Attrs& attrs,
              const Tensor* outputs, int num_outputs, const char* file, int32_t line);
  void add_constant(const ir::Node& node, const Tensor& value);

  bool released() const { return released_.load(std::memory_order_acquire); }

 private:
  // The tape value of `t`, adding an input node on first use. mu_ held.
  ir::Value use(const Tensor& t);
  friend struct tape_detail::ThreadTapes;

  mutable std::mutex mu_;
  ir::Graph g_{"tape"};
  std::vector<std::vector<Tensor>> values_;  // per node of g_: its outputs
  std::unordered_map<uint64_t, ir::Value> by_id_;
  std::vector<Tensor> watched_;  // held so a watched tensor's id stays meaningful
  std::unordered_set<uint64_t> watched_ids_;
  int32_t num_inputs_ = 0;
  std::atomic<bool> recording_{false}, released_{false};
};

namespace tape_detail {
// While alive, ops run on this thread are not recorded on `tape`: a tape's
// gradient runs its backward pass under one, so only outer tapes see it.
class NotRecordingOn {
 public:
  explicit NotRecordingOn(const Tape* tape);
  ~NotRecordingOn();
  NotRecordingOn(const NotRecordingOn&) = delete;
  NotRecordingOn& operator=(const NotRecordingOn&) = delete;

 private:
  const Tape* prev_;
};
}  // namespace tape_detail

}  // namespace spora
