// Contended cores (cpu_contention.h): other processes' CPU time, sampled
// every 100 ms by the launching thread.
#include "cpu_contention.h"

#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "cpu_state.h"

namespace spora::cpu {
namespace {

constexpr int64_t kPeriodNs = 100'000'000;

bool enabled() {
  static const bool on = [] {
    const char* v = std::getenv("SPORA_CPU_ADAPTIVE_THREADS");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return on;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The machine's busy CPU time in seconds (all cores), from /proc/stat's
// first line; false when it cannot be read.
bool machine_busy_s(double* out) {
  FILE* f = std::fopen("/proc/stat", "re");
  if (!f) return false;
  unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  const int n = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &system, &idle, &iowait,
                            &irq, &softirq, &steal);
  std::fclose(f);
  static const long hz = sysconf(_SC_CLK_TCK);
  if (n < 4 || hz <= 0) return false;
  *out = static_cast<double>(user + nice + system + irq + softirq + steal) / static_cast<double>(hz);
  return true;
}

double process_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::atomic<bool> g_contended{false};
std::atomic<int64_t> g_next_ns{0};
std::mutex g_sampling;  // one sampler at a time; the others read the last answer
double g_busy_s = -1, g_own_s = 0;
int64_t g_at_ns = 0;

}  // namespace

bool cores_contended(int threads) {
  if (threads <= 1 || !enabled()) return false;
  const int64_t t = now_ns();
  if (t < g_next_ns.load(std::memory_order_relaxed)) return g_contended.load(std::memory_order_relaxed);
  std::unique_lock<std::mutex> lock(g_sampling, std::try_to_lock);
  if (!lock.owns_lock()) return g_contended.load(std::memory_order_relaxed);
  g_next_ns.store(t + kPeriodNs, std::memory_order_relaxed);
  double busy = 0;
  if (!machine_busy_s(&busy)) return false;
  const double own = process_cpu_s();
  const bool first = g_busy_s < 0;
  const double wall = static_cast<double>(t - g_at_ns) * 1e-9;
  const double others = first ? 0.0 : ((busy - g_busy_s) - (own - g_own_s)) / wall;
  g_busy_s = busy, g_own_s = own, g_at_ns = t;
  if (first) return false;
  static const double cores = static_cast<double>(sysconf(_SC_NPROCESSORS_ONLN));
  const bool was = g_contended.load(std::memory_order_relaxed);
  const bool now = contended_after(was, others, cores - threads);
  if (now != was) {
    g_contended.store(now, std::memory_order_relaxed);
    char msg[160];
    std::snprintf(msg, sizeof msg, "other processes use %.1f of %d cores: kernels run on %d thread%s", others,
                  static_cast<int>(cores), now ? 1 : threads, now ? "" : "s");
    log(SPORA_LOG_DEBUG, msg);
  }
  return now;
}

}  // namespace spora::cpu
