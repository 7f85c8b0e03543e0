// fused_elementwise kernels, shared by the reference implementation and the
// cpu plugin: the program (core/src/ops/fused.h has the grammar; the host
// has validated it and left it canonical) is planned once into a list of
// instructions, each one elementwise kernel's range function (elementwise.h)
// run over a block of elements held in small buffers. A block's inputs are
// read (or gathered where they broadcast) once, every instruction runs on
// the buffers, and the output is written once: one pass over memory.
//
// Values are the compute type (f32 for f32/f16/bf16, f64 for f64) or bool
// (one byte). Values that are the same for every element (scalar inputs,
// constants, instructions on only those) are "uniform": computed once per
// range call and read with stride 0, so no loop ever recomputes them.
#pragma once
#include <cstdint>
#include <vector>

#include "kernel_plan.h"
#include "kernels/elementwise.h"

namespace spora::plugin::fused {

// Block conversions of 16-bit floats (the cpu plugin plugs in F16C ones).
using ToF32 = void (*)(const uint16_t* x, float* y, int64_t n);
using FromF32 = void (*)(const float* x, uint16_t* y, int64_t n);

struct Input {
  enum Mode : uint8_t {
    kDirect,   // same shape as the output, stored in the compute type or bool: read in place
    kConvert,  // same shape, 16-bit float: converted per block
    kUniform,  // one element: read once
    kGather,   // broadcasts along some dims: gathered per block through `bc`
  } mode = kDirect;
  int32_t dtype = 0;
  ew::Bcast bc;  // kGather: the input's offsets over the output
};

struct Value {
  bool is_bool = false;  // else the compute type
  bool uniform = false;
  int32_t slot = -1;     // block buffer; -1 for uniform values and direct inputs
  int32_t input = -1;    // an input's index
  double constant = 0;   // a constant's value (input < 0 and no instruction)
  bool is_const = false;
};

struct Instr {
  ew::State st;  // the op's range function, parameters and operand strides
  int32_t nargs = 0;
  int32_t args[3] = {};  // value ids
  int32_t result = 0;    // value id
  int32_t cost = 1;      // elementwise.h's per-element cost
};

struct Program {
  int32_t dtype = 0;   // the output's (and float inputs') storage dtype
  int32_t cdtype = 0;  // the compute dtype: f32 or f64
  int64_t numel = 0;
  int64_t block = 0;   // elements per block
  std::vector<Input> inputs;
  std::vector<Value> values;  // inputs, then one per instruction, then constants
  std::vector<Instr> prologue;  // uniform instructions, run once per range call
  std::vector<Instr> body;      // per block
  int32_t num_slots = 0;
  int32_t out_value = 0;
  bool out_direct = false;  // the last body instruction writes the output in place
  int32_t cost = 0;         // sum of the body's per-element costs
  ToF32 to_f32 = nullptr;
  FromF32 from_f32 = nullptr;
};

// Bytes of one block buffer: 512 f32 / 256 f64 elements. Measured on the
// Zen4 machines (a 4-op chain, blocks in L1): 256-512 elements run the
// same, 1024 ~1.5x and 4096 ~2x slower (the buffers leave L1, and block
// strides of 4 KiB alias the input streams).
constexpr int64_t kSlotBytes = 2048;

// Plans `p` (a fused_elementwise descriptor) into a Program: p.state is the
// Program and p.run evaluates the whole output on the calling thread.
spora_plugin_error_t* plan(KernelPlan& p);

// Computes output elements [begin, end).
void eval_range(const Program& prog, const void* const* in, void* out, int64_t begin, int64_t end);

}  // namespace spora::plugin::fused
