/* spora_run_model: runs an exported Spora model file from C.
 *
 * Usage:
 *   spora_run_model MODEL DEVICE [INPUT.bin ...] [--out PREFIX]
 *
 *   MODEL    a model file written by spora_model_save (or Python's
 *            spora.export)
 *   DEVICE   "cpu", "sim:0", ...
 *   INPUT    one raw file per model input, in input order: the tensor's
 *            elements, dense row-major, little-endian, with exactly the
 *            size of the input's dtype and shape (no header). The shapes
 *            and dtypes come from the model.
 *   --out    where outputs go: output i is written raw (same layout) to
 *            PREFIXi.bin; without --out nothing is written.
 *
 * Given the wrong number of INPUT files (none, say) it lists the model's
 * inputs with their dtypes and shapes and exits 2.
 * For each output it prints one line:
 *   output 0: f32 [2,4] sum=1.2345 first=[0.1, 0.2, 0.3, 0.4]
 * Exit status: 0 on success, 1 on a Spora error (the message goes to
 * stderr), 2 on bad usage.
 *
 * Build: cc run_model.c -lspora */
#include <spora/spora.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                   \
  do {                                                                                \
    spora_status_t s_ = (call);                                                       \
    if (s_ != SPORA_OK) {                                                             \
      fprintf(stderr, "spora_run_model: %s: %s\n", spora_status_string(s_), spora_last_error()); \
      goto fail;                                                                      \
    }                                                                                 \
  } while (0)

static void print_type(spora_dtype_t dtype, const int64_t* dims, int32_t ndim) {
  int32_t i;
  printf("%s [", spora_dtype_name(dtype));
  for (i = 0; i < ndim; ++i) printf(i ? ",%lld" : "%lld", (long long)dims[i]);
  printf("]");
}

/* Element i of a host buffer as a double (for the summary line). */
static double element(spora_dtype_t dtype, const unsigned char* p, size_t i) {
  switch (dtype) {
    case SPORA_DTYPE_F32: { float v; memcpy(&v, p + 4 * i, 4); return v; }
    case SPORA_DTYPE_F64: { double v; memcpy(&v, p + 8 * i, 8); return v; }
    case SPORA_DTYPE_I32: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case SPORA_DTYPE_I64: { int64_t v; memcpy(&v, p + 8 * i, 8); return (double)v; }
    case SPORA_DTYPE_U8:
    case SPORA_DTYPE_BOOL: return p[i];
    case SPORA_DTYPE_F16:
    case SPORA_DTYPE_BF16: {
      uint16_t h; uint32_t bits; float v;
      memcpy(&h, p + 2 * i, 2);
      if (dtype == SPORA_DTYPE_BF16) {
        bits = (uint32_t)h << 16;
      } else { /* IEEE half to float */
        uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31u, m = h & 1023u;
        if (e == 0 && m == 0) bits = sign;
        else if (e == 0) { /* subnormal */
          e = 127 - 15 + 1;
          while (!(m & 1024u)) { m <<= 1; --e; }
          bits = sign | (e << 23) | ((m & 1023u) << 13);
        } else if (e == 31) bits = sign | 0x7f800000u | (m << 13);
        else bits = sign | ((e - 15 + 127) << 23) | (m << 13);
      }
      memcpy(&v, &bits, 4);
      return v;
    }
    default: return 0;
  }
}

/* Reads a whole file; returns NULL (with a message) on failure. */
static unsigned char* read_file(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  unsigned char* buf = NULL;
  long n;
  if (!f) { fprintf(stderr, "spora_run_model: cannot open '%s'\n", path); return NULL; }
  if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
    fprintf(stderr, "spora_run_model: cannot size '%s'\n", path);
    fclose(f);
    return NULL;
  }
  buf = (unsigned char*)malloc(n ? (size_t)n : 1);
  if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
    fprintf(stderr, "spora_run_model: cannot read '%s'\n", path);
    free(buf);
    fclose(f);
    return NULL;
  }
  fclose(f);
  *size = (size_t)n;
  return buf;
}

