// What a pass may ask of the device a graph is optimised for, instead of
// knowing any device or plugin itself. The runtime registers the host
// device's answers; a PassContext may carry another target's.
#pragma once
#include "ir/attrs.h"
#include "ir/op.h"

namespace spora::passes {

class Target {
 public:
  virtual ~Target() = default;
  // True when the device runs `op` with `attrs` faster with its own kernel
  // than as one instruction of a fused_elementwise block (its own kernel is
  // vectorised where the fused one would call a scalar function).
  // elementwise_fusion leaves such ops out of groups. Default: never.
  virtual bool runs_faster_alone(const OpDef& op, const Attrs& attrs) const {
    (void)op, (void)attrs;
    return false;
  }
  // True when the device runs a convolution with its activation and the max
  // pooling that reads it faster as one conv2d_act_pool (its kernel keeps
  // the activation in the convolution's own layout, ops/conv_pool.cpp) than
  // as two ops; `keep_activation`: the activation is also read elsewhere
  // and must be written out too. conv_pool_fusion asks. Default: never.
  virtual bool fuses_conv_pool(DType dtype, bool keep_activation) const {
    (void)dtype, (void)keep_activation;
    return false;
  }
  // True when the device runs the backward ops of a convolution with a relu
  // and a max pooling (max_pool2d_grad, the relu mask, the convolution and
  // bias gradients) faster as one conv2d_act_pool_grad (ops/conv_pool_grad.cpp).
  // conv_pool_grad_fusion asks. Default: never.
  virtual bool fuses_conv_pool_grad(DType dtype) const {
    (void)dtype;
    return false;
  }
  // True when the device's conv2d_act_pool and conv2d_act_pool_grad kernels
  // can hand the kept activation over in their own blocked layout
  // (conv2d_act_pool output 1 -> conv2d_act_pool_grad input 2; channels a
  // multiple of 16, the backward op its only reader). blocked_handoff asks.
  // Default: never.
  virtual bool blocks_kept_activation(DType dtype) const {
    (void)dtype;
    return false;
  }
  // True when the device's conv2d_act_pool and conv2d_act_pool_grad kernels
  // can hand values between consecutive layers (a pooled result to the next
  // convolution, an input gradient to the previous layer's backward op) in
  // that same blocked layout (blocked_inputs / blocked_outputs; the value's
  // channels a multiple of 16, every reader such a kernel). blocked_handoff
  // asks. Default: never.
  virtual bool blocks_layer_handoffs(DType dtype) const {
    (void)dtype;
    return false;
  }
};

// The process's target (a Target with the defaults until one is
// registered). Same rules as set_default_evaluator.
int set_default_target(const Target* t);
const Target& default_target();

}  // namespace spora::passes
