/* libspora-device-<name>.so: a device plugin that crashes, aborts, exits or
 * hangs in one step of the handshake, for the probe sandbox's tests.
 * Built once per kind of misbehaviour with
 *   TEST_PLUGIN_NAME  "ctorsegv", ...
 *   MISBEHAVE_STEP    1 = its constructor (dlopen), 2 = spora_plugin_probe_v1,
 *                     3 = spora_plugin_entry_v1
 *   MISBEHAVE_HOW     1 = SIGSEGV (a real null write), 2 = abort(),
 *                     3 = exit(3), 4 = hang (sleep forever)
 * Before misbehaving it appends "<name> <step> <pid>" to the file named by
 * $SPORA_TEST_MISBEHAVE_LOG (when set), so a test sees how often, and in
 * which process, the step ran. Otherwise it is the minimal good device. */
#define _POSIX_C_SOURCE 200809L
#include "minimal_device.h"

#include <fcntl.h>
#include <unistd.h>

#if !defined(MISBEHAVE_STEP) || !defined(MISBEHAVE_HOW)
#error "define MISBEHAVE_STEP and MISBEHAVE_HOW"
#endif

static void note_step(int step) {
  const char* log = getenv("SPORA_TEST_MISBEHAVE_LOG");
  if (!log || !*log) return;
  char line[128];
  const int n = snprintf(line, sizeof line, "%s %d %ld\n", TEST_PLUGIN_NAME, step, (long)getpid());
  const int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) return;
  if (n > 0 && write(fd, line, (size_t)n) != n) { /* nothing better to do */
  }
  close(fd);
}

static void misbehave(int step) {
  if (step != MISBEHAVE_STEP) return;
  note_step(step);
#if MISBEHAVE_HOW == 1
  {
    /* Both volatile: the compiler may neither assume the address nor drop the store. */
    volatile int* volatile nowhere = NULL;
    *nowhere = 42;
  }
#elif MISBEHAVE_HOW == 2
  abort();
#elif MISBEHAVE_HOW == 3
  exit(3);
#elif MISBEHAVE_HOW == 4
  for (;;) sleep(1000);
#else
#error "MISBEHAVE_HOW must be 1 to 4"
#endif
}

__attribute__((constructor)) static void misbehave_on_load(void) { misbehave(1); }

SPORA_PLUGIN_EXPORT void spora_plugin_probe_v1(spora_probe_result_t* out) {
  misbehave(2);
  out->score = 1;
  out->reason[0] = '\0';
}

SPORA_PLUGIN_EXPORT spora_plugin_error_t* spora_plugin_entry_v1(const spora_host_t* host, spora_plugin_info_t* out) {
  misbehave(3);
  if (!host || host->abi_major != SPORA_PLUGIN_ABI_MAJOR)
    return test_error(SPORA_PLUGIN_UNAVAILABLE, "[" TEST_PLUGIN_NAME "] host speaks another plugin ABI major");
  test_fill_info(host, out, SPORA_PLUGIN_ABI_MAJOR, SPORA_PLUGIN_ABI_MINOR);
  return NULL;
}
