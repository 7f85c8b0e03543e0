// Threading for the cpu plugin's own loops. One runtime for everything:
// OpenMP, which Debian's oneDNN also uses, so our loops and oneDNN's share
// one thread pool (SPORA_NUM_THREADS sets its size at initialize).
//
// Entering an OpenMP region costs ~0.5-2 us here, several times a small
// op's whole work, so loops below `grain` elements run on the calling
// thread.
#pragma once
#include <omp.h>
#include <xmmintrin.h>

#include <algorithm>
#include <cstdint>

namespace spora::cpu {

// Work per element below which a loop stays on the calling thread.
constexpr int64_t kParallelGrain = 1 << 15;

// Calls fn(begin, end) over [0, n) in contiguous chunks, in parallel when
// n >= grain. fn must be safe to call concurrently on disjoint ranges.
template <class Fn>
void parallel_for(int64_t n, int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  const int threads = omp_get_max_threads();
  if (n < grain || threads <= 1 || omp_in_parallel()) {
    fn(int64_t{0}, n);
    return;
  }
  const int64_t chunks = std::min<int64_t>(threads, (n + grain - 1) / grain);
  // Workers run with the caller's floating-point mode (the launch's
  // flush-to-zero), restoring their own after: the OpenMP pool is shared
  // with the rest of the process.
  const unsigned csr = _mm_getcsr();
#pragma omp parallel for num_threads(static_cast<int>(chunks)) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const unsigned saved = _mm_getcsr();
    _mm_setcsr(csr);
    const int64_t begin = n * c / chunks, end = n * (c + 1) / chunks;
    fn(begin, end);
    _mm_setcsr(saved);
  }
}

// The calling thread's OpenMP team size is 1 while a SerialScope with
// `serial` lives: our loops run on the calling thread, and oneDNN sizes
// the primitives it makes, and runs those that ask at launch, for one
// thread (it reads the team size both when it makes a primitive and when a
// primitive runs, so a plan is made and run inside the scope or neither).
// The contended-cores path of cpu_kernels.cpp uses it.
class SerialScope {
 public:
  explicit SerialScope(bool serial) : saved_(serial ? omp_get_max_threads() : 1), active_(saved_ > 1) {
    if (active_) omp_set_num_threads(1);
  }
  ~SerialScope() {
    if (active_) omp_set_num_threads(saved_);
  }
  SerialScope(const SerialScope&) = delete;
  SerialScope& operator=(const SerialScope&) = delete;

 private:
  int saved_;
  bool active_;
};

}  // namespace spora::cpu
