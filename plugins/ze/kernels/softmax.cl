// softmax and log_softmax along one axis, f32. The tensor is viewed as
// (outer, len, inner); one work-item per (outer, inner) line makes three
// passes over it: the max, the sum of exp(x - max), the result.
__kernel void softmax_f32(__global const float* x, __global float* y, long outer, long len, long inner,
                          int log_out) {
  const long id = get_global_id(0);
  if (id >= outer * inner) return;
  const long o = id / inner, i = id % inner;
  const long base = o * len * inner + i;
  float m = -INFINITY;
  for (long k = 0; k < len; ++k) m = fmax(m, x[base + k * inner]);
  float s = 0.0f;
  for (long k = 0; k < len; ++k) s += exp(x[base + k * inner] - m);
  if (log_out) {
    const float ls = log(s);
    for (long k = 0; k < len; ++k) y[base + k * inner] = x[base + k * inner] - m - ls;
  } else {
    const float inv = 1.0f / s;
    for (long k = 0; k < len; ++k) y[base + k * inner] = exp(x[base + k * inner] - m) * inv;
  }
}
