/* The data pipeline's C API (spora_dataset_*, spora_transform_*) from C99:
 * an in-memory source through map / batch / repeat with values checked,
 * sizes, column names, and errors as status + message. Prints
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

int main(void) {
  spora_context_t* ctx = NULL;
  spora_device_t* cpu = NULL;
  OK(spora_context_create(&ctx));
  OK(spora_device_find(ctx, "cpu", &cpu));

  /* 10 samples: x = 2x2 u8 images with pixel 10*i + k, y = label i. */
  unsigned char x[10][2][2];
  int32_t y[10];
  int i, k;
  for (i = 0; i < 10; ++i) {
    for (k = 0; k < 4; ++k) x[i][k / 2][k % 2] = (unsigned char)(10 * i + k);
    y[i] = i;
  }
  int64_t xs[3] = {10, 2, 2}, ys[1] = {10};
  spora_tensor_t *tx = NULL, *ty = NULL;
  OK(spora_tensor_create(cpu, SPORA_DTYPE_U8, xs, 3, x, sizeof x, &tx));
  OK(spora_tensor_create(cpu, SPORA_DTYPE_I32, ys, 1, y, sizeof y, &ty));
  spora_tensor_t* cols[2] = {tx, ty};
  const char* names[2] = {"image", "label"};
  spora_dataset_t *src = NULL, *mapped = NULL, *batched = NULL, *repeated = NULL;
  OK(spora_dataset_from_tensors(cols, names, 2, &src));

  spora_attrs_t* a = NULL;
  OK(spora_attrs_create(&a));
  OK(spora_attrs_set_float(a, "rescale", 0.5));
  OK(spora_attrs_set_float(a, "shift", 1.0));
  spora_transform_t* rescale = NULL;
  OK(spora_transform_create("rescale", a, &rescale));
  spora_transform_t* hwc2chw = NULL;
  OK(spora_transform_create("hwc2chw", NULL, &hwc2chw));
  spora_transform_t* ops[2] = {rescale, hwc2chw};
  const char* mcols[1] = {"image"};
  OK(spora_dataset_map(src, ops, 2, mcols, 1, 2, 0, &mapped));
  OK(spora_dataset_batch(mapped, 4, 0, &batched));
  OK(spora_dataset_repeat(batched, 2, &repeated));
  /* The handles stay valid after the steps that used them are freed. */
  OK(spora_transform_free(rescale));
  OK(spora_transform_free(hwc2chw));

  int64_t size = 0;
  OK(spora_dataset_size(repeated, &size));
  EXPECT(size == 6, "size %lld, want 6 (3 batches of 10 rows, twice)", (long long)size);
  size_t ncol = 0;
  const char* name = NULL;
  OK(spora_dataset_num_columns(repeated, &ncol));
  OK(spora_dataset_column_name(repeated, 1, &name));
  EXPECT(ncol == 2 && name && strcmp(name, "label") == 0, "columns %zu, name %s", ncol, name ? name : "(null)");

  spora_dataset_iter_t* it = NULL;
  OK(spora_dataset_iter_create(repeated, cpu, 0, 2, &it));
  int batches = 0, rows = 0, bad = 0;
  for (;;) {
    spora_tensor_t* out[2] = {NULL, NULL};
    int32_t has = 0;
    OK(spora_dataset_iter_next(it, out, 2, &has));
    if (!has) break;
    int64_t shape[4] = {0};
    int32_t nd = 0;
    spora_dtype_t dt = SPORA_DTYPE_INVALID;
    OK(spora_tensor_ndim(out[0], &nd));
    OK(spora_tensor_shape(out[0], shape, 4));
    OK(spora_tensor_dtype(out[0], &dt));
    EXPECT(nd == 4 && shape[1] == 1 && shape[2] == 2 && shape[3] == 2 && dt == SPORA_DTYPE_F32,
           "batch %d: ndim %d dtype %d", batches, nd, (int)dt);
    float img[4 * 4];
    int32_t lab[4];
    OK(spora_tensor_read(out[0], img, sizeof img));
    OK(spora_tensor_read(out[1], lab, sizeof lab));
    for (i = 0; i < shape[0]; ++i) {
      const int sample = (rows + i) % 10;
      if (lab[i] != sample) bad++;
      for (k = 0; k < 4; ++k)
        if (img[i * 4 + k] != (float)(10 * sample + k) * 0.5f + 1.0f) bad++;
    }
    rows += (int)shape[0];
    batches++;
    spora_tensor_free(out[0]);
    spora_tensor_free(out[1]);
  }
  EXPECT(batches == 6 && rows == 20, "%d batches, %d rows", batches, rows);
  EXPECT(bad == 0, "%d wrong values", bad);
  /* The device queue is chosen before the first row. */
  spora_status_t qs = spora_dataset_iter_set_device_queue(it, 1);
  EXPECT(qs == SPORA_ERROR_INVALID_ARGUMENT && strstr(spora_last_error(), "before the first spora_dataset_iter_next"),
         "status %d: %s", qs, spora_last_error());
  OK(spora_dataset_iter_free(it));

  /* The same batches through the device queue of a device with its own
   * memory (sim, when its plugin is loaded), 2 batches copied ahead. */
  spora_device_t* sim = NULL;
  if (spora_device_find(ctx, "sim", &sim) == SPORA_OK) {
    OK(spora_dataset_iter_create(repeated, sim, 0, 2, &it));
    qs = spora_dataset_iter_set_device_queue(it, 65);
    EXPECT(qs == SPORA_ERROR_INVALID_ARGUMENT && strstr(spora_last_error(), "[0, 64], got 65"), "status %d: %s", qs,
           spora_last_error());
    OK(spora_dataset_iter_set_device_queue(it, 2));
    int qrows = 0, qbad = 0;
    for (;;) {
      spora_tensor_t* out[2] = {NULL, NULL};
      int32_t has = 0;
      OK(spora_dataset_iter_next(it, out, 2, &has));
      if (!has) break;
      int64_t n = 0;
      OK(spora_tensor_shape(out[1], &n, 1));
      int32_t lab[4];
      float img[4 * 4];
      OK(spora_tensor_read(out[1], lab, sizeof lab));
      OK(spora_tensor_read(out[0], img, sizeof img));
      for (i = 0; i < n; ++i) {
        const int sample = (qrows + i) % 10;
        if (lab[i] != sample || img[i * 4 + 3] != (float)(10 * sample + 3) * 0.5f + 1.0f) qbad++;
      }
      qrows += (int)n;
      spora_tensor_free(out[0]);
      spora_tensor_free(out[1]);
    }
    EXPECT(qrows == 20 && qbad == 0, "sim device queue: %d rows, %d wrong", qrows, qbad);
    OK(spora_dataset_iter_free(it));
  } else {
    printf("device queue on sim: no sim device, skipped\n");
  }

  /* Errors: status + a message naming the step or file. */
  spora_dataset_t* none = NULL;
  spora_status_t s = spora_dataset_batch(src, 0, 0, &none);
  EXPECT(s == SPORA_ERROR_INVALID_ARGUMENT && strstr(spora_last_error(), "[dataset batch] batch_size"),
         "status %d: %s", s, spora_last_error());
  const char* missing[1] = {"/nonexistent/train-images-idx3-ubyte.gz"};
  s = spora_dataset_from_idx(missing, names, NULL, 1, &none);
  EXPECT(s == SPORA_ERROR_NOT_FOUND && strstr(spora_last_error(), "/nonexistent/train-images-idx3-ubyte.gz"),
         "status %d: %s", s, spora_last_error());
  spora_transform_t* unknown = NULL;
  s = spora_transform_create("random_rotate", NULL, &unknown);
  EXPECT(s == SPORA_ERROR_NOT_FOUND && strstr(spora_last_error(), "random_rotate"), "status %d: %s", s,
         spora_last_error());
  s = spora_dataset_sampler(mapped, 1, 0, 2, 0, &none);
  EXPECT(s == SPORA_ERROR_INVALID_ARGUMENT && strstr(spora_last_error(), "source dataset"), "status %d: %s", s,
         spora_last_error());

  /* spora_image_decode: a 2x1 RGB PNG (pixels (10, 20, 30), (200, 150, 100)),
   * then the same cut short. */
  static const unsigned char png[72] = {
      0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00,
      0x00, 0x02, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x7b, 0x40, 0xe8, 0xdd, 0x00, 0x00, 0x00,
      0x0f, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xe0, 0x12, 0x91, 0x3b, 0x31, 0x2d, 0x05, 0x00, 0x05, 0x07,
      0x01, 0xff, 0x06, 0x7c, 0xb6, 0xfd, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82};
  spora_tensor_t* img = NULL;
  s = spora_image_decode(png, sizeof png, "tiny.png", cpu, &img);
  if (s == SPORA_ERROR_UNIMPLEMENTED) {
    printf("spora_image_decode: built without libpng, skipped\n");
  } else {
    int64_t dims[3] = {0, 0, 0};
    unsigned char px[6] = {0, 0, 0, 0, 0, 0};
    OK(s);
    OK(spora_tensor_shape(img, dims, 3));
    OK(spora_tensor_read(img, px, sizeof px));
    EXPECT(dims[0] == 1 && dims[1] == 2 && dims[2] == 3, "decoded shape %ld %ld %ld", (long)dims[0], (long)dims[1],
           (long)dims[2]);
    EXPECT(px[0] == 10 && px[2] == 30 && px[3] == 200 && px[5] == 100, "decoded pixels %d %d %d %d", px[0], px[2],
           px[3], px[5]);
    spora_tensor_free(img);
    img = NULL;
    s = spora_image_decode(png, 50, "tiny.png", cpu, &img);
    EXPECT(s == SPORA_ERROR_INVALID_ARGUMENT && strstr(spora_last_error(), "tiny.png: corrupt PNG image"),
           "status %d: %s", s, spora_last_error());
  }
  s = spora_image_decode("GIF89a", 6, "anim.gif", cpu, &img);
  EXPECT(s == SPORA_ERROR_INVALID_ARGUMENT && strstr(spora_last_error(), "anim.gif: not a JPEG or PNG image"),
         "status %d: %s", s, spora_last_error());

  spora_attrs_free(a);
  spora_dataset_free(repeated);
  spora_dataset_free(batched);
  spora_dataset_free(mapped);
  spora_dataset_free(src);
  spora_tensor_free(tx);
  spora_tensor_free(ty);
  spora_context_free(ctx);
  printf("%d passed, %d failed\n", g_pass, g_fail);
  return g_fail ? 1 : 0;
}
