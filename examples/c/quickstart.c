/* Spora from C: list devices, then compute y = softmax(relu(x @ w + b)) on
 * every usable device and check it against the first device (cpu).
 * Build: cc quickstart.c -lspora -lm */
#include <math.h>
#include <spora/spora.h>
#include <stdio.h>

#define CHECK(call)                                                           \
  do {                                                                        \
    spora_status_t s_ = (call);                                               \
    if (s_ != SPORA_OK) {                                                     \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,    \
              spora_last_error());                                            \
      return 1;                                                               \
    }                                                                         \
  } while (0)

/* Runs the small network on `dev`; writes the 2x4 result to `out`. */
static int run_on(spora_device_t* dev, float out[8]) {
  const float x[6] = {1, -2, 3, 0.5f, 0.25f, -1};
  const float w[12] = {0.1f, 0.2f, -0.3f, 0.4f, 0.5f, -0.6f, 0.7f, 0.8f, -0.9f, 1.0f, 0.1f, -0.2f};
  const float b[4] = {0.01f, -0.02f, 0.03f, 0.5f};
  const int64_t xs[2] = {2, 3}, ws[2] = {3, 4}, bs[1] = {4};
  spora_tensor_t *tx, *tw, *tb, *mm, *biased, *act, *y;
  CHECK(spora_tensor_create(dev, SPORA_DTYPE_F32, xs, 2, x, sizeof x, &tx));
  CHECK(spora_tensor_create(dev, SPORA_DTYPE_F32, ws, 2, w, sizeof w, &tw));
  CHECK(spora_tensor_create(dev, SPORA_DTYPE_F32, bs, 1, b, sizeof b, &tb));
  {
    spora_tensor_t* in[2] = {tx, tw};
    CHECK(spora_op_call("matmul", NULL, in, 2, NULL, &mm, 1));
  }
  {
    spora_tensor_t* in[2] = {mm, tb}; /* (2,4) + (4,) broadcasts */
    CHECK(spora_op_call("add", NULL, in, 2, NULL, &biased, 1));
  }
  CHECK(spora_op_call("relu", NULL, &biased, 1, NULL, &act, 1));
  {
    spora_attrs_t* attrs;
    CHECK(spora_attrs_create(&attrs));
    CHECK(spora_attrs_set_int(attrs, "axis", -1));
    CHECK(spora_op_call("softmax", NULL, &act, 1, attrs, &y, 1));
    spora_attrs_free(attrs);
  }
  CHECK(spora_tensor_read(y, out, 8 * sizeof(float)));
  spora_tensor_free(tx);
  spora_tensor_free(tw);
  spora_tensor_free(tb);
  spora_tensor_free(mm);
  spora_tensor_free(biased);
  spora_tensor_free(act);
  spora_tensor_free(y);
  return 0;
}

int main(void) {
  spora_context_t* ctx;
  size_t n = 0, i;
  float ref[8];
  int have_ref = 0, failures = 0;
  CHECK(spora_context_create(&ctx));
  CHECK(spora_device_count(ctx, &n));
  printf("softmax(relu(x @ w + b)) on %zu device(s)\n", n);
  for (i = 0; i < n; ++i) {
    spora_device_t* dev;
    const char* name;
    float y[8];
    double max_diff = 0;
    int j;
    CHECK(spora_device_get(ctx, i, &dev));
    CHECK(spora_device_name(dev, &name));
    if (run_on(dev, y)) return 1;
    if (!have_ref) {
      for (j = 0; j < 8; ++j) ref[j] = y[j];
      have_ref = 1;
    }
    for (j = 0; j < 8; ++j) max_diff = fmax(max_diff, fabs((double)y[j] - ref[j]));
    printf("  %-8s y[0] = [%.5f %.5f %.5f %.5f]  max |y - y_first| = %.2e %s\n", name, y[0], y[1], y[2], y[3],
           max_diff, max_diff < 1e-5 ? "ok" : "MISMATCH");
    if (max_diff >= 1e-5) failures++;
  }
  spora_context_free(ctx);
  return failures ? 1 : 0;
}
