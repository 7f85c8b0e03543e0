/* The device queue's C API (spora_device_queue_*) from C99: none on cpu;
 * on sim (when its plugin is loaded) batches come out first in first out
 * with the values pushed, even when the caller's buffer is overwritten right
 * after the push; refused pushes and pops leave the queue as it was. Prints
 * "N passed, M failed" and exits non-zero on any failure. */
#include <spora/spora.h>
#include <stdio.h>
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

/* Batch b: x (2, 3) f32 = 100 * b + k, y (2) i32 = b, z a u8 scalar = b. */
static spora_status_t push_batch(spora_device_queue_t* q, int b) {
  float x[6];
  int32_t y[2];
  unsigned char z = (unsigned char)b;
  int k;
  for (k = 0; k < 6; ++k) x[k] = (float)(100 * b + k);
  y[0] = y[1] = b;
  const spora_dtype_t dtypes[3] = {SPORA_DTYPE_F32, SPORA_DTYPE_I32, SPORA_DTYPE_U8};
  const int64_t xs[2] = {2, 3}, ys[1] = {2};
  const int64_t* shapes[3] = {xs, ys, NULL};
  const int32_t ndims[3] = {2, 1, 0};
  const void* data[3] = {x, y, &z};
  const size_t bytes[3] = {sizeof x, sizeof y, 1};
  spora_status_t s = spora_device_queue_push(q, dtypes, shapes, ndims, data, bytes, 3);
  /* The push has read the bytes: what the caller does with them now is its affair. */
  memset(x, 0xff, sizeof x);
  memset(y, 0xff, sizeof y);
  z = 0xff;
  return s;
}

/* Pops a batch and checks it is batch b; returns the wrong values. */
static int pop_batch(spora_device_queue_t* q, int b) {
  spora_tensor_t* out[3] = {NULL, NULL, NULL};
  size_t n = 0;
  int bad = 0, k;
  OK(spora_device_queue_pop(q, out, 3, &n));
  EXPECT(n == 3, "%d columns", (int)n);
  if (n != 3) return 1;
  float x[6];
  int32_t y[2];
  unsigned char z = 0;
  int64_t dims[2] = {0, 0};
  int32_t nd = -1;
  OK(spora_tensor_read(out[0], x, sizeof x));
  OK(spora_tensor_read(out[1], y, sizeof y));
  OK(spora_tensor_read(out[2], &z, 1));
  OK(spora_tensor_shape(out[0], dims, 2));
  OK(spora_tensor_ndim(out[2], &nd));
  for (k = 0; k < 6; ++k)
    if (x[k] != (float)(100 * b + k)) bad++;
  if (y[0] != b || y[1] != b || z != (unsigned char)b) bad++;
  if (dims[0] != 2 || dims[1] != 3 || nd != 0) bad++;
  for (k = 0; k < 3; ++k) spora_tensor_free(out[k]);
  return bad;
}

int main(void) {
  spora_context_t* ctx = NULL;
  spora_device_t *cpu = NULL, *sim = NULL;
  spora_device_queue_t* q = NULL;
  size_t pending = 99;
  spora_status_t s;
  OK(spora_context_create(&ctx));
  OK(spora_device_find(ctx, "cpu", &cpu));

  /* cpu shares host memory: no queue, and no error. */
  q = (spora_device_queue_t*)&pending;
  OK(spora_device_queue_create(cpu, &q));
  EXPECT(q == NULL, "a queue on cpu");
  OK(spora_device_queue_free(NULL));
  s = spora_device_queue_create(NULL, &q);
  EXPECT(s == SPORA_ERROR_INVALID_ARGUMENT && strstr(spora_last_error(), "device is null"), "status %d: %s", s,
         spora_last_error());

  if (spora_device_find(ctx, "sim", &sim) != SPORA_OK) {
    printf("device queue on sim: no sim device, skipped\n");
  } else {
    int bad = 0, b;
    OK(spora_device_queue_create(sim, &q));
    EXPECT(q != NULL, "no queue on sim");
    if (q) {
      for (b = 1; b <= 3; ++b) OK(push_batch(q, b));
      OK(spora_device_queue_pending(q, &pending));
      EXPECT(pending == 3, "%d pending", (int)pending);

      /* Refused: too small an output array, a byte count that does not fit
       * the shape, an unknown dtype. The queue is unchanged. */
      spora_tensor_t* two[2] = {NULL, NULL};
      size_t n = 0;
      s = spora_device_queue_pop(q, two, 2, &n);
      EXPECT(s == SPORA_ERROR_INVALID_ARGUMENT && strstr(spora_last_error(), "room for 2 tensors, the batch has 3"),
             "status %d: %s", s, spora_last_error());
      float f[4] = {0, 0, 0, 0};
      const int64_t fs[1] = {4};
      const int64_t* fshape[1] = {fs};
      const int32_t fnd[1] = {1};
      const void* fdata[1] = {f};
      const size_t short_bytes[1] = {12};
      spora_dtype_t fdt[1] = {SPORA_DTYPE_F32};
      s = spora_device_queue_push(q, fdt, fshape, fnd, fdata, short_bytes, 1);
      EXPECT(s == SPORA_ERROR_INVALID_ARGUMENT && strstr(spora_last_error(), "has 12 bytes, expected 16"),
             "status %d: %s", s, spora_last_error());
      const size_t full_bytes[1] = {16};
      memset(fdt, 0x63, sizeof fdt); /* an int outside the enum, as C allows */
      s = spora_device_queue_push(q, fdt, fshape, fnd, fdata, full_bytes, 1);
      EXPECT(s == SPORA_ERROR_INVALID_ARGUMENT && strstr(spora_last_error(), "unknown dtype"), "status %d: %s", s,
             spora_last_error());
      OK(spora_device_queue_pending(q, &pending));
      EXPECT(pending == 3, "%d pending after refused calls", (int)pending);

      /* First in, first out; a batch of no columns is a batch too. */
      bad += pop_batch(q, 1);
      OK(push_batch(q, 4));
      OK(spora_device_queue_push(q, NULL, NULL, NULL, NULL, NULL, 0));
      bad += pop_batch(q, 2);
      bad += pop_batch(q, 3);
      bad += pop_batch(q, 4);
      OK(spora_device_queue_pop(q, NULL, 0, &n));
      EXPECT(n == 0, "%d columns in the empty batch", (int)n);
      s = spora_device_queue_pop(q, two, 2, &n);
      EXPECT(s == SPORA_ERROR_INVALID_ARGUMENT && strstr(spora_last_error(), "no batch is queued"), "status %d: %s",
             s, spora_last_error());
      EXPECT(bad == 0, "%d wrong values", bad);

      /* Freed with batches in flight: it waits for their copies; a tensor
       * popped before stays valid. */
      OK(push_batch(q, 5));
      OK(push_batch(q, 6));
      spora_tensor_t* out[3] = {NULL, NULL, NULL};
      OK(spora_device_queue_pop(q, out, 3, &n));
      OK(push_batch(q, 7));
      OK(spora_device_queue_free(q));
      float x[6] = {0, 0, 0, 0, 0, 0};
      OK(spora_tensor_read(out[0], x, sizeof x));
      EXPECT(x[0] == 500.0f && x[5] == 505.0f, "batch 5 read after the queue went: %g %g", x[0], x[5]);
      for (b = 0; b < 3; ++b) spora_tensor_free(out[b]);
    }
  }

  spora_context_free(ctx);
  printf("%d passed, %d failed\n", g_pass, g_fail);
  return g_fail ? 1 : 0;
}
