#include "runtime/observer.h"

#include "support/error.h"

namespace spora {

namespace observer_detail {

std::atomic<int64_t> registered{0};

namespace {
// Trivially destructible thread-locals: an observer that unregisters from
// its own thread-local destructor (the tape's stack does) must still find
// them.
thread_local OpObserver* tl_observers[kMaxThreadObservers] = {};
thread_local int tl_count = 0;
thread_local int tl_paused = 0;
}  // namespace

bool thread_observing() { return tl_count != 0 && tl_paused == 0; }

}  // namespace observer_detail

using namespace observer_detail;

void add_thread_observer(OpObserver* o) {
  for (int i = 0; i < tl_count; ++i)
    if (tl_observers[i] == o) fail(Code::kInternal, "[observer] already registered on this thread");
  if (tl_count == kMaxThreadObservers)
    fail(Code::kInternal, "[observer] more than {} observers on one thread", kMaxThreadObservers);
  tl_observers[tl_count++] = o;
  registered.fetch_add(1, std::memory_order_relaxed);
}

void remove_thread_observer(OpObserver* o) {
  for (int i = 0; i < tl_count; ++i)
    if (tl_observers[i] == o) {
      for (int j = i + 1; j < tl_count; ++j) tl_observers[j - 1] = tl_observers[j];
      tl_observers[--tl_count] = nullptr;
      registered.fetch_sub(1, std::memory_order_relaxed);
      return;
    }
}

namespace {
// The observers registered now: a notification goes to these even if one
// of them changes the registrations.
int snapshot(OpObserver** out) {
  for (int i = 0; i < tl_count; ++i) out[i] = tl_observers[i];
  return tl_count;
}
}  // namespace

void notify_op(const OpDef& op, const Tensor* const* inputs, int num_inputs, const Attrs& attrs,
               const Tensor* outputs, int num_outputs, const char* file, int32_t line) {
  if (tl_paused) return;
  OpObserver* obs[kMaxThreadObservers];
  const int n = snapshot(obs);
  for (int i = 0; i < n; ++i) obs[i]->on_op(op, inputs, num_inputs, attrs, outputs, num_outputs, file, line);
}

void notify_constant(const ir::Node& node, const Tensor& value) {
  if (tl_paused) return;
  OpObserver* obs[kMaxThreadObservers];
  const int n = snapshot(obs);
  for (int i = 0; i < n; ++i) obs[i]->on_constant(node, value);
}

bool observers_keep_values() {
  for (int i = 0; i < tl_count; ++i)
    if (tl_observers[i]->keeps_values()) return true;
  return false;
}

ObserversPaused::ObserversPaused() { ++tl_paused; }
ObserversPaused::~ObserversPaused() { --tl_paused; }

}  // namespace spora
