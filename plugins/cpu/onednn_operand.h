// An operand of a oneDNN primitive whose preferred layout (format_tag::any)
// may differ from the tensor's plain one: the reorder between them is made
// at plan time and the primitive-layout copy lives in the kernel workspace.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

#include "cpu_kernels.h"

namespace spora::cpu {

inline size_t align_up(size_t n) { return (n + 63) / 64 * 64; }

struct ReorderedOperand {
  int arg = 0;    // DNNL_ARG_*
  int index = 0;  // input or output index
  bool output = false;
  dnnl::memory::desc user, prim;  // plain layout, primitive's layout
  bool reordered = false;
  dnnl::reorder convert;  // user -> prim for inputs, prim -> user for the output
  size_t offset = 0;      // in the workspace, when reordered
};

// Plans the operand; grows `ws` by the workspace bytes its copy needs.
inline ReorderedOperand make_operand(size_t& ws, int arg, int index, bool output, const dnnl::memory::desc& user,
                                     const dnnl::memory::desc& prim) {
  ReorderedOperand o;
  o.arg = arg;
  o.index = index;
  o.output = output;
  o.user = user;
  o.prim = prim;
  o.reordered = user != prim;
  if (o.reordered) {
    auto& eng = onednn_engine();
    o.convert = output ? dnnl::reorder(dnnl::reorder::primitive_desc(eng, prim, eng, user))
                       : dnnl::reorder(dnnl::reorder::primitive_desc(eng, user, eng, prim));
    o.offset = ws;
    ws += align_up(prim.get_size());
  }
  return o;
}

}  // namespace spora::cpu
