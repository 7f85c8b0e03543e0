// The program of fused_elementwise (core/src/ops/fused.cpp): a small SSA
// list of elementwise instructions over the op's inputs and scalar
// constants, parsed and printed here so that the op's inference, its
// decomposition and the elementwise_fusion pass share one grammar.
//
//   program     := instruction (';' instruction)* [';']
//   instruction := operand+ op attr*
//   operand     := 'in'K     input K of the op (0-based)
//                | 't'K      the result of instruction K (K < this one's index)
//                | 'c:'NUM   a scalar constant (strtod syntax: 0.5, -1e-3, inf,
//                            nan, 0x1p-3), rounded to the op's float dtype
//   attr        := NAME '=' VALUE   an attribute of `op` (alpha=0.2,
//                                   approximate=tanh, min=-1, ...)
//
// The result of the last instruction is the op's output. Example,
// sigmoid(x) * x + 1:  "in0 sigmoid; t0 in0 mul; t1 c:1 add".
//
// Tokens are separated by blanks; the canonical text (format) puts one space
// between tokens and "; " between instructions, prints numbers as the
// shortest text that reads back to the same double, and leaves out
// attributes equal to the op's default.
#pragma once
#include <string>
#include <vector>

#include "ir/attrs.h"
#include "ir/op.h"

namespace spora::fused {

constexpr const char* kOpName = "fused_elementwise";
// A program longer than this is refused (plans are built per instruction).
constexpr int kMaxInstructions = 128;
// Inputs of one fused op: fewer than the registry's limit, since the
// kernels keep per-input block state and wide groups gain little.
constexpr int kMaxInputs = 16;

struct Operand {
  enum Kind { kInput, kTemp, kConst } kind = kInput;
  int index = 0;      // kInput: input index; kTemp: instruction index
  double value = 0;   // kConst
};

struct Instr {
  const OpDef* op = nullptr;
  std::vector<Operand> args;
  Attrs attrs;  // as written (parse) or as the op's inference left them
};

struct Program {
  std::vector<Instr> instrs;
};

// True for the elementwise ops a program may use: every unary, binary,
// comparison and logical op and where (not cast: a program has one float
// dtype).
bool allowed_op(const std::string& op);

// Parses the syntax; errors name fused_elementwise and the instruction.
// Operand ranges, arities and dtypes are checked by the op's inference.
Program parse(const std::string& text);

// The canonical text of `p`.
std::string format(const Program& p);

}  // namespace spora::fused
