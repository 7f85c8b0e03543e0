/* End-to-end test of spora.h, compiled as C99: devices, tensors, eager ops
 * on every usable device, and the error contract (status + message, never an
 * abort). Prints "N passed, M failed" and exits non-zero on any failure. */
#include <math.h>
#include <spora/spora.h>
#include <stdio.h>
#include <string.h>

static int g_pass = 0, g_fail = 0;

#define EXPECT(cond, ...)                                        \
  do {                                                           \
    if (cond) {                                                  \
      g_pass++;                                                  \
    } else {                                                     \
      g_fail++;                                                  \
      fprintf(stderr, "%s:%d: FAILED %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                              \
      fprintf(stderr, "\n");                                     \
    }                                                            \
  } while (0)

#define OK(call) EXPECT((call) == SPORA_OK, "%s", spora_last_error())

/* Expects `call` to fail with `status` and a message containing `text`. */
#define FAILS(call, status, text)                                              \
  do {                                                                         \
    spora_status_t s_ = (call);                                                \
    EXPECT(s_ == (status), "status %d (%s), want %d; message: %s", s_,         \
           spora_status_string(s_), (status), spora_last_error());             \
    EXPECT(strstr(spora_last_error(), (text)) != NULL, "message '%s' lacks '%s'", \
           spora_last_error(), (text));                                        \
  } while (0)

static spora_tensor_t* make(spora_device_t* d, spora_dtype_t t, const int64_t* shape, int32_t nd, const void* data,
                            size_t bytes) {
  spora_tensor_t* out = NULL;
  OK(spora_tensor_create(d, t, shape, nd, data, bytes, &out));
  return out;
}

static spora_tensor_t* call1(const char* op, spora_tensor_t* a, spora_tensor_t* b, const spora_attrs_t* attrs) {
  spora_tensor_t* in[2];
  spora_tensor_t* out = NULL;
  in[0] = a;
  in[1] = b;
  OK(spora_op_call(op, NULL, in, b ? 2 : 1, attrs, &out, 1));
  return out;
}

static void test_device(spora_device_t* dev) {
  const char* name = NULL;
  const double x[6] = {1, 2, 3, 4, 5, 6};
  const double row[3] = {10, 20, 30};
  const int64_t s23[2] = {2, 3}, s3[1] = {3}, s32[2] = {3, 2};
  double out[6], mm[4];
  int64_t shape[SPORA_MAX_NDIM];
  int32_t nd = 0;
  spora_dtype_t dt;
  spora_tensor_t *a, *b, *y, *t, *m, *r, *s;
  spora_attrs_t* attrs;
  int i;

  OK(spora_device_name(dev, &name));
  printf("  device %s\n", name);
  a = make(dev, SPORA_DTYPE_F64, s23, 2, x, sizeof x);
  b = make(dev, SPORA_DTYPE_F64, s3, 1, row, sizeof row);

  /* add broadcasts (2,3) + (3,) */
  y = call1("add", a, b, NULL);
  OK(spora_tensor_ndim(y, &nd));
  OK(spora_tensor_shape(y, shape, SPORA_MAX_NDIM));
  EXPECT(nd == 2 && shape[0] == 2 && shape[1] == 3, "add shape");
  OK(spora_tensor_read(y, out, sizeof out));
  for (i = 0; i < 6; ++i) EXPECT(out[i] == x[i] + row[i % 3], "add[%d] = %g", i, out[i]);
  OK(spora_tensor_dtype(y, &dt));
  EXPECT(dt == SPORA_DTYPE_F64, "dtype %d", dt);

  /* transpose, then matmul: (2,3) @ (3,2) */
  t = call1("transpose", a, NULL, NULL);
  OK(spora_tensor_shape(t, shape, SPORA_MAX_NDIM));
  EXPECT(shape[0] == 3 && shape[1] == 2, "transpose shape");
  m = call1("matmul", a, t, NULL);
  OK(spora_tensor_read(m, mm, sizeof mm));
  EXPECT(mm[0] == 14 && mm[1] == 32 && mm[2] == 32 && mm[3] == 77, "a @ a^T = [%g %g %g %g]", mm[0], mm[1], mm[2],
         mm[3]);

  /* reshape is a view with a new shape; sum over axis 0 */
  OK(spora_attrs_create(&attrs));
  {
    const int64_t want[2] = {3, -1};
    OK(spora_attrs_set_ints(attrs, "shape", want, 2));
  }
  r = call1("reshape", a, NULL, attrs);
  spora_attrs_free(attrs);
  OK(spora_tensor_shape(r, shape, SPORA_MAX_NDIM));
  EXPECT(shape[0] == 3 && shape[1] == 2, "reshape shape");
  OK(spora_attrs_create(&attrs));
  OK(spora_attrs_set_ints(attrs, "axes", s23 + 1, 0)); /* empty = all axes */
  OK(spora_attrs_set_bool(attrs, "keepdims", 0));
  s = call1("sum", r, NULL, attrs);
  spora_attrs_free(attrs);
  OK(spora_tensor_ndim(s, &nd));
  OK(spora_tensor_read(s, out, sizeof(double)));
  EXPECT(nd == 0 && out[0] == 21, "sum = %g (ndim %d)", out[0], nd);
  spora_tensor_free(s);

  /* softmax rows sum to 1 and match exp(x)/sum exp(x) */
  s = call1("softmax", a, NULL, NULL);
  OK(spora_tensor_read(s, out, sizeof out));
  {
    double z = exp(1.0) + exp(2.0) + exp(3.0);
    EXPECT(fabs(out[0] - exp(1.0) / z) < 1e-12, "softmax[0] = %g", out[0]);
    EXPECT(fabs(out[3] + out[4] + out[5] - 1) < 1e-12, "softmax row sum");
  }

  /* Errors: each a status and a message naming the op. */
  {
    spora_tensor_t* bad = make(dev, SPORA_DTYPE_F64, s32, 2, x, sizeof x);
    spora_tensor_t *in[2], *o = NULL;
    float xf[6] = {0};
    spora_tensor_t* f32 = make(dev, SPORA_DTYPE_F32, s23, 2, xf, sizeof xf);
    in[0] = a;
    in[1] = bad;
    FAILS(spora_op_call("add", NULL, in, 2, NULL, &o, 1), SPORA_ERROR_INVALID_ARGUMENT, "[add] shapes (2,3) and (3,2)");
    in[1] = a;
    FAILS(spora_op_call("matmul", NULL, in, 2, NULL, &o, 1), SPORA_ERROR_INVALID_ARGUMENT, "do not contract");
    in[1] = f32;
    FAILS(spora_op_call("mul", NULL, in, 2, NULL, &o, 1), SPORA_ERROR_INVALID_ARGUMENT, "different dtypes");
    FAILS(spora_op_call("conv9d", NULL, in, 1, NULL, &o, 1), SPORA_ERROR_NOT_FOUND, "[conv9d] unknown op");
    in[1] = NULL;
    FAILS(spora_op_call("add", NULL, in, 2, NULL, &o, 1), SPORA_ERROR_INVALID_ARGUMENT, "null tensor");
    FAILS(spora_op_call("neg", NULL, in, 1, NULL, &o, 2), SPORA_ERROR_INVALID_ARGUMENT, "produces 1 output");
    OK(spora_attrs_create(&attrs));
    OK(spora_attrs_set_int(attrs, "axis", 5));
    FAILS(spora_op_call("softmax", NULL, in, 1, attrs, &o, 1), SPORA_ERROR_INVALID_ARGUMENT, "[softmax] axis 5");
    spora_attrs_free(attrs);
    OK(spora_attrs_create(&attrs));
    OK(spora_attrs_set_string(attrs, "perm", "reverse"));
    FAILS(spora_op_call("transpose", NULL, in, 1, attrs, &o, 1), SPORA_ERROR_INVALID_ARGUMENT,
          "[transpose] attribute 'perm' must be ints");
    spora_attrs_free(attrs);
    OK(spora_attrs_create(&attrs));
    OK(spora_attrs_set_int(attrs, "colour", 1));
    FAILS(spora_op_call("transpose", NULL, in, 1, attrs, &o, 1), SPORA_ERROR_INVALID_ARGUMENT, "unknown attribute 'colour'");
    spora_attrs_free(attrs);
    FAILS(spora_tensor_create(dev, SPORA_DTYPE_F64, s23, 2, x, 5, &o), SPORA_ERROR_INVALID_ARGUMENT, "needs 48 bytes");
    FAILS(spora_tensor_create(dev, (spora_dtype_t)99, s23, 2, NULL, 0, &o), SPORA_ERROR_INVALID_ARGUMENT, "dtype");
    FAILS(spora_tensor_read(a, out, 8), SPORA_ERROR_INVALID_ARGUMENT, "needs 48 bytes");
    EXPECT(o == NULL, "no output written on failure");
    spora_tensor_free(bad);
    spora_tensor_free(f32);
  }

  spora_tensor_free(a);
  spora_tensor_free(b);
  spora_tensor_free(y);
  spora_tensor_free(t);
  spora_tensor_free(m);
  spora_tensor_free(r);
  spora_tensor_free(s);
}

/* An optimizer step from C: sgd_update with momentum written into the
 * param's and buffer's own tensors (spora_op_call_into). */
static void test_update_in_place(spora_device_t* dev) {
  const double p[3] = {1, 2, 3}, g[3] = {0.5, -1, 2}, buf[3] = {1, 1, 1}, lr = 0.1, one = 1;
  const int64_t s3[1] = {3};
  double got[3];
  int i;
  spora_attrs_t* attrs = NULL;
  spora_tensor_t* in[5];
  spora_tensor_t* out[2];
  in[0] = make(dev, SPORA_DTYPE_F64, NULL, 0, &lr, 8);
  in[1] = make(dev, SPORA_DTYPE_F64, NULL, 0, &one, 8);
  in[2] = make(dev, SPORA_DTYPE_F64, s3, 1, p, sizeof p);
  in[3] = make(dev, SPORA_DTYPE_F64, s3, 1, g, sizeof g);
  in[4] = make(dev, SPORA_DTYPE_F64, s3, 1, buf, sizeof buf);
  OK(spora_attrs_create(&attrs));
  OK(spora_attrs_set_float(attrs, "momentum", 0.9));
  out[0] = in[2];
  out[1] = in[4];
  OK(spora_op_call_into("sgd_update", NULL, in, 5, attrs, out, 2));
  OK(spora_tensor_read(in[4], got, sizeof got));
  for (i = 0; i < 3; ++i) EXPECT(fabs(got[i] - (0.9 * buf[i] + g[i])) < 1e-12, "buffer %d: %g", i, got[i]);
  OK(spora_tensor_read(in[2], got, sizeof got));
  for (i = 0; i < 3; ++i)
    EXPECT(fabs(got[i] - (p[i] - lr * (0.9 * buf[i] + g[i]))) < 1e-12, "param %d: %g", i, got[i]);
  out[0] = in[3]; /* the new param over the grad: refused, nothing written */
  FAILS(spora_op_call_into("sgd_update", NULL, in, 5, attrs, out, 2), SPORA_ERROR_INVALID_ARGUMENT,
        "[sgd_update] output 0 overlaps input 3");
  OK(spora_tensor_read(in[3], got, sizeof got));
  EXPECT(got[1] == -1, "grad untouched");
  spora_attrs_free(attrs);
  for (i = 0; i < 5; ++i) spora_tensor_free(in[i]);
}

/* Graph mode from C: build y = sum(tanh(x) * w), differentiate, optimise,
 * compile, run on `dev`, check the gradient dy/dw = tanh(x). */
static void test_graph(spora_device_t* dev) {
  spora_graph_t *g = NULL, *gg = NULL, *back = NULL;
  spora_executable_t* exe = NULL;
  spora_value_t x, w, t, m, y, wrt[1], outs[4];
  spora_value_t in2[2];
  size_t n = 0;
  const int64_t s3[1] = {3};
  const double xv[3] = {0.5, -1.0, 2.0}, wv[3] = {1.0, 2.0, 3.0};
  double loss = 0, grad[3];
  spora_tensor_t *tx, *tw, *params[2], *res[2] = {NULL, NULL};
  const char *text = NULL, *json = NULL;
  int i;
  uint64_t planned = 0, naive = 0;

  OK(spora_graph_create("c_graph", &g));
  OK(spora_graph_add_input(g, "x", SPORA_DTYPE_F64, s3, 1, &x));
  OK(spora_graph_add_weight(g, "w", SPORA_DTYPE_F64, s3, 1, &w));
  OK(spora_graph_add_op(g, "tanh", &x, 1, NULL, "model.c", 10, &t, 1, &n));
  in2[0] = t;
  in2[1] = w;
  OK(spora_graph_add_op(g, "mul", in2, 2, NULL, "model.c", 11, &m, 1, &n));
  OK(spora_graph_add_op(g, "sum", &m, 1, NULL, "model.c", 12, &y, 1, &n));
  OK(spora_graph_set_outputs(g, &y, 1));
  OK(spora_graph_to_text(g, &text));
  EXPECT(strstr(text, "# model.c:11") != NULL, "text: %s", text);
  /* A shape error names the op and the line. */
  {
    const int64_t s4[1] = {4};
    spora_value_t z, bad[2];
    OK(spora_graph_add_input(g, "z", SPORA_DTYPE_F64, s4, 1, &z));
    bad[0] = x;
    bad[1] = z;
    FAILS(spora_graph_add_op(g, "add", bad, 2, NULL, "model.c", 13, outs, 4, &n), SPORA_ERROR_INVALID_ARGUMENT,
          "(model.c:13)");
    spora_graph_free(g);
    OK(spora_graph_create("c_graph", &g));
    OK(spora_graph_add_input(g, "x", SPORA_DTYPE_F64, s3, 1, &x));
    OK(spora_graph_add_weight(g, "w", SPORA_DTYPE_F64, s3, 1, &w));
    OK(spora_graph_add_op(g, "tanh", &x, 1, NULL, "model.c", 10, &t, 1, &n));
    in2[0] = t;
    in2[1] = w;
    OK(spora_graph_add_op(g, "mul", in2, 2, NULL, "model.c", 11, &m, 1, &n));
    OK(spora_graph_add_op(g, "sum", &m, 1, NULL, "model.c", 12, &y, 1, &n));
    OK(spora_graph_set_outputs(g, &y, 1));
  }
  /* tanh and mul as one recomputed region (mul's output leaves it and is
   * kept); the gradient of w reads tanh's output, computed again there. */
  {
    int64_t nodes = 0, marked = 0;
    OK(spora_graph_num_nodes(g, &nodes));
    EXPECT(nodes == 5, "nodes %lld", (long long)nodes);
    OK(spora_graph_mark_recompute(g, 2, 4, 2, &marked));
    EXPECT(marked == 2, "marked %lld", (long long)marked);
    OK(spora_graph_mark_recompute(g, 5, 5, 3, NULL));
    FAILS(spora_graph_mark_recompute(g, 0, 6, 2, NULL), SPORA_ERROR_INVALID_ARGUMENT, "outside graph");
  }
  wrt[0] = w;
  OK(spora_graph_grad(g, wrt, 1, 0, &gg));
  OK(spora_graph_optimize(gg, 1));
  OK(spora_graph_to_text(gg, &text));
  EXPECT(strstr(text, "recompute=0") != NULL, "no recomputed copy of tanh: %s", text);
  OK(spora_graph_run_pass(gg, "dce"));
  FAILS(spora_graph_run_pass(gg, "no_such_pass"), SPORA_ERROR_INVALID_ARGUMENT, "mixed_precision");
  /* JSON round trip, then compile the reloaded graph. */
  OK(spora_graph_to_json(gg, &json));
  OK(spora_graph_from_json(json, strlen(json), &back));
  OK(spora_graph_compile(back, dev, &exe));
  OK(spora_executable_memory(exe, &planned, &naive));
  EXPECT(naive > 0, "naive bytes %llu", (unsigned long long)naive);
  OK(spora_tensor_create(dev, SPORA_DTYPE_F64, s3, 1, xv, sizeof xv, &tx));
  OK(spora_tensor_create(dev, SPORA_DTYPE_F64, s3, 1, wv, sizeof wv, &tw));
  params[0] = tx;
  params[1] = tw;
  OK(spora_executable_run(exe, params, 2, res, 2));
  OK(spora_tensor_read(res[0], &loss, sizeof loss));
  OK(spora_tensor_read(res[1], grad, sizeof grad));
  {
    double want = 0;
    for (i = 0; i < 3; ++i) {
      want += tanh(xv[i]) * wv[i];
      EXPECT(fabs(grad[i] - tanh(xv[i])) < 1e-12, "grad[%d] = %g", i, grad[i]);
    }
    EXPECT(fabs(loss - want) < 1e-12, "loss %g, want %g", loss, want);
  }
  FAILS(spora_executable_run(exe, params, 1, res, 2), SPORA_ERROR_INVALID_ARGUMENT, "takes 2 inputs and weights");
  FAILS(spora_graph_from_json("{\"format\": 1}", 13, &back), SPORA_ERROR_INVALID_ARGUMENT, "[graph json]");
  spora_tensor_free(res[0]);
  spora_tensor_free(res[1]);
  spora_tensor_free(tx);
  spora_tensor_free(tw);
  spora_executable_free(exe);
  spora_graph_free(back);
  spora_graph_free(gg);
  spora_graph_free(g);
}

/* The same model eagerly, recorded on a tape and differentiated there. */
static void test_tape(spora_device_t* dev) {
  spora_tape_t *tape = NULL, *inner = NULL;
  spora_graph_t* g = NULL;
  const int64_t s3[1] = {3};
  const double xv[3] = {0.5, -1.0, 2.0}, wv[3] = {1.0, 2.0, 3.0};
  double gx[3], gw[3];
  spora_tensor_t *tx, *tw, *t = NULL, *m = NULL, *y = NULL, *in2[2], *grads[2] = {NULL, NULL};
  const spora_tensor_t *src[2], *outs[1];
  const char* text = NULL;
  int i;

  tx = make(dev, SPORA_DTYPE_F64, s3, 1, xv, sizeof xv);
  tw = make(dev, SPORA_DTYPE_F64, s3, 1, wv, sizeof wv);
  OK(spora_tape_create(&tape));
  OK(spora_tape_watch(tape, tx));
  OK(spora_tape_watch(tape, tw));
  OK(spora_tape_start(tape));
  OK(spora_op_call_at("tanh", NULL, &tx, 1, NULL, "model.c", 20, &t, 1));
  in2[0] = t;
  in2[1] = tw;
  OK(spora_op_call_at("mul", NULL, in2, 2, NULL, "model.c", 21, &m, 1));
  OK(spora_op_call_at("sum", NULL, &m, 1, NULL, "model.c", 22, &y, 1));
  OK(spora_tape_create(&inner));
  OK(spora_tape_start(inner));
  FAILS(spora_tape_stop(tape), SPORA_ERROR_INVALID_ARGUMENT, "not the innermost");
  OK(spora_tape_stop(inner));
  OK(spora_tape_free(inner));
  OK(spora_tape_stop(tape));

  src[0] = tx;
  src[1] = tw;
  OK(spora_tape_gradient(tape, y, NULL, src, 2, grads));
  OK(spora_tensor_read(grads[0], gx, sizeof gx));
  OK(spora_tensor_read(grads[1], gw, sizeof gw));
  for (i = 0; i < 3; ++i) {
    const double th = tanh(xv[i]);
    EXPECT(fabs(gw[i] - th) < 1e-15, "dy/dw[%d] = %g", i, gw[i]);
    EXPECT(fabs(gx[i] - (1 - th * th) * wv[i]) < 1e-15, "dy/dx[%d] = %g", i, gx[i]);
  }
  outs[0] = y;
  OK(spora_tape_graph(tape, outs, 1, &g));
  OK(spora_graph_to_text(g, &text));
  EXPECT(strstr(text, "= mul(%1, %2) : f64[3]  # model.c:21") != NULL, "text: %s", text);
  EXPECT(strstr(text, "%0 = input \"x0\"") != NULL, "text: %s", text);
  src[1] = NULL;
  FAILS(spora_tape_gradient(tape, y, NULL, src, 2, grads), SPORA_ERROR_INVALID_ARGUMENT, "sources[1] is null");
  spora_graph_free(g);
  spora_tensor_free(grads[0]);
  spora_tensor_free(grads[1]);
  OK(spora_tape_free(tape));
  spora_tensor_free(y);
  spora_tensor_free(m);
  spora_tensor_free(t);
  spora_tensor_free(tx);
  spora_tensor_free(tw);
}

/* Process-wide options: with matmul_precision "high" the core passes the
 * attribute to matmul kernels; every device accepts it (cpu and sim compute
 * f32 as before). */
static void test_options(spora_device_t* dev) {
  static const float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
  const int64_t s[2] = {2, 2};
  const char* v = NULL;
  float y[4] = {0, 0, 0, 0};
  spora_tensor_t *ta = make(dev, SPORA_DTYPE_F32, s, 2, a, sizeof a), *tb = make(dev, SPORA_DTYPE_F32, s, 2, b, sizeof b);
  spora_tensor_t* ty;
  OK(spora_get_option("matmul_precision", &v));
  EXPECT(v && strcmp(v, "highest") == 0, "default matmul_precision %s", v ? v : "(null)");
  OK(spora_set_option("matmul_precision", "high"));
  OK(spora_get_option("matmul_precision", &v));
  EXPECT(v && strcmp(v, "high") == 0, "matmul_precision %s", v ? v : "(null)");
  ty = call1("matmul", ta, tb, NULL);
  OK(spora_tensor_read(ty, y, sizeof y));
  EXPECT(y[0] == 19 && y[1] == 22 && y[2] == 43 && y[3] == 50, "matmul under \"high\": %g %g %g %g", y[0], y[1], y[2],
         y[3]);
  FAILS(spora_set_option("matmul_precision", "fast"), SPORA_ERROR_INVALID_ARGUMENT, "\"highest\", \"high\" or \"medium\"");
  FAILS(spora_set_option("tf32", "1"), SPORA_ERROR_INVALID_ARGUMENT, "unknown option");
  FAILS(spora_get_option("tf32", &v), SPORA_ERROR_INVALID_ARGUMENT, "unknown option");
  FAILS(spora_set_option(NULL, "high"), SPORA_ERROR_INVALID_ARGUMENT, "key");
  FAILS(spora_get_option("matmul_precision", NULL), SPORA_ERROR_INVALID_ARGUMENT, "out");
  OK(spora_set_option("matmul_precision", "highest"));
  spora_tensor_free(ta);
  spora_tensor_free(tb);
  spora_tensor_free(ty);
}

/* conv_precision "high" lets a device use TF32 for f32 convolutions; cpu
 * and sim ignore it: the same bits as under "highest", for inputs whose
 * products TF32 would round. */
static void test_conv_precision(spora_device_t* dev) {
  const int64_t xs[4] = {1, 1, 4, 4}, ws[4] = {1, 1, 3, 3};
  float x[16], w[9], y0[4], y1[4];
  const char* v = NULL;
  spora_tensor_t *tx, *tw, *ty;
  int i;
  for (i = 0; i < 16; ++i) x[i] = 1.0f / (float)(i + 3);
  for (i = 0; i < 9; ++i) w[i] = 1.0f + 1.0f / (float)(i + 7);
  tx = make(dev, SPORA_DTYPE_F32, xs, 4, x, sizeof x);
  tw = make(dev, SPORA_DTYPE_F32, ws, 4, w, sizeof w);
  OK(spora_get_option("conv_precision", &v));
  EXPECT(v && strcmp(v, "highest") == 0, "default conv_precision %s", v ? v : "(null)");
  ty = call1("conv2d", tx, tw, NULL);
  OK(spora_tensor_read(ty, y0, sizeof y0));
  spora_tensor_free(ty);
  OK(spora_set_option("conv_precision", "high"));
  OK(spora_get_option("conv_precision", &v));
  EXPECT(v && strcmp(v, "high") == 0, "conv_precision %s", v ? v : "(null)");
  ty = call1("conv2d", tx, tw, NULL);
  OK(spora_tensor_read(ty, y1, sizeof y1));
  EXPECT(memcmp(y0, y1, sizeof y0) == 0, "conv2d under \"high\": %.9g %.9g %.9g %.9g, not %.9g %.9g %.9g %.9g", y1[0],
         y1[1], y1[2], y1[3], y0[0], y0[1], y0[2], y0[3]);
  FAILS(spora_set_option("conv_precision", "medium"), SPORA_ERROR_INVALID_ARGUMENT, "\"highest\" or \"high\"");
  OK(spora_get_option("conv_precision", &v));
  EXPECT(v && strcmp(v, "high") == 0, "a refused conv_precision changed it to %s", v ? v : "(null)");
  OK(spora_set_option("conv_precision", "highest"));
  spora_tensor_free(ty);
  spora_tensor_free(tx);
  spora_tensor_free(tw);
}

int main(void) {
  spora_context_t* ctx = NULL;
  spora_device_t *dev, *cpu = NULL, *sim = NULL;
  size_t n = 0, i, nops = 0;
  int32_t major = -1;

  OK(spora_version(&major, NULL, NULL));
  EXPECT(major == SPORA_VERSION_MAJOR, "version");
  OK(spora_context_create(&ctx));
  OK(spora_device_count(ctx, &n));
  EXPECT(n >= 2, "expected cpu and sim devices, got %zu", n);
  for (i = 0; i < n; ++i) {
    OK(spora_device_get(ctx, i, &dev));
    test_device(dev);
    test_graph(dev);
    test_update_in_place(dev);
    test_tape(dev);
    test_options(dev);
    test_conv_precision(dev);
  }
  OK(spora_op_count(&nops));
  EXPECT(nops >= 16, "op count %zu", nops);
  {
    const char* schema = NULL;
    OK(spora_op_schema("sum", &schema));
    EXPECT(strstr(schema, "keepdims: bool = false") != NULL, "schema: %s", schema);
  }

  /* Device lookup by name. */
  OK(spora_device_find(ctx, "cpu", &cpu));
  OK(spora_device_find(ctx, "sim:0", &sim));
  /* Backend names are case-insensitive, and a bare name is device 0. */
  OK(spora_device_find(ctx, "SIM:0", &dev));
  EXPECT(dev == sim, "SIM:0 is another device than sim:0");
  OK(spora_device_find(ctx, "Sim", &dev));
  EXPECT(dev == sim, "Sim is another device than sim:0");
  FAILS(spora_device_find(ctx, "tpu:0", &dev), SPORA_ERROR_NOT_FOUND, "unknown backend 'tpu'");
  FAILS(spora_device_find(ctx, "cpu:7", &dev), SPORA_ERROR_NOT_FOUND, "index 7");
  FAILS(spora_device_find(ctx, "cpu:x", &dev), SPORA_ERROR_INVALID_ARGUMENT, "not a device name");
  /* The fallback switch takes 0 or 1 (tests/fallback checks what it does). */
  FAILS(spora_device_set_fallback(sim, 2), SPORA_ERROR_INVALID_ARGUMENT, "must be 0 or 1");
  OK(spora_device_set_fallback(sim, 0));
  OK(spora_device_set_fallback(sim, 1));

  /* A tensor moves between devices; mixing devices in one op is an error. */
  {
    const float v[4] = {1, -2, 3, -4};
    const int64_t s4[1] = {4};
    float back[4];
    spora_tensor_t *c = make(cpu, SPORA_DTYPE_F32, s4, 1, v, sizeof v), *g = NULL, *in[2], *o = NULL;
    spora_device_t* where = NULL;
    OK(spora_tensor_to(c, sim, &g));
    OK(spora_tensor_device(g, &where));
    EXPECT(where == sim, "tensor_to device");
    OK(spora_tensor_read(g, back, sizeof back));
    EXPECT(memcmp(back, v, sizeof v) == 0, "round trip through sim");
    in[0] = c;
    in[1] = g;
    FAILS(spora_op_call("add", NULL, in, 2, NULL, &o, 1), SPORA_ERROR_INVALID_ARGUMENT, "is on sim:0");
    spora_tensor_free(c);
    spora_tensor_free(g);
  }

  /* Null handles never crash. */
  FAILS(spora_context_create(NULL), SPORA_ERROR_INVALID_ARGUMENT, "out is null");
  FAILS(spora_device_count(NULL, &n), SPORA_ERROR_INVALID_ARGUMENT, "ctx is null");
  FAILS(spora_tensor_create(NULL, SPORA_DTYPE_F32, NULL, 0, NULL, 0, NULL), SPORA_ERROR_INVALID_ARGUMENT, "is null");
  FAILS(spora_tensor_read(NULL, NULL, 0), SPORA_ERROR_INVALID_ARGUMENT, "tensor is null");
  FAILS(spora_op_call(NULL, NULL, NULL, 0, NULL, NULL, 0), SPORA_ERROR_INVALID_ARGUMENT, "op is null");
  FAILS(spora_device_name(NULL, NULL), SPORA_ERROR_INVALID_ARGUMENT, "is null");
  FAILS(spora_device_set_fallback(NULL, 0), SPORA_ERROR_INVALID_ARGUMENT, "device is null");
  FAILS(spora_context_add_plugin_path(ctx, "/nonexistent"), SPORA_ERROR_INVALID_ARGUMENT, "after discovery");
  OK(spora_tensor_free(NULL));
  OK(spora_context_free(ctx));

  printf("%d passed, %d failed\n", g_pass, g_fail);
  return g_fail ? 1 : 0;
}
