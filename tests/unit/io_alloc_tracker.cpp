// Replaces the global operator new of the io test binaries to record the
// largest single request: hostile files must be rejected before any large
// allocation, and this is how the tests see that.
#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<size_t> g_max{0};
}

namespace spora::iotest {
size_t max_allocation() { return g_max.load(); }
void reset_max_allocation() { g_max.store(0); }
}  // namespace spora::iotest

void* operator new(size_t n) {
  size_t cur = g_max.load(std::memory_order_relaxed);
  while (n > cur && !g_max.compare_exchange_weak(cur, n, std::memory_order_relaxed)) {
  }
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) { return operator new(n); }
// The nothrow forms too (std::stable_sort's temporary buffer uses them):
// left to the library, they would pair another allocator's new with the
// free() below (AddressSanitizer: alloc-dealloc-mismatch).
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  try {
    return operator new(n);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](size_t n, const std::nothrow_t&) noexcept { return operator new(n, std::nothrow); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
