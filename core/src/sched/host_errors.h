// Failures of cpu-placed steps that run from host callbacks (executor.cpp)
// arrive after run_plan has returned. Each belongs to the caller whose run
// queued it: it is kept for the thread that called run_plan and raised by
// that thread's next run of any plan, spora_device_synchronize or
// spora_tensor_read -- never by another thread that happens to run the same
// compiled graph next. An error its thread never collects (the thread
// ended first) is logged when the last callback holding it lets go.
#pragma once
#include <memory>

#include "support/error.h"

namespace spora::sched {

class HostErrors;

// The calling thread's errors; each host callback of its runs holds them.
std::shared_ptr<HostErrors> this_thread_host_errors();
// Keeps `e` if it is the first not yet raised (later ones are logged:
// they usually follow from the first).
void record_host_error(HostErrors& errors, Error e);
// Throws the calling thread's first pending error, once, if there is one.
void raise_host_error();

}  // namespace spora::sched
