// Contended cores (cpu_contention.h): other processes' CPU time on the
// cores this process may run on, sampled every 100 ms by the launching
// thread.
#include "cpu_contention.h"

#include <sched.h>
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

// The cores this process may run on (its affinity mask when readable).
const cpu_set_t& our_cores(int* count) {
  static cpu_set_t set;
  static const int n = [] {
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    for (long c = 0; c < online && c < CPU_SETSIZE; ++c) CPU_SET(static_cast<int>(c), &set);
    return CPU_COUNT(&set);
  }();
  *count = n;
  return set;
}

// The busy CPU time in seconds of the cores in `cores`, from /proc/stat's
// per-core lines (user, nice, system, irq, softirq, steal); false when it
// cannot be read.
bool busy_seconds(const cpu_set_t& cores, double* out) {
  FILE* f = std::fopen("/proc/stat", "re");
  if (!f) return false;
  static const long hz = sysconf(_SC_CLK_TCK);
  char line[512];
  unsigned long long ticks = 0;
  bool any = false;
  while (std::fgets(line, sizeof line, f)) {
    int cpu = -1;
    unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    if (std::strncmp(line, "cpu", 3) != 0) break;  // the per-core lines come first
    if (std::sscanf(line, "cpu%d %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &user, &nice, &system, &idle,
                    &iowait, &irq, &softirq, &steal) < 5 ||
        cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &cores))
      continue;  // the "cpu" total line, or a core we do not run on
    ticks += user + nice + system + irq + softirq + steal;
    any = true;
  }
  std::fclose(f);
  if (!any || hz <= 0) return false;
  *out = static_cast<double>(ticks) / static_cast<double>(hz);
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
  int cores = 0;
  const cpu_set_t& set = our_cores(&cores);
  double busy = 0;
  if (!busy_seconds(set, &busy)) return false;
  const double own = process_cpu_s();
  const bool first = g_busy_s < 0;
  const double wall = static_cast<double>(t - g_at_ns) * 1e-9;
  const double others = first ? 0.0 : ((busy - g_busy_s) - (own - g_own_s)) / wall;
  g_busy_s = busy, g_own_s = own, g_at_ns = t;
  if (first) return false;
  const bool was = g_contended.load(std::memory_order_relaxed);
  const bool now = contended_after(was, others, static_cast<double>(cores - threads));
  if (now != was) {
    g_contended.store(now, std::memory_order_relaxed);
    char msg[160];
    std::snprintf(msg, sizeof msg, "other processes use %.1f of our %d cores: kernels run on %d thread%s", others,
                  cores, now ? 1 : threads, now ? "" : "s");
    log(SPORA_LOG_DEBUG, msg);
  }
  return now;
}

}  // namespace spora::cpu
