// Rows held in registers, shared by the register paths of softmax
// (softmax_math.h) and layer norm (layer_norm_fast.h): which shape a row
// takes -- a warp or a block per row, how many elements each thread
// caches, in vectors of how many -- and where a thread's cached slots lie.
#pragma once
#include <cstddef>
#include <cstdint>

#include "hd.h"

namespace spora::gpu {

// `threads` threads (a warp or the block) per row, `per` cached elements
// per thread, vectors of `vec` elements. threads == 0: the row does not fit.
struct RegRowCfg {
  int32_t threads = 0, per = 0, vec = 1;
};

// The shape for rows of `len` elements of `size` bytes: the smallest `per`
// (a power of two from 4) with which a warp of `warp` lanes covers the row
// -- at most `warp_max_per`, or 16 element by element, where 32 slots would
// take every register -- else, with whole 16-byte vectors only, the
// smallest `per` from 8 up to `block_max_per` with which `block` threads
// do. `vec_ok`: the row tensors are 16-byte aligned (vectors are then used
// when the row is a whole number of them).
inline RegRowCfg reg_row_cfg(int64_t len, size_t size, bool vec_ok, int warp, int block, int warp_max_per,
                             int block_max_per) {
  RegRowCfg c;
  if (len < 1) return c;
  const int full = static_cast<int>(16 / size);
  const int vec = vec_ok && len % full == 0 ? full : 1;
  for (int per = 4; per <= (vec == 1 ? 16 : warp_max_per); per *= 2)
    if (static_cast<int64_t>(warp) * per >= len) {
      c.threads = warp;
      c.per = per;
      c.vec = vec < per ? vec : per;
      return c;
    }
  if (vec == 1) return c;
  for (int per = 8; per <= block_max_per; per *= 2)
    if (static_cast<int64_t>(block) * per >= len) {
      c.threads = block;
      c.per = per;
      c.vec = vec < per ? vec : per;
      return c;
    }
  return c;
}

// Row position of thread t's cached slot k: slots go in vectors, vector g
// of thread t at ((g * threads) + t) * vec, so a warp's loads are
// consecutive.
SPORA_HD inline int64_t reg_row_pos(int threads, int vec, int t, int k) {
  return (static_cast<int64_t>(k / vec) * threads + t) * vec + k % vec;
}

}  // namespace spora::gpu
