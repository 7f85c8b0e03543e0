/* The exported-model path as a C consumer sees it, in two halves around the
 * examples/c/run_model.c program (ctest fixtures, tests/abi/CMakeLists.txt):
 *
 *   model_file_test make DIR DEVICE   builds a small graph with two inputs
 *       and weights, saves DIR/model.spora, writes the inputs DIR/x.bin and
 *       DIR/y.bin and the expected outputs DIR/expected<i>.bin (the original
 *       graph run op by op with spora_graph_run_eager on DEVICE);
 *   spora_run_model DIR/model.spora DEVICE DIR/x.bin DIR/y.bin --out DIR/out
 *   model_file_test check DIR         compares DIR/out<i>.bin with
 *       DIR/expected<i>.bin (f32, relative tolerance 1e-5).
 */
#include <math.h>
#include <spora/spora.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                   \
  do {                                                                                \
    spora_status_t s_ = (call);                                                       \
    if (s_ != SPORA_OK) {                                                             \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, spora_last_error()); \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)

enum { B = 3, I = 5, H = 4, NOUT = 2 };

static void write_bin(const char* dir, const char* name, const void* data, size_t n) {
  char path[4096];
  FILE* f;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  f = fopen(path, "wb");
  if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) {
    fprintf(stderr, "cannot write %s\n", path);
    exit(1);
  }
}

static size_t read_bin(const char* dir, const char* name, float* data, size_t cap) {
  char path[4096];
  FILE* f;
  size_t n;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s\n", path);
    exit(1);
  }
  n = fread(data, sizeof(float), cap, f);
  fclose(f);
  return n;
}

