// Whether other processes keep this machine's cores busy, for the cpu
// plugin's threading (cpu_kernels.cpp, issue 19 line 3).
//
// Beside one busy process on a 2-core machine, two threads per kernel lost
// 45-73% of the quiet speed (MLP, main job's LeNet, LeNet-5: every parallel
// region waits at its barrier for a worker the other process preempted),
// while one thread kept 59-69% of the quiet two-thread speed
// (bench/README.md). So when the cores are contended, kernels run on one
// thread.
//
// The signal: every 100 ms (on the launching thread, when a launch finds
// the last sample old), other processes' CPU time on the cores this process
// may run on (its affinity mask) -- those cores' busy time from /proc/stat
// (user, nice, system, irq, softirq, steal) minus this process's own
// (CLOCK_PROCESS_CPUTIME_ID) -- over the wall time, in cores.
// Contended when that exceeds the cores our threads leave free by more than
// half a core; no longer when it falls below a quarter of a core over them
// (the gap keeps it from flapping). Without /proc/stat: never contended.
//
// SPORA_CPU_ADAPTIVE_THREADS=0 switches it off (always the configured
// thread count; the test suite does, tests/ctest_env.cmake, because one-
// and two-thread primitives round reductions differently); default on.
#pragma once

namespace spora::cpu {

// `threads`: the configured thread count (SPORA_NUM_THREADS). False when
// threads is 1 or the switch is off.
bool cores_contended(int threads);

// The decision alone: `others` cores busy with other processes, `spare`
// cores our threads leave free; `was` the last answer.
inline bool contended_after(bool was, double others, double spare) {
  return was ? others > spare + 0.25 : others > spare + 0.5;
}

}  // namespace spora::cpu
