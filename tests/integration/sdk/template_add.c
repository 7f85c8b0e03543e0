/* Drives an installed Spora from outside, built with
 *   cc template_add.c $(pkg-config --cflags --libs spora)
 * Runs `add` on the device named by argv[1] (the template plugin in the
 * test) and checks the numbers: same-shape f32 operands use the plugin's own
 * kernel; broadcast operands, which the template refuses, must still give
 * the right answer through the host's fallback. Exit 0 only if all match. */
#include <spora/spora.h>
#include <stdio.h>

#define CHECK(call)                                                              \
  do {                                                                           \
    if ((call) != SPORA_OK) {                                                    \
      fprintf(stderr, "template_add.c:%d: %s\n", __LINE__, spora_last_error()); \
      return 1;                                                                  \
    }                                                                            \
  } while (0)

static int run_add(spora_device_t* dev, const int64_t* bshape, int32_t bndim, const float* b, size_t bbytes,
                   const float* expect, const char* label) {
  const int64_t shape[2] = {2, 3};
  const float a[6] = {1, 2, 3, 4, 5, 6};
  float y[6];
  spora_tensor_t *ta, *tb, *ty;
  spora_device_t* where;
  const char* where_name;
  int i, bad = 0;
  CHECK(spora_tensor_create(dev, SPORA_DTYPE_F32, shape, 2, a, sizeof a, &ta));
  CHECK(spora_tensor_create(dev, SPORA_DTYPE_F32, bshape, bndim, b, bbytes, &tb));
  {
    spora_tensor_t* in[2] = {ta, tb};
    CHECK(spora_op_call("add", NULL, in, 2, NULL, &ty, 1));
  }
  CHECK(spora_tensor_device(ty, &where));
  CHECK(spora_device_name(where, &where_name));
  CHECK(spora_tensor_read(ty, y, sizeof y));
  for (i = 0; i < 6; ++i) bad |= y[i] != expect[i];
  printf("%s on %s: %.1f %.1f %.1f %.1f %.1f %.1f %s\n", label, where_name, y[0], y[1], y[2], y[3], y[4], y[5],
         bad ? "WRONG" : "ok");
  spora_tensor_free(ta);
  spora_tensor_free(tb);
  spora_tensor_free(ty);
  return bad;
}

int main(int argc, char** argv) {
  const int64_t full[2] = {2, 3}, row[1] = {3};
  const float b_full[6] = {10, 20, 30, 40, 50, 60}, b_row[3] = {100, 200, 300};
  const float want_full[6] = {11, 22, 33, 44, 55, 66}, want_row[6] = {101, 202, 303, 104, 205, 306};
  spora_context_t* ctx;
  spora_device_t* dev;
  int failures = 0;
  if (argc != 2) {
    fprintf(stderr, "usage: %s <device>\n", argv[0]);
    return 2;
  }
  CHECK(spora_context_create(&ctx));
  CHECK(spora_device_find(ctx, argv[1], &dev));
  failures += run_add(dev, full, 2, b_full, sizeof b_full, want_full, "add (2,3)+(2,3)");
  failures += run_add(dev, row, 1, b_row, sizeof b_row, want_row, "add (2,3)+(3,)");
  spora_context_free(ctx);
  return failures ? 1 : 0;
}