/* Deterministic values in [-1, 1). */
static void fill(float* v, size_t n, unsigned seed) {
  size_t i;
  for (i = 0; i < n; ++i) {
    seed = seed * 1103515245u + 12345u;
    v[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
  }
}

static int make(const char* dir, const char* device) {
  spora_context_t* ctx;
  spora_device_t* dev;
  spora_graph_t* g;
  spora_value_t x, y, w, b, h, a, z, s, outs[NOUT];
  size_t n;
  const int64_t xs[2] = {B, I}, ys[2] = {B, H}, ws[2] = {H, I}, bs[1] = {H};
  float xv[B * I], yv[B * H], wv[H * I], bv[H];
  spora_tensor_t *tx, *ty, *tw, *tb, *res[NOUT];
  spora_attrs_t* attrs;
  char model[4096];
  int k;

  CHECK(spora_context_create(&ctx));
  CHECK(spora_device_find(ctx, device, &dev));
  /* out0 = softmax(relu(linear(x, w, b)) * y), out1 = sum(x, axis 1) */
  CHECK(spora_graph_create("exported", &g));
  CHECK(spora_graph_add_input(g, "x", SPORA_DTYPE_F32, xs, 2, &x));
  CHECK(spora_graph_add_weight(g, "fc.weight", SPORA_DTYPE_F32, ws, 2, &w));
  CHECK(spora_graph_add_input(g, "y", SPORA_DTYPE_F32, ys, 2, &y));
  CHECK(spora_graph_add_weight(g, "fc.bias", SPORA_DTYPE_F32, bs, 1, &b));
  {
    spora_value_t in[3];
    in[0] = x; in[1] = w; in[2] = b;
    CHECK(spora_graph_add_op(g, "linear", in, 3, NULL, "model.c", 1, &h, 1, &n));
  }
  CHECK(spora_graph_add_op(g, "relu", &h, 1, NULL, "model.c", 2, &a, 1, &n));
  {
    spora_value_t in[2];
    in[0] = a; in[1] = y;
    CHECK(spora_graph_add_op(g, "mul", in, 2, NULL, "model.c", 3, &z, 1, &n));
  }
  CHECK(spora_attrs_create(&attrs));
  CHECK(spora_attrs_set_int(attrs, "axis", -1));
  CHECK(spora_graph_add_op(g, "softmax", &z, 1, attrs, "model.c", 4, &outs[0], 1, &n));
  CHECK(spora_attrs_free(attrs));
  CHECK(spora_attrs_create(&attrs));
  {
    const int64_t axes[1] = {1};
    CHECK(spora_attrs_set_ints(attrs, "axes", axes, 1));
  }
  CHECK(spora_graph_add_op(g, "sum", &x, 1, attrs, "model.c", 5, &s, 1, &n));
  CHECK(spora_attrs_free(attrs));
  outs[1] = s;
  CHECK(spora_graph_set_outputs(g, outs, NOUT));

  fill(xv, B * I, 1);
  fill(yv, B * H, 2);
  fill(wv, H * I, 3);
  fill(bv, H, 4);
  CHECK(spora_tensor_create(dev, SPORA_DTYPE_F32, xs, 2, xv, sizeof xv, &tx));
  CHECK(spora_tensor_create(dev, SPORA_DTYPE_F32, ys, 2, yv, sizeof yv, &ty));
  CHECK(spora_tensor_create(dev, SPORA_DTYPE_F32, ws, 2, wv, sizeof wv, &tw));
  CHECK(spora_tensor_create(dev, SPORA_DTYPE_F32, bs, 1, bv, sizeof bv, &tb));
  {
    spora_tensor_t* weights[2];
    weights[0] = tw; weights[1] = tb;
    snprintf(model, sizeof model, "%s/model.spora", dir);
    CHECK(spora_model_save(model, g, weights, 2));
  }
  {
    /* The reference: the original graph, op by op; params in creation order. */
    spora_tensor_t* params[4];
    params[0] = tx; params[1] = tw; params[2] = ty; params[3] = tb;
    CHECK(spora_graph_run_eager(g, dev, params, 4, res, NOUT));
  }
  write_bin(dir, "x.bin", xv, sizeof xv);
  write_bin(dir, "y.bin", yv, sizeof yv);
  for (k = 0; k < NOUT; ++k) {
    float buf[B * H];
    size_t bytes;
    char name[64];
    CHECK(spora_tensor_nbytes(res[k], &bytes));
    CHECK(spora_tensor_read(res[k], buf, sizeof buf));
    snprintf(name, sizeof name, "expected%d.bin", k);
    write_bin(dir, name, buf, bytes);
    spora_tensor_free(res[k]);
  }
  spora_tensor_free(tx);
  spora_tensor_free(ty);
  spora_tensor_free(tw);
  spora_tensor_free(tb);
  spora_graph_free(g);
  spora_context_free(ctx);
  printf("wrote %s\n", model);
  return 0;
}

static int check(const char* dir) {
  int k, bad = 0;
  for (k = 0; k < NOUT; ++k) {
    float want[B * H + 1], got[B * H + 1];
    char name[64];
    size_t n_want, n_got, i;
    snprintf(name, sizeof name, "expected%d.bin", k);
    n_want = read_bin(dir, name, want, B * H + 1);
    snprintf(name, sizeof name, "out%d.bin", k);
    n_got = read_bin(dir, name, got, B * H + 1);
    if (n_want != n_got || n_want == 0) {
      fprintf(stderr, "output %d: %zu values, expected %zu\n", k, n_got, n_want);
      return 1;
    }
    for (i = 0; i < n_want; ++i)
      if (!(fabsf(got[i] - want[i]) <= 1e-5f * (1.0f + fabsf(want[i])))) {
        fprintf(stderr, "output %d[%zu]: %g, expected %g\n", k, i, got[i], want[i]);
        ++bad;
      }
    printf("output %d: %zu values match\n", k, n_want);
  }
  return bad ? 1 : 0;
}

int main(int argc, char** argv) {
  if (argc == 4 && strcmp(argv[1], "make") == 0) return make(argv[2], argv[3]);
  if (argc == 3 && strcmp(argv[1], "check") == 0) return check(argv[2]);
  fprintf(stderr, "usage: %s make DIR DEVICE | check DIR\n", argv[0]);
  return 2;
}
