// An operand of a oneDNN primitive whose preferred layout (format_tag::any)
// may differ from the tensor's plain one: the reorder between them is made
// at plan time and the primitive-layout copy lives in the kernel workspace.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

#include "onednn_plan.h"

namespace spora::cpu {

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

// One launch's memories of an operand: `user` over the tensor's buffer and
// `prim`, what the primitive reads or writes (the workspace copy when
// reordered, else `user`).
struct BoundOperand {
  dnnl::memory user, prim;
};

// Binds `o` to `buffer` for one launch; an input in another layout is
// converted into its workspace copy first.
inline BoundOperand bind_operand(const ReorderedOperand& o, dnnl::stream& strm, void* buffer, void* workspace) {
  auto& eng = onednn_engine();
  BoundOperand b;
  b.user = dnnl::memory(o.user, eng, buffer);
  if (!o.reordered) {
    b.prim = b.user;
    return b;
  }
  b.prim = dnnl::memory(o.prim, eng, static_cast<char*>(workspace) + o.offset);
  if (!o.output) o.convert.execute(strm, b.user, b.prim);
  return b;
}

// After the primitive ran: an output in another layout is converted back
// into the tensor.
inline void finish_operand(const ReorderedOperand& o, dnnl::stream& strm, BoundOperand& b) {
  if (o.output && o.reordered) o.convert.execute(strm, b.prim, b.user);
}

}  // namespace spora::cpu
