/* The profiler's C API (spora_profiler_*) from C99: a session over eager ops
 * on cpu and sim, a user range, the trace file's events (op spans with their
 * shapes and a duration, device spans from the plugins' trace hooks, flow
 * arrows, memory counters), the summary's counts, and errors as status +
 * message. Prints "N passed, M failed" and exits non-zero on any failure. */
#include <spora/spora.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_pass = 0, g_fail = 0;

#define EXPECT(cond, ...)                                                \
  do {                                                                   \
    if (cond) {                                                          \
      g_pass++;                                                          \
    } else {                                                             \
      g_fail++;                                                          \
      fprintf(stderr, "%s:%d: FAILED %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                      \
      fprintf(stderr, "\n");                                             \
    }                                                                    \
  } while (0)

#define OK(call) EXPECT((call) == SPORA_OK, "%s", spora_last_error())

static char* read_all(const char* path) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char* buf = (char*)malloc((size_t)n + 1);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) n = 0;
  if (buf) buf[n] = '\0';
  fclose(f);
  return buf;
}

static int count(const char* hay, const char* needle) {
  int n = 0;
  for (const char* p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

/* The number in the "Calls" column of `op`'s row of the host-op table. */
static long calls_of(const char* summary, const char* op) {
  char pat[64];
  snprintf(pat, sizeof pat, "\n%s ", op);
  const char* row = strstr(summary, pat);
  return row ? strtol(row + strlen(pat), NULL, 10) : -1;
}

/* Runs `add` n times on `dev` (2x3 f32), then reads the last result back. */
static void run_adds(spora_device_t* dev, int n) {
  float v[6] = {1, 2, 3, 4, 5, 6}, out[6];
  int64_t shape[2] = {2, 3};
  spora_tensor_t *a = NULL, *y = NULL;
  OK(spora_tensor_create(dev, SPORA_DTYPE_F32, shape, 2, v, sizeof v, &a));
  spora_tensor_t* in[2] = {a, a};
  for (int i = 0; i < n; ++i) {
    spora_tensor_free(y);
    y = NULL;
    OK(spora_op_call("add", NULL, in, 2, NULL, &y, 1));
  }
  OK(spora_tensor_read(y, out, sizeof out));
  EXPECT(out[5] == 12.0f, "add gave %g", (double)out[5]);
  spora_tensor_free(y);
  spora_tensor_free(a);
}

int main(int argc, char** argv) {
  const char* dir = argc > 1 ? argv[1] : ".";
  char path[1024];
  snprintf(path, sizeof path, "%s/profiler_api_test.json", dir);
  spora_context_t* ctx = NULL;
  spora_device_t *cpu = NULL, *sim = NULL;
  OK(spora_context_create(&ctx));
  OK(spora_device_find(ctx, "cpu", &cpu));
  OK(spora_device_find(ctx, "sim:0", &sim));

  /* Errors: no session to stop; a range without a session is 0 and ending it is fine. */
  int32_t running = -1;
  OK(spora_profiler_running(&running));
  EXPECT(running == 0, "running %d", running);
  EXPECT(spora_profiler_stop() == SPORA_ERROR_INVALID_ARGUMENT, "stop without a session");
  EXPECT(strstr(spora_last_error(), "[profiler] no session runs") != NULL, "%s", spora_last_error());
  uint64_t id = 7;
  OK(spora_profiler_range_begin("step", "before", &id));
  EXPECT(id == 0, "id %llu", (unsigned long long)id);
  OK(spora_profiler_range_end(id));
  EXPECT(spora_profiler_running(NULL) == SPORA_ERROR_INVALID_ARGUMENT, "null out");

  run_adds(cpu, 1); /* not recorded */
  OK(spora_profiler_start());
  EXPECT(spora_profiler_start() == SPORA_ERROR_INVALID_ARGUMENT, "second start");
  OK(spora_profiler_running(&running));
  EXPECT(running == 1, "running %d", running);
  OK(spora_profiler_range_begin("step", "step 1", &id));
  EXPECT(id != 0, "range id 0 while running");
  run_adds(cpu, 3);
  run_adds(sim, 2);
  OK(spora_profiler_range_end(id));
  OK(spora_profiler_stop());
  run_adds(cpu, 1); /* not recorded */

  OK(spora_profiler_write_trace(path));
  char* json = read_all(path);
  EXPECT(json != NULL, "cannot read %s", path);
  if (json) {
    EXPECT(strncmp(json, "{\"displayTimeUnit\"", 18) == 0, "starts %.40s", json);
    EXPECT(strstr(json, "\"traceEvents\":[") != NULL, "no traceEvents");
    /* 5 adds, with shapes, device, and a duration. */
    EXPECT(count(json, "\"name\":\"add\",\"cat\":\"op\",\"dur\":") == 5, "%d add spans",
           count(json, "\"name\":\"add\",\"cat\":\"op\",\"dur\":"));
    EXPECT(count(json, "\"inputs\":[\"f32[2,3]\",\"f32[2,3]\"],\"outputs\":[\"f32[2,3]\"]") == 5, "shapes");
    EXPECT(count(json, "\"device\":\"sim:0\"") == 2 && count(json, "\"device\":\"cpu:0\"") == 3, "devices");
    EXPECT(count(json, "\"name\":\"step 1\",\"cat\":\"step\",\"dur\":") == 1, "the range");
    /* Device spans from both plugins' hooks; sim's come with the queueing delay. */
    EXPECT(count(json, "\"name\":\"add\",\"cat\":\"cpu.kernel\"") == 3, "cpu kernels");
    EXPECT(count(json, "\"name\":\"add\",\"cat\":\"sim.kernel\"") == 2, "sim kernels");
    EXPECT(count(json, "\"queued_us\":") == 2, "queued_us");
    EXPECT(count(json, "\"ph\":\"s\"") == 5 && count(json, "\"ph\":\"f\"") == 5, "flows s %d f %d",
           count(json, "\"ph\":\"s\""), count(json, "\"ph\":\"f\""));
    EXPECT(strstr(json, "\"name\":\"memory cpu:0\",\"cat\":\"memory\"") != NULL, "cpu memory counter");
    EXPECT(strstr(json, "\"name\":\"memory sim:0\",\"cat\":\"memory\"") != NULL, "sim memory counter");
    EXPECT(strstr(json, "\"args\":{\"name\":\"sim: sim0-s") != NULL, "sim stream track name");
    free(json);
  }
  const char* summary = NULL;
  OK(spora_profiler_summary(&summary));
  EXPECT(summary && strstr(summary, "Host ops (5 calls)") != NULL, "%s", summary ? summary : "(null)");
  EXPECT(summary && calls_of(summary, "add") == 5, "%s", summary ? summary : "(null)");

  EXPECT(spora_profiler_write_trace("/nonexistent-dir/x.json") == SPORA_ERROR_IO, "bad path");
  EXPECT(strstr(spora_last_error(), "/nonexistent-dir/x.json") != NULL, "%s", spora_last_error());

  /* A new session starts empty. */
  OK(spora_profiler_start());
  OK(spora_profiler_stop());
  OK(spora_profiler_summary(&summary));
  EXPECT(summary && strstr(summary, "Host ops (0 calls)") != NULL, "%s", summary ? summary : "(null)");

  spora_context_free(ctx);
  printf("%d passed, %d failed\n", g_pass, g_fail);
  return g_fail ? 1 : 0;
}