int main(int argc, char** argv) {
  const char *model_path, *device_name, *out_prefix = NULL;
  const char* inputs_path[64];
  size_t n_in_files = 0, n_inputs = 0, n_outputs = 0, i;
  int a, rc = 1;
  spora_context_t* ctx = NULL;
  spora_device_t* dev = NULL;
  spora_model_t* model = NULL;
  spora_tensor_t** in = NULL;
  spora_tensor_t** out = NULL;
  unsigned char* host = NULL;

  if (argc < 3) {
    fprintf(stderr, "usage: %s MODEL DEVICE [INPUT.bin ...] [--out PREFIX]\n", argv[0]);
    return 2;
  }
  model_path = argv[1];
  device_name = argv[2];
  for (a = 3; a < argc; ++a) {
    if (strcmp(argv[a], "--out") == 0 && a + 1 < argc) out_prefix = argv[++a];
    else if (n_in_files < 64) inputs_path[n_in_files++] = argv[a];
    else { fprintf(stderr, "spora_run_model: too many inputs\n"); return 2; }
  }

  CHECK(spora_context_create(&ctx));
  CHECK(spora_device_find(ctx, device_name, &dev));
  CHECK(spora_model_load(model_path, dev, &model));
  CHECK(spora_model_num_inputs(model, &n_inputs));
  CHECK(spora_model_num_outputs(model, &n_outputs));
  if (n_in_files != n_inputs) {
    fprintf(stderr, "spora_run_model: '%s' takes %zu inputs, %zu given:\n", model_path, n_inputs, n_in_files);
    for (i = 0; i < n_inputs; ++i) {
      const char* name;
      spora_dtype_t dt;
      int64_t dims[SPORA_MAX_NDIM];
      int32_t nd;
      CHECK(spora_model_input_name(model, i, &name));
      CHECK(spora_model_input_type(model, i, &dt, dims, SPORA_MAX_NDIM, &nd));
      printf("input %zu: %s ", i, name);
      print_type(dt, dims, nd);
      printf("\n");
    }
    rc = 2;
    goto fail;
  }

  in = (spora_tensor_t**)calloc(n_inputs ? n_inputs : 1, sizeof *in);
  out = (spora_tensor_t**)calloc(n_outputs ? n_outputs : 1, sizeof *out);
  if (!in || !out) { fprintf(stderr, "spora_run_model: out of memory\n"); goto fail; }
  for (i = 0; i < n_inputs; ++i) {
    spora_dtype_t dt;
    int64_t dims[SPORA_MAX_NDIM], numel = 1;
    int32_t nd, d;
    size_t size = 0, want;
    unsigned char* data;
    CHECK(spora_model_input_type(model, i, &dt, dims, SPORA_MAX_NDIM, &nd));
    for (d = 0; d < nd; ++d) numel *= dims[d];
    want = (size_t)numel * spora_dtype_size(dt);
    data = read_file(inputs_path[i], &size);
    if (!data) goto fail;
    if (size != want) {
      const char* name = "?";
      spora_model_input_name(model, i, &name);
      fprintf(stderr, "spora_run_model: input %zu ('%s', %s) needs %zu bytes; '%s' has %zu\n", i, name,
              spora_dtype_name(dt), want, inputs_path[i], size);
      free(data);
      goto fail;
    }
    {
      spora_status_t s = spora_tensor_create(dev, dt, dims, nd, data, size, &in[i]);
      free(data);
      CHECK(s);
    }
  }

  CHECK(spora_model_run(model, in, n_inputs, out, n_outputs));

  for (i = 0; i < n_outputs; ++i) {
    spora_dtype_t dt;
    int64_t dims[SPORA_MAX_NDIM], numel;
    int32_t nd;
    size_t nbytes, k;
    double sum = 0;
    CHECK(spora_tensor_dtype(out[i], &dt));
    CHECK(spora_tensor_ndim(out[i], &nd));
    CHECK(spora_tensor_shape(out[i], dims, SPORA_MAX_NDIM));
    CHECK(spora_tensor_numel(out[i], &numel));
    CHECK(spora_tensor_nbytes(out[i], &nbytes));
    free(host);
    host = (unsigned char*)malloc(nbytes ? nbytes : 1);
    if (!host) { fprintf(stderr, "spora_run_model: out of memory\n"); goto fail; }
    CHECK(spora_tensor_read(out[i], host, nbytes));
    for (k = 0; k < (size_t)numel; ++k) sum += element(dt, host, k);
    printf("output %zu: ", i);
    print_type(dt, dims, nd);
    printf(" sum=%.6g first=[", sum);
    for (k = 0; k < (size_t)numel && k < 4; ++k) printf(k ? ", %.6g" : "%.6g", element(dt, host, k));
    printf("%s]\n", numel > 4 ? ", ..." : "");
    if (out_prefix) {
      char path[4096];
      FILE* f;
      snprintf(path, sizeof path, "%s%zu.bin", out_prefix, i);
      f = fopen(path, "wb");
      if (!f || fwrite(host, 1, nbytes, f) != nbytes || fclose(f) != 0) {
        fprintf(stderr, "spora_run_model: cannot write '%s'\n", path);
        goto fail;
      }
    }
  }
  rc = 0;

fail:
  for (i = 0; in && i < n_inputs; ++i) spora_tensor_free(in[i]);
  for (i = 0; out && i < n_outputs; ++i) spora_tensor_free(out[i]);
  free(in);
  free(out);
  free(host);
  spora_model_free(model);
  spora_context_free(ctx);
  return rc;
}
