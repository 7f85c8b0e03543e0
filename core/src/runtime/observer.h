// Op observers: who hears about each successful eager op and each graph
// constant made eagerly, on the calling thread. The eager tape
// (runtime/tape.h) is one; a profiler or tracer could be another. Runtime
// notifies and knows nothing about what an observer does with it.
//
// Who notifies: the C API's eager op calls (spora_op_call*) and the graph
// interpreter (runtime/interpreter.h: every op and constant of a graph run
// eagerly). An op's eager fallback (fallback.h) runs its decomposition with
// observers paused: observers see the op that was called, not its parts.
//
// Registration is per thread: an observer added on a thread hears only that
// thread's ops, until it is removed there. At most kMaxThreadObservers per
// thread. An observer may remove itself (or add another) from inside a
// notification; the notification in progress still goes to the observers
// registered when it began.
//
// Cost when no thread in the process has an observer: observing() is one
// relaxed load of a process-wide counter.
#pragma once
#include <atomic>
#include <cstdint>

#include "ir/graph.h"
#include "ir/op.h"
#include "runtime/tensor.h"

namespace spora {

class OpObserver {
 public:
  virtual ~OpObserver() = default;
  // After an op ran: its def, inputs, attributes (validated, defaults filled),
  // outputs, and the caller's source location (`file` may be null or empty).
  virtual void on_op(const OpDef& op, const Tensor* const* inputs, int num_inputs, const Attrs& attrs,
                     const Tensor* outputs, int num_outputs, const char* file, int32_t line) = 0;
  // After a graph constant was uploaded for an eager run of its graph.
  virtual void on_constant(const ir::Node& node, const Tensor& value) = 0;
  // True when the observer holds on to the tensors it saw and needs their
  // values kept: eager calls that write into existing tensors
  // (spora_op_call_into) are then refused on this thread.
  virtual bool keeps_values() const { return false; }
};

constexpr int kMaxThreadObservers = 4;

namespace observer_detail {
// (observer, thread) registrations in the process.
extern std::atomic<int64_t> registered;
bool thread_observing();
}  // namespace observer_detail

// True when the calling thread has an observer (and has not paused them).
inline bool observing() {
  return observer_detail::registered.load(std::memory_order_relaxed) != 0 && observer_detail::thread_observing();
}

// Registers / unregisters `o` for the calling thread. Adding one twice, or
// more than kMaxThreadObservers, fails (kInternal); removing an absent one
// does nothing.
void add_thread_observer(OpObserver* o);
void remove_thread_observer(OpObserver* o);

// Tell the calling thread's observers. Call only when observing().
void notify_op(const OpDef& op, const Tensor* const* inputs, int num_inputs, const Attrs& attrs,
               const Tensor* outputs, int num_outputs, const char* file, int32_t line);
void notify_constant(const ir::Node& node, const Tensor& value);
// Whether one of the thread's observers keeps the values it saw.
bool observers_keep_values();

// While alive, the calling thread's observers hear nothing (nests).
class ObserversPaused {
 public:
  ObserversPaused();
  ~ObserversPaused();
  ObserversPaused(const ObserversPaused&) = delete;
  ObserversPaused& operator=(const ObserversPaused&) = delete;
};

}  // namespace spora
