// Fused optimizer updates over one tensor of a group, f32 (semantics in
// docs/ops-optim.md). The scalar inputs (lr, step, grad_scale) stay in
// device memory and are read here, so a launch never waits for the host.
// Bias corrections are computed in float; the reference does them in
// double (differences of about 1e-7 relative).
#include "common.h"

__kernel void sgd_update_f32(__global float* p_out, __global float* b_out, __global const float* p,
                             __global const float* g, __global const float* b, __global const uchar* lr_p, int lr_dt,
                             __global const uchar* gs_p, int gs_dt, long n, float momentum, float keep, float wd,
                             int has_momentum, int nesterov) {
  const long j = get_global_id(0);
  if (j >= n) return;
  const float lr = read_scalar(lr_p, lr_dt), gs = read_scalar(gs_p, gs_dt);
  const float pj = p[j];
  float d = gs * g[j] + wd * pj;
  if (has_momentum) {
    const float bj = momentum * b[j] + keep * d;
    b_out[j] = bj;
    d = nesterov ? d + momentum * bj : bj;
  }
  p_out[j] = pj - lr * d;
}

__kernel void adam_update_f32(__global float* p_out, __global float* m_out, __global float* v_out,
                              __global float* vmax_out, __global const float* p, __global const float* g,
                              __global const float* m, __global const float* v, __global const float* vmax,
                              __global const uchar* lr_p, int lr_dt, __global const uchar* step_p, int step_dt,
                              __global const uchar* gs_p, int gs_dt, long n, float beta1, float beta2, float eps,
                              float wd, int decoupled, int amsgrad) {
  const long j = get_global_id(0);
  if (j >= n) return;
  const float lr = read_scalar(lr_p, lr_dt), step = read_scalar(step_p, step_dt), gs = read_scalar(gs_p, gs_dt);
  // Bias correction divides by zero at step 0: NaN makes that visible.
  const float step_size = step >= 1.0f ? lr / (1.0f - pow(beta1, step)) : NAN;
  const float bc2_sqrt = step >= 1.0f ? sqrt(1.0f - pow(beta2, step)) : NAN;
  const float decay = decoupled ? 1.0f - lr * wd : 1.0f;
  const float l2 = decoupled ? 0.0f : wd;
  const float pj = p[j];
  const float d = gs * g[j] + l2 * pj;
  const float mj = beta1 * m[j] + (1.0f - beta1) * d;
  const float vj = beta2 * v[j] + (1.0f - beta2) * (d * d);
  m_out[j] = mj;
  v_out[j] = vj;
  float vm = vj;
  if (amsgrad) {
    vm = vmax[j] >= vj ? vmax[j] : vj;
    vmax_out[j] = vm;
  }
  p_out[j] = pj * decay - step_size * mj / (sqrt(vm) / bc2_sqrt + eps);
}

// global_norm and clip_by_global_norm in three steps over a float workspace:
// sumsq_f32 writes one partial sum of squares per block of NORM_BLOCK
// elements (one work-group per block, a tree in local memory), norm_finish_f32
// adds the partials in order in one work-group and writes the norm and the
// clip factor, scale_f32 multiplies by the factor. The reference adds in
// double; these add in float (differences of about 1e-6 relative).
#define NORM_GROUP 256
#define NORM_BLOCK (NORM_GROUP * 16)

__kernel __attribute__((reqd_work_group_size(NORM_GROUP, 1, 1)))
void sumsq_f32(__global const float* x, long n, __global float* ws, long slot) {
  __local float part[NORM_GROUP];
  const int t = (int)get_local_id(0);
  const long start = get_group_id(0) * (long)NORM_BLOCK;
  float acc = 0.0f;
  for (long j = start + t; j < n && j < start + NORM_BLOCK; j += NORM_GROUP) acc = fma(x[j], x[j], acc);
  part[t] = acc;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = NORM_GROUP / 2; s > 0; s >>= 1) {
    if (t < s) part[t] += part[t + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (t == 0) ws[slot + get_group_id(0)] = part[0];
}

__kernel __attribute__((reqd_work_group_size(NORM_GROUP, 1, 1)))
void norm_finish_f32(__global float* ws, long parts, __global float* norm_out, float max_norm) {
  __local float part[NORM_GROUP];
  const int t = (int)get_local_id(0);
  float acc = 0.0f;
  for (long j = t; j < parts; j += NORM_GROUP) acc += ws[j];
  part[t] = acc;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = NORM_GROUP / 2; s > 0; s >>= 1) {
    if (t < s) part[t] += part[t + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (t == 0) {
    const float norm = sqrt(part[0]);
    *norm_out = norm;
    const float f = max_norm / (norm + 1e-6f);
    ws[parts] = (f < 1.0f || isnan(f)) ? f : 1.0f;  // NaN stays NaN, as torch.clamp
  }
}

__kernel void scale_f32(__global const float* x, __global float* y, long n, __global const float* ws, long slot) {
  const long j = get_global_id(0);
  if (j >= n) return;
  y[j] = x[j] * ws[slot];
}
